// The static checks of an image (CUDA code for the archs, libraries that
// resolve, versions against the resolved ones) and the reports. GPU discovery
// and injection are in test_verify_gpu.cpp.
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "helpers.hpp"
#include "util/error.hpp"
#include "util/process.hpp"
#include "verify/driver_check.hpp"
#include "verify/elf.hpp"
#include "verify/fatbin.hpp"
#include "verify/gpu.hpp"
#include "verify/report.hpp"
#include "verify/run_in_image.hpp"
#include "verify/static_checks.hpp"

using namespace sb;
using namespace sb::verify;

TEST_CASE("fat binaries: SASS and PTX entries - what runs where", "[verify][cuda]") {
  // A container with an sm_80 cubin and compute_90 PTX, as nvcc writes them.
  std::string sec(16 + 64 + 8 + 80 + 8, '\0');
  auto put32 = [&](size_t off, uint32_t v) { std::memcpy(&sec[off], &v, 4); };
  auto put16 = [&](size_t off, uint16_t v) { std::memcpy(&sec[off], &v, 2); };
  put32(0, 0xBA55ED50);
  put16(4, 1);
  put16(6, 16);
  uint64_t size = 64 + 8 + 80 + 8;
  std::memcpy(&sec[8], &size, 8);
  put16(16, 2), put32(20, 64), put32(24, 8), put32(16 + 28, 80);                    // ELF sm_80
  put16(16 + 72, 1), put32(16 + 72 + 4, 80), put32(16 + 72 + 8, 8), put32(16 + 72 + 28, 90);  // PTX 90
  GpuCode code = parse_fatbin(sec);
  CHECK(code.sass == std::set<int>{80});
  CHECK(code.ptx == std::set<int>{90});
  CHECK(runs_on(code, 80));
  CHECK(runs_on(code, 86));   // sm_80 SASS runs on 8.6
  CHECK_FALSE(runs_on(code, 75));
  CHECK(runs_on(code, 90));   // PTX compiled by the driver
  CHECK(runs_on(code, 100));
  CHECK(sm_number("8.6") == 86);
  CHECK_THROWS_WITH(sm_number("86"), Catch::Contains("bad compute capability"));
  sec[0] = 'x';
  CHECK_THROWS_WITH(parse_fatbin(sec), Catch::Contains("bad magic"));
}

namespace {

// A fat binary container as nvcc writes it: entries of {kind, sm}, each a
// 64-byte header (version 0x0101) and an 8-byte payload.
std::string fatbin(const std::vector<std::pair<uint16_t, uint32_t>>& entries) {
  std::string out(16 + entries.size() * 72, '\0');
  auto put = [&](size_t off, auto v) { std::memcpy(&out[off], &v, sizeof v); };
  put(0, uint32_t{0xBA55ED50});
  put(4, uint16_t{1});
  put(6, uint16_t{16});
  put(8, uint64_t{entries.size() * 72});
  for (size_t i = 0; i < entries.size(); ++i) {
    size_t e = 16 + i * 72;
    put(e, entries[i].first);
    put(e + 2, uint16_t{0x0101});
    put(e + 4, uint32_t{64});
    put(e + 8, uint64_t{8});
    put(e + 28, entries[i].second);
  }
  return out;
}

std::string str(const GpuCode& c) {
  std::string s;
  for (int x : c.sass) s += "sm_" + std::to_string(x) + " ";
  for (int x : c.ptx) s += "compute_" + std::to_string(x) + " ";
  return s;
}

struct FakeSection {
  std::string name;
  uint32_t type;
  uint64_t flags;
  std::string bytes;
};

// A minimal ELF64 file holding `sections` (and .shstrtab): what gpu_code_of reads.
std::string fake_elf(const std::vector<FakeSection>& sections) {
  std::string names(1, '\0');
  std::vector<uint32_t> name_at;
  for (const auto& s : sections) name_at.push_back(names.size()), names += s.name + '\0';
  uint32_t shstrtab_name = names.size();
  names += std::string(".shstrtab") + '\0';
  std::string out(sizeof(Elf64_Ehdr), '\0');
  std::vector<Elf64_Shdr> headers(1, Elf64_Shdr{});
  for (size_t i = 0; i < sections.size(); ++i) {
    out.resize((out.size() + 7) / 8 * 8, '\0');
    Elf64_Shdr h{};
    h.sh_name = name_at[i], h.sh_type = sections[i].type, h.sh_flags = sections[i].flags;
    h.sh_offset = out.size(), h.sh_size = sections[i].bytes.size(), h.sh_addralign = 8;
    out += sections[i].bytes;
    headers.push_back(h);
  }
  Elf64_Shdr h{};
  h.sh_name = shstrtab_name, h.sh_type = SHT_STRTAB, h.sh_offset = out.size(), h.sh_size = names.size();
  out += names;
  headers.push_back(h);
  out.resize((out.size() + 7) / 8 * 8, '\0');
  Elf64_Ehdr e{};
  std::memcpy(e.e_ident, ELFMAG, SELFMAG);
  e.e_ident[EI_CLASS] = ELFCLASS64, e.e_ident[EI_DATA] = ELFDATA2LSB, e.e_ident[EI_VERSION] = EV_CURRENT;
  e.e_type = ET_DYN, e.e_machine = EM_X86_64, e.e_version = EV_CURRENT, e.e_ehsize = sizeof e;
  e.e_shoff = out.size(), e.e_shentsize = sizeof(Elf64_Shdr), e.e_shnum = headers.size();
  e.e_shstrndx = headers.size() - 1;
  std::memcpy(&out[0], &e, sizeof e);
  out.append(reinterpret_cast<const char*>(headers.data()), headers.size() * sizeof(Elf64_Shdr));
  return out;
}

// A cuFFT-like library: .nv_fatbin with sm_52 only, its other kernels in
// fat binaries in .rodata, and a fat binary in .text that is not data.
std::string cufft_like() {
  std::string rodata = "some constant data" + std::string(6, '\0') + fatbin({{2, 80}, {8, 80}, {1, 90}}) +
                       "more" + std::string(4, '\0') + fatbin({{2, 90}});
  return fake_elf({{".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, "\x90\x90" + fatbin({{2, 70}})},
                   {".rodata", SHT_PROGBITS, SHF_ALLOC, rodata},
                   {".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{2, 52}})},
                   {".comment", SHT_PROGBITS, 0, fatbin({{2, 60}})}});
}

}  // namespace

TEST_CASE("fat binaries embedded in data sections count with .nv_fatbin's", "[verify][cuda]") {
  TempDir dir;
  test::write(dir.path() / "libcufft.so.11", cufft_like());
  GpuCode code = gpu_code_of(dir.path() / "libcufft.so.11");
  // sm_52 from .nv_fatbin, sm_80, sm_90 and compute_90 from .rodata; the
  // kind-8 entry (LTO IR) ignored; nothing from code or non-loaded sections.
  CHECK(str(code) == "sm_52 sm_80 sm_90 compute_90 ");
  CHECK(runs_on(code, 80));
  CHECK(runs_on(code, 86));
  CHECK(runs_on(code, 90));

  // Only .nv_fatbin: the library's own gap, as before.
  test::write(dir.path() / "libcufftw.so.11", fake_elf({{".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{2, 52}})}}));
  CHECK(str(gpu_code_of(dir.path() / "libcufftw.so.11")) == "sm_52 ");
  // No .nv_fatbin at all, kernels in .data (CUPTI): still found.
  test::write(dir.path() / "libcupti.so", fake_elf({{".data", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, fatbin({{2, 80}})}}));
  CHECK(str(gpu_code_of(dir.path() / "libcupti.so")) == "sm_80 ");
  // No GPU code: empty.
  test::write(dir.path() / "plain.so", fake_elf({{".rodata", SHT_PROGBITS, SHF_ALLOC, "hello"}}));
  CHECK(gpu_code_of(dir.path() / "plain.so").empty());
}

TEST_CASE("the magic in other data is not a fat binary", "[verify][cuda]") {
  std::string good = fatbin({{2, 80}});
  size_t n = 0;
  CHECK(str(scan_embedded_fatbins("xx" + good + "yy", &n)) == "sm_80 ");
  CHECK(n == 1);

  // Each of these breaks one rule; none may count.
  auto broken = [&](size_t off, auto v) {
    std::string b = good;
    std::memcpy(&b[off], &v, sizeof v);
    return b;
  };
  std::string magic_then_garbage = good.substr(0, 4) + "garbage after the magic, not a container at all......";
  std::string cases[] = {
      magic_then_garbage,
      broken(4, uint16_t{2}),                 // container version
      broken(6, uint16_t{24}),                // header size
      broken(8, uint64_t{72 + 8}),            // size past the entries: the chain does not end there
      broken(8, uint64_t{64}),                // size inside the entry
      broken(8, uint64_t{1} << 40),           // size past the end of the bytes
      broken(16 + 2, uint16_t{0x0202}),       // entry version
      broken(16 + 4, uint32_t{12}),           // entry header size
      broken(16 + 8, uint64_t{9}),            // payload not padded
      broken(16 + 8, uint64_t{1} << 33),      // payload past the container
      broken(16, uint16_t{0}),                // entry kind
      broken(16 + 28, uint32_t{0}),           // no sm
      broken(16 + 28, uint32_t{0x41414141}),  // text where the sm is
      good.substr(0, good.size() - 8),        // truncated
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    INFO("case " << i);
    n = 0;
    CHECK(scan_embedded_fatbins("...." + cases[i] + "....", &n).empty());
    CHECK(n == 0);
  }
  // A broken one does not hide a good one after it, nor one inside it.
  n = 0;
  CHECK(str(scan_embedded_fatbins(magic_then_garbage + good + broken(4, uint16_t{2}) + fatbin({{1, 90}}), &n)) ==
        "sm_80 compute_90 ");
  CHECK(n == 2);
  // Unknown entry kinds are skipped, the container still counts.
  n = 0;
  CHECK(scan_embedded_fatbins(fatbin({{8, 80}, {4, 75}}), &n).empty());
  CHECK(n == 1);
}

TEST_CASE("gpu_code_of_file reads ELF files - static libraries and raw fat binaries", "[verify][cuda]") {
  TempDir dir;
  const fs::path d = dir.path();
  test::write(d / "libk.so", fake_elf({{".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{2, 80}, {2, 90}, {1, 90}})}}));
  CHECK(str(gpu_code_of_file(d / "libk.so")) == "sm_80 sm_90 compute_90 ");
  // An ar archive of two objects: both members' fat binaries.
  std::string a = fake_elf({{".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{2, 86}})}});
  std::string b = fake_elf({{".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{1, 75}})}});
  auto member = [](const std::string& name, const std::string& bytes) {
    char h[61];
    snprintf(h, sizeof h, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name.c_str(), "0", "0", "0", "644", bytes.size());
    return std::string(h, 60) + bytes + (bytes.size() % 2 ? "\n" : "");
  };
  test::write(d / "libk.a", "!<arch>\n" + member("a.o/", a) + member("b.o/", b));
  CHECK(str(gpu_code_of_file(d / "libk.a")) == "sm_86 compute_75 ");
  // nvcc --fatbin output: containers only.
  test::write(d / "k.fatbin", fatbin({{2, 100}}) + std::string(8, '\0') + fatbin({{1, 120}}));
  CHECK(str(gpu_code_of_file(d / "k.fatbin")) == "sm_100 compute_120 ");
  std::string bad = fatbin({{2, 100}});
  bad[16 + 4] = 0, bad[16 + 5] = 0;  // an entry with an empty header
  test::write(d / "bad.fatbin", bad);
  CHECK_THROWS_WITH(gpu_code_of_file(d / "bad.fatbin"), Catch::Contains("bad.fatbin: malformed fat binary"));
  // ELF without GPU code: empty, not an error.
  test::write(d / "plain.so", fake_elf({{".rodata", SHT_PROGBITS, SHF_ALLOC, "hello"}}));
  CHECK(gpu_code_of_file(d / "plain.so").empty());
  // Anything else is an error naming the file.
  test::write(d / "k.cu", "__global__ void k() {}\n");
  CHECK_THROWS_WITH(gpu_code_of_file(d / "k.cu"), Catch::Contains("k.cu: not an ELF file, a static library"));
  test::write(d / "empty", "");
  CHECK_THROWS_WITH(gpu_code_of_file(d / "empty"), Catch::Contains("empty: not an ELF file"));
  CHECK_THROWS_WITH(gpu_code_of_file(d / "missing.so"), Catch::Contains("missing.so"));
  CHECK_THROWS_WITH(gpu_code_of_file(d), Catch::Contains("is a directory"));
}

TEST_CASE("static check: arch gaps of ignored files are listed - not failed", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  fs::path lib = root / "usr/local/lib/python3.11/dist-packages/nvidia/cufft/lib";
  test::write(lib / "libcufft.so.11", cufft_like());
  test::write(lib / "libcufftw.so.11", fake_elf({{".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{2, 52}})}}));
  ImageRoot image(root);
  const std::vector<std::string> arch{"8.0", "8.6", "9.0"};
  const std::string cufftw = "/usr/local/lib/python3.11/dist-packages/nvidia/cufft/lib/libcufftw.so.11";

  TestResult bad = check_cuda_arch(image, arch);
  INFO(summary_table(VerifyReport{"x", {bad}}));
  CHECK(bad.outcome == Outcome::Failed);
  CHECK(bad.message == "3 gaps in 2 CUDA binaries");  // libcufftw's three; libcufft's embedded code counts
  CHECK(bad.details == std::vector<std::string>{cufftw + ": no code for sm_80 (has sm_52)",
                                                cufftw + ": no code for sm_86 (has sm_52)",
                                                cufftw + ": no code for sm_90 (has sm_52)"});

  TestResult ok = check_cuda_arch(image, arch, {"**/libcufftw.so.*", "/opt/nothing/*.so"});
  INFO(summary_table(VerifyReport{"x", {ok}}));
  CHECK(ok.outcome == Outcome::Passed);
  CHECK(ok.message == "2 CUDA binaries carry code for every requested arch, but for 3 gaps ignored in 1 file "
                      "(static_checks.arch_ignore)");
  REQUIRE(ok.details.size() == 4);
  CHECK(ok.details[0] == "ignored (static_checks.arch_ignore **/libcufftw.so.*): " + cufftw +
                             ": no code for sm_80 (has sm_52)");
  CHECK(ok.details[3] == "unused: static_checks.arch_ignore /opt/nothing/*.so matches no file with a finding");

  // Ignoring another file lets nothing through.
  TestResult still = check_cuda_arch(image, arch, {"**/libcufft.so.*"});
  CHECK(still.outcome == Outcome::Failed);
  CHECK(still.message == "3 gaps in 2 CUDA binaries");
  CHECK(still.details.back() == "unused: static_checks.arch_ignore **/libcufft.so.* matches no file with a finding");
}

TEST_CASE("the GPU's own arch: code each CUDA binary has that it runs", "[verify][static][gpu]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  test::write(root / "usr/lib/libk.so",
              fake_elf({{".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{2, 80}, {1, 90}})}}));
  test::write(root / "usr/lib/libold.so",
              fake_elf({{".nv_fatbin", SHT_PROGBITS, SHF_ALLOC, fatbin({{2, 70}})}}));
  ImageRoot image(root);
  CudaBinaries found = cuda_binaries(image);
  REQUIRE(found.code.size() == 2);

  // sm_75: libk's sm_80 SASS is of a higher arch, its PTX too; libold's sm_70 SASS runs there.
  TestResult t = check_gpu_code(found, "7.5", "GPU 0, 1");
  CHECK(t.name == "gpu: CUDA code for sm_75 (GPU 0, 1)");
  CHECK(t.kind == "gpu");
  CHECK(t.outcome == Outcome::Failed);
  CHECK(t.message == "1 gap in 2 CUDA binaries");
  CHECK(t.details ==
        std::vector<std::string>{"/usr/lib/libk.so: no code for sm_75 (has sm_80 compute_90)"});
  // sm_86 runs libk's sm_80 SASS, not libold's sm_70 (another major); libold ignored, it passes.
  TestResult ampere = check_gpu_code(found, "8.6", "GPU 0", {"/usr/lib/libold.so"});
  CHECK(ampere.outcome == Outcome::Passed);
  CHECK_THAT(ampere.message,
             Catch::StartsWith("2 CUDA binaries carry code for sm_86, the GPU here"));
  // sm_100 compiles libk's compute_90 PTX; libold has none.
  TestResult blackwell = check_gpu_code(found, "10.0", "GPU 0");
  CHECK(blackwell.details ==
        std::vector<std::string>{"/usr/lib/libold.so: no code for sm_100 (has sm_70)"});
  // The same read serves the requested archs.
  CHECK(check_cuda_arch(found, {"8.0"}).details ==
        std::vector<std::string>{"/usr/lib/libold.so: no code for sm_80 (has sm_70)"});
  // No CUDA binaries: nothing to say.
  CHECK(check_gpu_code(CudaBinaries{}, "9.0", "GPU 0").outcome == Outcome::Skipped);
}

TEST_CASE("static check: every needed library resolves inside the image", "[verify][static]") {
  auto info = read_elf("/bin/true");
  REQUIRE(info);
  REQUIRE(std::find(info->needed.begin(), info->needed.end(), "libc.so.6") != info->needed.end());
  TempDir dir;
  fs::path root = dir.path() / "root";
  fs::create_directories(root / "usr/bin");
  fs::create_directories(root / "usr/lib/x86_64-linux-gnu");
  fs::create_directories(root / "lib64");
  fs::copy_file("/bin/true", root / "usr/bin/true");
  fs::copy_file(fs::canonical("/lib/x86_64-linux-gnu/libc.so.6"), root / "usr/lib/x86_64-linux-gnu/libc.so.6");
  fs::copy_file(fs::canonical(info->interpreter), root / "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
  fs::create_symlink("usr/lib", root / "lib");  // merged /usr, as Debian has it
  fs::create_symlink("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", root / "lib64/ld-linux-x86-64.so.2");
  // A driver library need is excepted: the host brings it.
  ImageRoot image(root);
  TestResult ok = check_libraries(image, {});
  INFO(summary_table(VerifyReport{"x", {ok}}));
  CHECK(ok.outcome == Outcome::Passed);

  fs::remove(root / "usr/lib/x86_64-linux-gnu/libc.so.6");
  TestResult bad = check_libraries(image, {});
  CHECK(bad.outcome == Outcome::Failed);
  CHECK(std::count(bad.details.begin(), bad.details.end(), "/usr/bin/true: needs libc.so.6, which is not in the image") == 1);
  TestResult ignored = check_libraries(image, {}, {"/usr/bin/*"});
  INFO(summary_table(VerifyReport{"x", {ignored}}));
  CHECK(ignored.outcome == Outcome::Passed);
  CHECK(ignored.message == "2 dynamic ELF files checked, but for 1 unresolved library ignored in 1 file "
                           "(static_checks.libraries_ignore)");
  CHECK(ignored.details ==
        std::vector<std::string>{"ignored (static_checks.libraries_ignore /usr/bin/*): /usr/bin/true: needs libc.so.6, "
                                 "which is not in the image"});
  // The image has it, but only where the loader does not look from /usr/bin/true: said so.
  fs::create_directories(root / "opt/elsewhere");
  fs::copy_file(fs::canonical("/lib/x86_64-linux-gnu/libc.so.6"), root / "opt/elsewhere/libc.so.6");
  TestResult away = check_libraries(image, {});
  CHECK(away.outcome == Outcome::Failed);
  CHECK(std::count(away.details.begin(), away.details.end(),
                   "/usr/bin/true: needs libc.so.6, which the image has at /opt/elsewhere/libc.so.6, outside this "
                   "file's search path (its RUNPATH, LD_LIBRARY_PATH, the linker cache)") == 1);
  CHECK(check_libraries(image, {"/opt/elsewhere"}).outcome == Outcome::Passed);
  CHECK(is_driver_library("libcuda.so.1"));
  CHECK(is_driver_library("libnvidia-ml.so.1"));
  CHECK_FALSE(is_driver_library("libcudart.so.12"));
}

namespace {

// A shared object with no libc, built by the host's cc: `needs` are linked
// from `dir` by file name, `link` are extra linker flags (-rpath and the like).
void shared_object(const fs::path& out, const std::string& soname, const fs::path& dir,
                   const std::vector<std::string>& needs,
                   const std::vector<std::string>& link = {}) {
  fs::path src = out.string() + ".c";
  write_file_atomic(src, "int f_" + std::to_string(std::hash<std::string>{}(soname) % 100000) +
                             "(void) { return 1; }\n");
  ProcessSpec p;
  p.env = current_environment();
  p.capture_stdout = p.merge_stderr = true;
  p.argv = {"cc",
            "-shared",
            "-nostdlib",
            "-fPIC",
            "-o",
            out.string(),
            src.string(),
            "-Wl,-soname," + soname,
            "-L" + dir.string(),
            "-Wl,--no-as-needed"};
  for (const auto& n : needs) p.argv.push_back("-l:" + n);
  for (const auto& l : link) p.argv.push_back(l);
  auto r = run_process(p);
  INFO(r.output);
  REQUIRE(r.exit_status == 0);
  fs::remove(src);
}

}  // namespace

TEST_CASE("gpu: what the injected driver libraries need from the image", "[verify][gpu]") {
  // On the H200 an image without libdl.so.2 got the driver's libcuda, which
  // needs it: cudart reported "CUDA driver version is insufficient". A fake
  // libcuda that needs a libdl-fake.so.2 and a driver library; a non-ELF
  // libnvidia-ml; a program.
  TempDir dir;
  fs::path host = dir.path() / "host", root = dir.path() / "root";
  fs::create_directories(host / "drv");
  fs::create_directories(root / "usr/lib/x86_64-linux-gnu");
  shared_object(host / "drv/libdl-fake.so.2", "libdl-fake.so.2", host / "drv", {});
  shared_object(host / "drv/libnvidia-gpucomp.so.580.1", "libnvidia-gpucomp.so.580.1", host / "drv",
                {});
  shared_object(host / "drv/libcuda.so.580.1", "libcuda.so.1", host / "drv",
                {"libdl-fake.so.2", "libnvidia-gpucomp.so.580.1"});
  write_file_atomic(host / "drv/libnvidia-ml.so.580.1", "not an ELF file");
  // The debugger's library needs it too, but loads only under cuda-gdb: no warning.
  shared_object(host / "drv/libcudadebugger.so.580.1", "libcudadebugger.so.1", host / "drv",
                {"libdl-fake.so.2"});
  GpuInjection g;
  for (const char* lib : {"libcuda.so.580.1", "libnvidia-ml.so.580.1", "libcudadebugger.so.580.1"})
    g.mounts.push_back(
        {fs::path("drv") / lib, std::string("/usr/lib/x86_64-linux-gnu/") + lib, true});
  g.mounts.push_back({"drv/nvidia-smi", "/usr/bin/nvidia-smi", false});
  ImageRoot image(root);
  CHECK(driver_library_gaps(image, g, host) ==
        std::vector<std::string>{
            "the driver's libcuda.so.580.1 needs libdl-fake.so.2, which the image lacks: it will "
            "not load there (the CUDA runtime then reports \"CUDA driver version is insufficient "
            "for CUDA runtime version\")"});
  // Found on the command's LD_LIBRARY_PATH, or in the image's library directory.
  fs::create_directories(root / "opt/lib");
  fs::copy_file(host / "drv/libdl-fake.so.2", root / "opt/lib/libdl-fake.so.2");
  CHECK(driver_library_gaps(image, g, host, {"/opt/lib"}).empty());
  fs::rename(root / "opt/lib/libdl-fake.so.2", root / "usr/lib/x86_64-linux-gnu/libdl-fake.so.2");
  CHECK(driver_library_gaps(image, g, host).empty());
}

TEST_CASE("static check: a library without a path of its own uses its loaders' DT_RPATH",
          "[verify][static]") {
  // auditwheel's layout (scipy): a module with DT_RPATH $ORIGIN/../pkg.libs
  // loads libgfortran-X, which has no path and needs libquadmath-X beside it,
  // which needs libz-X there too: ld.so finds both through the module's
  // DT_RPATH (up the loader chain). A module with DT_RUNPATH lends its path
  // to no one, so the same layout under it fails, naming libgfortran.
  TempDir dir;
  fs::path root = dir.path() / "root";
  for (const std::string site : {"rpath", "runpath"}) {
    fs::path libs = root / site / "pkg.libs", mod = root / site / "pkg";
    fs::create_directories(libs);
    fs::create_directories(mod);
    shared_object(libs / "libz-1a.so.1", "libz-1a.so.1", libs, {});
    shared_object(libs / "libquadmath-2b.so.0", "libquadmath-2b.so.0", libs, {"libz-1a.so.1"});
    shared_object(libs / "libgfortran-3c.so.5", "libgfortran-3c.so.5", libs,
                  {"libquadmath-2b.so.0"});
    shared_object(mod / "_fit.so", "_fit.so", libs, {"libgfortran-3c.so.5"},
                  {site == "rpath" ? "-Wl,--disable-new-dtags" : "-Wl,--enable-new-dtags",
                   "-Wl,-rpath,$ORIGIN/../pkg.libs"});
    auto info = read_elf(mod / "_fit.so");
    REQUIRE(info);
    CHECK(info->rpath.empty() == (site == "runpath"));
    CHECK(info->runpath.empty() == (site == "rpath"));
  }
  TestResult r = check_libraries(ImageRoot(root), {});
  INFO(summary_table(VerifyReport{"x", {r}}));
  CHECK(r.outcome == Outcome::Failed);
  CHECK(r.message == "2 unresolved libraries in 8 dynamic ELF files");
  CHECK(
      r.details ==
      std::vector<std::string>{
          "/runpath/pkg.libs/libgfortran-3c.so.5: needs libquadmath-2b.so.0, which the image has at "
          "/rpath/pkg.libs/libquadmath-2b.so.0, outside this file's search path (its RUNPATH, LD_LIBRARY_PATH, "
          "the linker cache)",
          "/runpath/pkg.libs/libquadmath-2b.so.0: needs libz-1a.so.1, which the image has at "
          "/rpath/pkg.libs/libz-1a.so.1, outside this file's search path (its RUNPATH, LD_LIBRARY_PATH, the "
          "linker cache)"});
  fs::remove_all(root / "runpath");
  CHECK(check_libraries(ImageRoot(root), {}).outcome == Outcome::Passed);
}

TEST_CASE("static check: versions in a CUDA toolkit tree against the expected ones", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  test::write(root / "usr/local/cuda-12.6/version.json", R"({"cuda": {"name": "CUDA SDK", "version": "12.6.3"}})");
  fs::create_symlink("cuda-12.6", root / "usr/local/cuda");
  test::write(root / "usr/include/cudnn_version.h",
              "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 5\n#define CUDNN_PATCHLEVEL 1\n");
  ImageRoot image(root);
  CHECK(image_versions(image) ==
        std::vector<FoundVersion>{{"cuda", "12.6.3", "12.6.3", "/usr/local/cuda/version.json"},
                                  {"cudnn", "9.5.1", "9.5.1", "/usr/include/cudnn_version.h"}});
  CHECK(check_versions(image, {{"cuda", "12.6"}, {"cudnn", "9.5.1.17"}}).outcome == Outcome::Passed);
  auto bad = check_versions(image, {{"cuda", "12.4.1"}});
  CHECK(bad.outcome == Outcome::Failed);
  CHECK(bad.details == std::vector<std::string>{"cuda: /usr/local/cuda/version.json has 12.6.3, expected 12.4.1"});
  auto none = check_versions(image, {{"nccl", "2.21"}});
  CHECK(none.outcome == Outcome::Skipped);
  CHECK(none.message == "the image has cuda 12.6.3, cudnn 9.5.1 but no version is expected for them "
                        "(no dev.stackbuild.version.* label, no --expect)");
}

namespace {

// The tree pip makes of torch 2.7.0 (cu126) and NVIDIA's wheels it pulls in,
// as far as the versions check reads it.
void write_wheels(const fs::path& site, const std::string& cudnn = "9.5.1.17", const std::string& nccl = "2.26.2",
                  const std::string& torch_cuda = "12.6") {
  auto parts = [](const std::string& v) {
    std::vector<std::string> out;
    std::stringstream ss(v);
    for (std::string p; std::getline(ss, p, '.');) out.push_back(p);
    return out;
  };
  auto c = parts(cudnn), n = parts(nccl);
  test::write(site / "nvidia/cudnn/include/cudnn_version.h",
              "#ifndef CUDNN_VERSION_H_\n#define CUDNN_MAJOR " + c[0] + "\n#define CUDNN_MINOR " + c[1] +
                  "\n#define CUDNN_PATCHLEVEL " + c[2] +
                  "\n#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n#endif\n");
  test::write(site / ("nvidia_cudnn_cu12-" + cudnn + ".dist-info/METADATA"),
              "Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: " + cudnn + "\n\nVersion: 0.0 in the body\n");
  test::write(site / "nvidia/nccl/include/nccl.h", "#define NCCL_MAJOR " + n[0] + "\n#define NCCL_MINOR " + n[1] +
                                                        "\n#define NCCL_PATCH " + n[2] + "\n#define NCCL_SUFFIX \"\"\n");
  test::write(site / ("nvidia_nccl_cu12-" + nccl + ".dist-info/METADATA"),
              "Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: " + nccl + "\n");
  test::write(site / "nvidia/cuda_runtime/include/cuda_runtime_api.h",
              "/* CUDA runtime */\n#define CUDART_VERSION  12060\n#include \"host_defines.h\"\n");
  test::write(site / "nvidia_cuda_runtime_cu12-12.6.77.dist-info/METADATA",
              "Metadata-Version: 2.1\nName: nvidia-cuda-runtime-cu12\nVersion: 12.6.77\n");
  test::write(site / "nvidia_cublas_cu12-12.6.4.1.dist-info/METADATA", "Name: nvidia-cublas-cu12\nVersion: 12.6.4.1\n");
  test::write(site / "torch/version.py",
              "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
              "__version__ = '2.7.0+cu126'\ndebug = False\ncuda: Optional[str] = '" + torch_cuda +
                  "'\ngit_version = '134179474539648ba7dee1317959529fbd0e7f89'\nhip: Optional[str] = None\n");
  test::write(site / "torch-2.7.0+cu126.dist-info/METADATA", "Name: torch\nVersion: 2.7.0+cu126\n");
}

const std::map<std::string, std::string> kResolved = {
    {"cuda", "12.6.3"}, {"cudnn", "9.5.1.17"}, {"nccl", "2.26.2"}, {"pytorch", "2.7.0"}, {"python", "3.11"}};

}  // namespace

TEST_CASE("static check: versions of NVIDIA's wheels and torch in site-packages", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  write_wheels(root / "usr/local/lib/python3.11/dist-packages");
  test::write(root / "usr/lib/python3/dist-packages/six.py", "");
  test::write(root / "usr/share/doc/site-packages/README", "not a Python's");
  ImageRoot image(root);
  CHECK(python_package_dirs(image) ==
        std::vector<std::string>{"/usr/lib/python3/dist-packages", "/usr/local/lib/python3.11/dist-packages"});
  const std::string d = "/usr/local/lib/python3.11/dist-packages/";
  CHECK(image_versions(image) ==
        std::vector<FoundVersion>{
            {"cuda", "12.6", "12.6", d + "nvidia/cuda_runtime/include/cuda_runtime_api.h"},
            {"cudnn", "9.5.1", "9.5.1", d + "nvidia/cudnn/include/cudnn_version.h"},
            {"nccl", "2.26.2", "2.26.2", d + "nvidia/nccl/include/nccl.h"},
            {"cuda", "12.6.77", "12.6", d + "nvidia_cuda_runtime_cu12-12.6.77.dist-info/METADATA"},
            {"cudnn", "9.5.1.17", "9.5.1.17", d + "nvidia_cudnn_cu12-9.5.1.17.dist-info/METADATA"},
            {"nccl", "2.26.2", "2.26.2", d + "nvidia_nccl_cu12-2.26.2.dist-info/METADATA"},
            {"pytorch", "2.7.0+cu126", "2.7.0", d + "torch/version.py"},
            {"cuda", "12.6", "12.6", d + "torch/version.py"}});
  auto ok = check_versions(image, kResolved);
  INFO(summary_table(VerifyReport{"x", {ok}}));
  CHECK(ok.outcome == Outcome::Passed);
  CHECK(ok.message == "cuda, cudnn, nccl, pytorch match in 7 files");
  // At the precision the expected version has: "9.5" takes 9.5.1.17, "9.5.2" does not.
  CHECK(check_versions(image, {{"cudnn", "9.5"}}).outcome == Outcome::Passed);
  CHECK(check_versions(image, {{"cudnn", "9.5.2"}}).details.size() == 2);
  CHECK_FALSE(version_matches("12.60", "12.6"));
  CHECK(version_matches("12.6", "12.6.3"));
}

TEST_CASE("static check: a cuDNN wheel of another version fails naming file found and expected", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  write_wheels(root / "usr/local/lib/python3.12/site-packages", "9.1.0.70");
  auto r = check_versions(ImageRoot(root), kResolved);
  CHECK(r.outcome == Outcome::Failed);
  CHECK(r.message == "2 version mismatches");
  const std::string d = "/usr/local/lib/python3.12/site-packages/";
  CHECK(r.details ==
        std::vector<std::string>{"cudnn: " + d + "nvidia/cudnn/include/cudnn_version.h has 9.1.0, expected 9.5.1.17",
                                 "cudnn: " + d + "nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA has 9.1.0.70, expected 9.5.1.17"});
}

TEST_CASE("static check: an NCCL wheel of another version fails", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  write_wheels(root / "usr/local/lib/python3.11/dist-packages", "9.5.1.17", "2.21.5");
  auto r = check_versions(ImageRoot(root), kResolved);
  CHECK(r.outcome == Outcome::Failed);
  const std::string d = "/usr/local/lib/python3.11/dist-packages/";
  CHECK(r.details ==
        std::vector<std::string>{"nccl: " + d + "nvidia/nccl/include/nccl.h has 2.21.5, expected 2.26.2",
                                 "nccl: " + d + "nvidia_nccl_cu12-2.21.5.dist-info/METADATA has 2.21.5, expected 2.26.2"});
}

TEST_CASE("static check: torch built for another CUDA fails on torch.version.cuda", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  write_wheels(root / "opt/venv/lib/python3.11/site-packages", "9.5.1.17", "2.26.2", "12.8");
  auto r = check_versions(ImageRoot(root), kResolved);
  CHECK(r.outcome == Outcome::Failed);
  CHECK(r.details ==
        std::vector<std::string>{"cuda: /opt/venv/lib/python3.11/site-packages/torch/version.py has 12.8, expected 12.6.3"});
  // The runtime wheel's own patch level is not CUDA's: 12.6.77 is compared as 12.6.
  auto other = check_versions(ImageRoot(root), {{"cuda", "12.4.1"}});
  CHECK(std::count(other.details.begin(), other.details.end(),
                   "cuda: /opt/venv/lib/python3.11/site-packages/nvidia_cuda_runtime_cu12-12.6.77.dist-info/METADATA "
                   "has 12.6.77 (compared as 12.6), expected 12.4.1") == 1);
}

TEST_CASE("static check: a toolkit tree and wheels are both checked", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  write_wheels(root / "usr/local/lib/python3.11/dist-packages");
  test::write(root / "usr/local/cuda/version.json", R"({"cuda": {"version": "12.4.1"}})");
  test::write(root / "usr/local/cuda/include/nccl.h", "#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 2\n");
  test::write(root / "usr/local/cuda/include/cuda_runtime_api.h", "#define CUDART_VERSION 12040\n");
  auto r = check_versions(ImageRoot(root), kResolved);
  CHECK(r.outcome == Outcome::Failed);
  CHECK(r.details == std::vector<std::string>{"cuda: /usr/local/cuda/version.json has 12.4.1, expected 12.6.3",
                                              "cuda: /usr/local/cuda/include/cuda_runtime_api.h has 12.4, expected 12.6.3"});
}

TEST_CASE("static check: no version anywhere is skipped saying where it looked", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  test::write(root / "usr/local/lib/python3.11/dist-packages/numpy-2.2.6.dist-info/METADATA", "Name: numpy\nVersion: 2.2.6\n");
  test::write(root / "usr/local/lib/python3.11/dist-packages/torch/version.py", "__version__ = 'oops\n");
  test::write(root / "usr/include/cudnn_version.h", "#define CUDNN_MAJOR 9\n");  // no minor: says nothing
  auto r = check_versions(ImageRoot(root), kResolved);
  CHECK(r.outcome == Outcome::Skipped);
  CHECK(r.details.empty());
  CHECK(r.message ==
        "no CUDA, cuDNN, NCCL or PyTorch version in the image: no /usr/local/cuda/version.json, no cuDNN or NCCL "
        "header in /usr/include or /usr/local/cuda/include, no NVIDIA or torch wheel in a Python site- or "
        "dist-packages");
}

TEST_CASE("reports: GPU tests skipped are never counted as passed - JUnit marks them", "[verify][report]") {
  VerifyReport r{"img:1", {{"static: a", "static", Outcome::Passed, "", {}, 0.5},
                           {"gpu: b", "gpu", Outcome::Skipped, "no NVIDIA GPU on this host", {}, 0},
                           {"static: c", "static", Outcome::Failed, "2 gaps", {"x", "y"}, 0.1}}};
  CHECK(r.count(Outcome::Passed) == 1);
  CHECK_FALSE(r.ok());
  std::string xml = junit_xml(r);
  CHECK_THAT(xml, Catch::Contains("tests=\"3\" failures=\"1\" skipped=\"1\""));
  CHECK_THAT(xml, Catch::Contains("<skipped message=\"no NVIDIA GPU on this host\"/>"));
  CHECK_THAT(xml, Catch::Contains("<failure message=\"2 gaps\">x\ny\n</failure>"));
  CHECK_THAT(summary_table(r), Catch::StartsWith("image img:1\n"));  // several tables: each says whose
  CHECK_THAT(summary_table(r), Catch::EndsWith("1 passed, 1 failed, 1 skipped\n"));
  // The JSON names the GPUs only when the GPU tests had some.
  CHECK_FALSE(nlohmann::json(r).contains("gpus"));
  r.gpus = "1x NVIDIA H200, driver 570.86.15";
  CHECK(nlohmann::json(r).at("gpus") == "1x NVIDIA H200, driver 570.86.15");
}

TEST_CASE("reports: a file name that is not UTF-8 is shown - JSON and JUnit stay valid", "[verify][report]") {
  // A base image's file name is bytes.
  VerifyReport r{"img:1", {{"static: libraries resolve", "static", Outcome::Failed, "1 unresolved library",
                            {"/usr/bin/t\xffx: needs libc.so.6, which is not in the image"}, 0.1}}};
  std::string json = nlohmann::json(r).dump();  // would throw type_error 316 on the raw bytes
  CHECK(nlohmann::json::parse(json)["results"][0]["details"][0] ==
        "/usr/bin/t\\xFFx: needs libc.so.6, which is not in the image");
  CHECK_THAT(junit_xml(r), Catch::Contains(">/usr/bin/t\\xFFx: needs libc.so.6"));
  CHECK_THAT(summary_table(r), Catch::Contains("/usr/bin/t\\xFFx: needs"));
}

// The same shared object, its ELF header saying another machine (e_machine
// at offset 18), as an arm64 image's files are to this amd64 reader.
static void set_machine(const fs::path& file, uint16_t machine) {
  std::string bytes = read_file(file);
  bytes[18] = static_cast<char>(machine & 0xff);
  bytes[19] = static_cast<char>(machine >> 8);
  write_file_atomic(file, bytes);
}

TEST_CASE("static check: an aarch64 image's ELF files need aarch64 libraries, in its multiarch directory", "[verify][static]") {
  TempDir dir;
  fs::path root = dir.path() / "root";
  fs::path arm = root / "usr/lib/aarch64-linux-gnu", x86 = root / "usr/lib/x86_64-linux-gnu";
  fs::create_directories(arm);
  fs::create_directories(x86);
  fs::create_directories(root / "usr/bin");
  shared_object(arm / "libgreet.so.1", "libgreet.so.1", arm, {});
  shared_object(root / "usr/bin/tool", "tool", arm, {"libgreet.so.1"});
  set_machine(arm / "libgreet.so.1", EM_AARCH64);
  set_machine(root / "usr/bin/tool", EM_AARCH64);
  auto info = read_elf(root / "usr/bin/tool");
  REQUIRE(info);
  CHECK(info->machine == EM_AARCH64);
  CHECK(info->needed == std::vector<std::string>{"libgreet.so.1"});
  TestResult ok = check_libraries(ImageRoot(root), {});
  INFO(summary_table(VerifyReport{"x", {ok}}));
  CHECK(ok.outcome == Outcome::Passed);
  CHECK(ok.message == "2 dynamic ELF files checked");

  // An x86-64 libgreet does not serve an aarch64 program.
  fs::rename(arm / "libgreet.so.1", x86 / "libgreet.so.1");
  set_machine(x86 / "libgreet.so.1", EM_X86_64);
  TestResult bad = check_libraries(ImageRoot(root), {});
  INFO(summary_table(VerifyReport{"x", {bad}}));
  CHECK(bad.outcome == Outcome::Failed);
  CHECK(std::count(bad.details.begin(), bad.details.end(), "/usr/bin/tool: needs libgreet.so.1, which is not in the image") == 1);
}
