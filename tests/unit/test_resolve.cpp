// The per-point resolver against the real layers/ catalog: chosen stacks,
// conflicts in words with their locations, and malformed requests.
#include <catch2/catch.hpp>

#include "resolve/lockfile.hpp"
#include "resolve/resolve.hpp"

using sb::resolve::Request;
using sb::resolve::resolve_point;
using sb::resolve::Result;
using sb::resolve::Want;

namespace {

const sb::catalog::Catalog& cat() {
  static const sb::catalog::Catalog c =
      sb::catalog::load_catalog(std::string(SB_SOURCE_DIR) + "/layers");
  return c;
}

// {{"cuda", "12.6"}, ...}: want i is asked at recipe.yaml:<i+1>:9; arch at :20:7.
Request request(std::vector<std::pair<std::string, std::string>> wants,
                std::vector<std::string> arch = {}) {
  Request r;
  int line = 1;
  for (auto& [component, version] : wants)
    r.wants.push_back(Want{component, version, {"recipe.yaml", line++, 9}});
  r.arch = std::move(arch);
  r.arch_where = {"recipe.yaml", 20, 7};
  return r;
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

// Where the catalog wrote `record`'s requirement on `component`.
std::string req_where(const char* component, const char* version, const char* build,
                      const char* on) {
  const auto* r = cat().find(component, version, build);
  REQUIRE(r);
  for (const auto& q : r->requirements)
    if (q.component == on) return q.where.str();
  FAIL("no requirement");
  return {};
}

}  // namespace

TEST_CASE("valid points resolve to the expected stacks", "[resolve]") {
  struct Case {
    const char* name;
    Request req;
    std::map<std::string, std::string> expect;  // a subset of the chosen versions
  };
  const Case cases[] = {
      {"cuda 12.6 + pytorch 2.6 -> cuDNN and NCCL for cu126",
       request({{"cuda", "12.6"}, {"pytorch", "2.6"}}),
       {{"cuda", "12.6.3"},
        {"pytorch", "2.6.0"},
        {"cudnn", "9.5.1.17"},
        {"nccl", "2.29.3"},
        {"python", "3.13"}}},
      {"pytorch 2.6 alone forces an older cuda than the newest",
       request({{"pytorch", "2.6"}, {"cuda", ""}}),
       {{"cuda", "12.6.3"}, {"cudnn", "9.5.1.17"}}},
      {"unpinned pytorch picks the newest release and its newest CUDA",
       request({{"pytorch", ""}}),
       {{"pytorch", "2.14.0"},
        {"cuda", "13.2.2"},
        {"cudnn", "9.24.0.43"},
        {"nccl", "2.30.7"},
        {"python", "3.14"}}},
      {"unpinned cuda picks the newest", request({{"cuda", ""}}), {{"cuda", "13.2.2"}}},
      {"arch 7.0 backtracks cuda below 13", request({{"cuda", ""}}, {"7.0"}), {{"cuda", "12.9.1"}}},
      {"pytorch 2.14 with arch 7.0 takes its cu126 build",
       request({{"pytorch", "2.14"}}, {"7.0"}),
       {{"pytorch", "2.14.0"}, {"cuda", "12.6.3"}, {"cudnn", "9.10.2.21"}, {"nccl", "2.29.3"}}},
      {"trixie prefers its own python",
       request({{"os", "trixie"}, {"pytorch", ""}}),
       {{"os", "13"}, {"python", "3.13"}}},
      {"bookworm prefers python 3.11",
       request({{"os", "bookworm"}, {"pytorch", "2.6"}}),
       {{"os", "12"}, {"python", "3.11"}}},
      {"an os family alias picks its newest", request({{"os", "ubuntu"}}), {{"os", "24.04"}}},
      {"tensorflow 2.17 needs the cuDNN 8.9 tested on 12.3",
       request({{"tensorflow", "2.17"}}),
       {{"tensorflow", "2.17.0"}, {"cuda", "12.3.1"}, {"cudnn", "8.9"}, {"python", "3.12"}}},
      {"a range want", request({{"cuda", ">=12.0,<12.4"}}), {{"cuda", "12.3.1"}}},
      {"two wants of one component both hold",
       request({{"cuda", "12"}, {"cuda", "<12.5"}}),
       {{"cuda", "12.4.1"}}},
      {"cublas follows the cuda minor",
       request({{"cuda", "12.4"}, {"cublas", ""}}),
       {{"cuda", "12.4.1"}, {"cublas", "12.4"}}},
      {"pinned nccl build",
       request({{"cuda", "12.6"}, {"nccl", "2.23.4"}}),
       {{"nccl", "2.23.4-1"}}},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      Result r = resolve_point(cat(), c.req);
      INFO((r.conflict ? r.conflict->str() : std::string("resolved")));
      REQUIRE(r.stack);
      CHECK_FALSE(r.conflict);
      for (const auto& [component, version] : c.expect) {
        INFO(component);
        CHECK(r.stack->versions[component] == version);
      }
    }
  }
}

TEST_CASE("an explicit record is chosen only where its exact version is asked for", "[resolve]") {
  // Debian's NCCL 2.22.3 (build debian) is newer than 2.21.5 for CUDA 12.4,
  // but its packages exist only in Debian's archive: a range never takes it.
  Result any = resolve_point(cat(), request({{"cuda", "12.4"}, {"nccl", ""}}));
  REQUIRE(any.stack);
  CHECK(any.stack->versions["nccl"] != "2.22.3");
  Result prefix = resolve_point(cat(), request({{"cuda", "12.4"}, {"nccl", "2.22"}}));
  CHECK_FALSE(prefix.stack);  // 2.22 names no version exactly, and no other 2.22 fits CUDA 12.4
  Result exact = resolve_point(cat(), request({{"cuda", "12.4"}, {"nccl", "2.22.3"}}));
  REQUIRE(exact.stack);
  CHECK(exact.stack->builds.at("nccl") == "debian");
  // PyTorch 2.6.0 with CUDA 12.4 is the Python index's cu124 build, unless the
  // point asks for Debian's NCCL: then Debian's build, whose requirement
  // names NCCL 2.22.3 exactly.
  Result wheel = resolve_point(cat(), request({{"cuda", "12.4"}, {"pytorch", "2.6.0"}}));
  REQUIRE(wheel.stack);
  CHECK(wheel.stack->builds.at("pytorch") == "cu124");
  CHECK_THAT(wheel.stack->versions.at("nccl"), Catch::StartsWith("2.21.5"));
  Result debian = resolve_point(cat(), request({{"cuda", "12.4"}, {"pytorch", "2.6.0"}, {"nccl", "2.22.3"}}));
  REQUIRE(debian.stack);
  CHECK(debian.stack->builds.at("pytorch") == "debian");
  CHECK(debian.stack->builds.at("nccl") == "debian");
  CHECK(debian.stack->versions.at("python") == "3.13");
  // Asked for without NCCL's pin, by version alone: the first build that fits.
  Result prefix_torch = resolve_point(cat(), request({{"cuda", "12.4"}, {"pytorch", "2.6"}}));
  REQUIRE(prefix_torch.stack);
  CHECK(prefix_torch.stack->builds.at("pytorch") == "cu124");
}

TEST_CASE("only wanted and required components are chosen", "[resolve]") {
  Result r = resolve_point(cat(), request({{"cuda", "12.6"}, {"pytorch", "2.6"}}));
  REQUIRE(r.stack);
  std::vector<std::string> names;
  for (const auto& [name, _] : r.stack->versions) names.push_back(name);
  CHECK(names == std::vector<std::string>{"cuda", "cudnn", "nccl", "python", "pytorch"});
  CHECK(r.stack->builds.at("pytorch") == "cu126");
  CHECK(r.stack->builds.at("cudnn") == "cuda12");
  CHECK_FALSE(r.stack->builds.count("cuda"));
}

TEST_CASE("driver floors and NVIDIA_REQUIRE_CUDA", "[resolve][driver]") {
  Result a = resolve_point(cat(), request({{"cuda", "12.6"}, {"pytorch", "2.6"}}));
  REQUIRE(a.stack);
  CHECK(a.stack->driver_min == "560.35.05");            // CUDA 12.6 Update 3, Table 3
  CHECK(a.stack->driver_min_compat == "525.60.13");     // cuDNN 9.5.1's floor > the 12.x floor 525
  CHECK(a.stack->nvidia_require_cuda == "cuda>=12.6");  // no branches known for 12.6

  // cuDNN's Blackwell build raises the compat floor to its own 570.26.
  Result b = resolve_point(cat(), request({{"cuda", "12.9"}, {"cudnn", "9.10.2"}}, {"12.0"}));
  REQUIRE(b.stack);
  CHECK(b.stack->builds.at("cudnn") == "cuda12-blackwell");
  CHECK(b.stack->driver_min == "575.57.08");
  CHECK(b.stack->driver_min_compat == "570.26");
  const std::string& req = b.stack->nvidia_require_cuda;
  CHECK(req.starts_with("cuda>=12.9 brand=tesla,driver>=535,driver<536 brand=unknown,"));
  CHECK(req.find("brand=titanrtx,driver>=570,driver<571") != std::string::npos);
  CHECK(req.find("driver>=575") == std::string::npos);

  Result c = resolve_point(cat(), request({{"cuda", "13.0.0"}}));
  REQUIRE(c.stack);
  CHECK(c.stack->driver_min == "580.65.06");
  CHECK(c.stack->driver_min_compat == "580");
  CHECK(c.stack->nvidia_require_cuda.starts_with("cuda>=13.0 brand=tesla,driver>=535,"));
}

TEST_CASE("conflicts name each clashing constraint and where it was written",
          "[resolve][conflict]") {
  SECTION("cudnn 9.0 with cuda 12.6") {
    Result r = resolve_point(cat(), request({{"cuda", "12.6"}, {"cudnn", "9.0"}}));
    REQUIRE(r.conflict);
    CHECK_FALSE(r.stack);
    CHECK(r.conflict->summary == "no cudnn 9.0 version works with cuda 12.6");
    CHECK(has(r.conflict->reasons, "cudnn 9.0.0.312 (cuda12) requires cuda 12.0 - 12.3 (" +
                                       req_where("cudnn", "9.0.0.312", "cuda12", "cuda") + ")"));
    CHECK(has(r.conflict->reasons, "cuda 12.6 asked at recipe.yaml:1:9"));
    CHECK(has(r.conflict->reasons, "cudnn 9.0 asked at recipe.yaml:2:9"));
  }
  SECTION("pytorch 2.6 with python 3.14") {
    Result r = resolve_point(cat(), request({{"pytorch", "2.6"}, {"python", "3.14"}}));
    REQUIRE(r.conflict);
    CHECK(r.conflict->summary == "no pytorch 2.6 version works with python 3.14");
    CHECK(has(r.conflict->reasons, "pytorch 2.6.0 (cu126) requires python >=3.9,<=3.13 (" +
                                       req_where("pytorch", "2.6.0", "cu126", "python") + ")"));
    CHECK(has(r.conflict->reasons, "python 3.14 asked at recipe.yaml:2:9"));
  }
  SECTION("CUDA 13 with arch 7.0") {
    Result r = resolve_point(cat(), request({{"cuda", "13"}}, {"8.0", "7.0"}));
    REQUIRE(r.conflict);
    CHECK(r.conflict->summary == "no cuda 13 version works with arch 7.0");
    const auto& support = cat().find("cuda")->arch_support;
    auto entry = std::find_if(support.begin(), support.end(), [](const auto& s) {
      return std::find(s.arch.begin(), s.arch.end(), "7.0") != s.arch.end();
    });
    REQUIRE(entry != support.end());
    CHECK(has(r.conflict->reasons,
              "cannot compile for compute capability 7.0; 7.0 needs cuda <13.0 (" +
                  entry->where.str() + ")"));
    CHECK(has(r.conflict->reasons, "arch 8.0, 7.0 asked at recipe.yaml:20:7"));
  }
  SECTION("pytorch 2.14 on cuda 13 with arch 7.0: the arch is named") {
    Result r = resolve_point(cat(), request({{"pytorch", "2.14"}, {"cuda", "13"}}, {"7.0"}));
    REQUIRE(r.conflict);
    CHECK(r.conflict->summary == "no pytorch 2.14 version works with cuda 13 and arch 7.0");
  }
  SECTION("cuDNN 9.17 dropped Volta") {
    Result r = resolve_point(cat(), request({{"cuda", "12.6"}, {"cudnn", "9.17.0"}}, {"7.0"}));
    REQUIRE(r.conflict);
    CHECK(r.conflict->summary == "no cudnn 9.17.0 version works with cuda 12.6 and arch 7.0");
    CHECK(has(r.conflict->reasons, "does not support compute capability 7.0"));
  }
  SECTION("a version the catalog lacks") {
    Result r = resolve_point(cat(), request({{"cuda", "12.7"}}));
    REQUIRE(r.conflict);
    CHECK(r.conflict->summary == "no cuda version matches '12.7'");
    CHECK(has(r.conflict->reasons, "cuda 12.7 asked at recipe.yaml:1:9"));
    CHECK(has(r.conflict->reasons, "the catalog has cuda 13.2.2"));
  }
  SECTION("two wants that exclude each other") {
    Result r = resolve_point(cat(), request({{"cuda", "12.6"}, {"cuda", "12.4"}}));
    REQUIRE(r.conflict);
    CHECK(r.conflict->summary == "no cuda version matches '12.6' and '12.4'");
  }
}

TEST_CASE("malformed requests are input errors at the recipe location", "[resolve][errors]") {
  auto error_of = [](const Request& req) -> std::string {
    try {
      resolve_point(cat(), req);
    } catch (const sb::InputError& e) {
      return e.location().str() + ": " + e.message();
    }
    return "no error";
  };
  CHECK(error_of(request({{"cuda", "12.6"}, {"pytorh", ""}})) ==
        "recipe.yaml:2:9: unknown component 'pytorh' (did you mean 'pytorch'?)");
  CHECK(error_of(request({{"os", "trixy"}})) ==
        "recipe.yaml:1:9: unknown os version 'trixy' (did you mean 'trixie'?)");
  CHECK(error_of(request({{"cuda", "twelve"}})).starts_with("recipe.yaml:1:9: bad version range"));
  CHECK(error_of(request({{"cuda", ""}}, {"8.O"})) ==
        "recipe.yaml:20:7: unknown compute capability '8.O' (did you mean '8.0'?)");
  CHECK(error_of(request({{"cuda", ""}}, {"12.0+PTX", "9.0a"})) == "no error");
}

TEST_CASE("ResolvedStack round-trips through JSON - records_of finds its records", "[resolve]") {
  Result r = resolve_point(cat(), request({{"cuda", "12.6"}, {"pytorch", "2.6"}}, {"8.0", "9.0"}));
  REQUIRE(r.stack);
  nlohmann::json j = *r.stack;
  CHECK(j["versions"]["cudnn"] == "9.5.1.17");
  CHECK(j["arch"] == nlohmann::json({"8.0", "9.0"}));
  CHECK(j.dump() == nlohmann::json(j.get<sb::resolve::ResolvedStack>()).dump());
  CHECK(j.get<sb::resolve::ResolvedStack>() == *r.stack);

  auto records = sb::resolve::records_of(cat(), *r.stack);
  REQUIRE(records.size() == r.stack->versions.size());
  auto torch = std::find_if(records.begin(), records.end(),
                            [](auto* rec) { return rec->component == "pytorch"; });
  REQUIRE(torch != records.end());
  CHECK((*torch)->build == "cu126");
  CHECK((*torch)->sources.pip.empty());  // the cu126 build of 2.6.0 is not on the Python index
}

TEST_CASE("lock_diff: versions, pins by name, sections without pins, points new and gone", "[lock]") {
  auto lock = [](nlohmann::json points) {
    return nlohmann::json{{"lockfile_version", 1}, {"stack", "s"}, {"points", points}}.dump();
  };
  nlohmann::json a = {{"matrix", {{"cuda", "12.6"}}},
                      {"resolved", {{"versions", {{"cudnn", "9.5"}}}}},
                      {"apt", {{"os", {{"packages", {{{"name", "libc6"}, {"version", "2.36-9"}, {"architecture", "amd64"}},
                                                     {{"name", "tzdata"}, {"version", "2024a"}, {"architecture", "all"}}}}}}}},
                      {"base", {{"from", "r/b:1"}, {"digest", "sha256:aa"}}},
                      {"source", {{"fw", {{"git", "u"}, {"commit", "1111"}}}}}};
  nlohmann::json b = a;
  b["resolved"]["versions"]["cudnn"] = "9.6";
  b["apt"]["os"]["packages"][0]["version"] = "2.36-10";
  b["apt"]["os"]["packages"].erase(1);
  b["apt"]["os"]["packages"].push_back({{"name", "curl"}, {"version", "7.88"}, {"architecture", "amd64"}});
  b["base"]["digest"] = "sha256:bb";
  b["source"]["fw"]["commit"] = "2222";
  nlohmann::json gone = {{"matrix", {{"cuda", "12.4"}}}, {"resolved", {{"versions", nlohmann::json::object()}}}};
  nlohmann::json fresh = {{"matrix", {{"cuda", "12.8"}}}, {"resolved", {{"versions", nlohmann::json::object()}}}};
  auto changes = sb::resolve::lock_diff(lock({a, gone}), lock({b, fresh}));
  CHECK(changes == std::vector<std::string>{
                       "point cuda=12.6: cudnn 9.5 -> 9.6",
                       "point cuda=12.6: apt os: + curl:amd64 7.88",
                       "point cuda=12.6: apt os: libc6:amd64 2.36-9 -> 2.36-10",
                       "point cuda=12.6: apt os: - tzdata 2024a",
                       "point cuda=12.6: base sha256:aa -> sha256:bb",
                       "point cuda=12.6: source fw: changed",
                       "point cuda=12.8: new",
                       "point cuda=12.4: removed",
                   });
  CHECK(sb::resolve::lock_diff(lock({a}), lock({a})).empty());
  CHECK(sb::resolve::lock_diff("", lock({a})) == std::vector<std::string>{"point cuda=12.6: new"});
}
