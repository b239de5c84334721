#!/usr/bin/env python3
"""Writes a stackbuild recipe for an image of this host's Python environment
with the frameworks it has (PyTorch, JAX), for their built-in tests on a GPU
host that cannot download them (tests/gpu/run.sh, step 9).

The image holds, at the host's own paths: this interpreter (the file, and a
python3 link beside sys.executable), pyvenv.cfg when it is a virtual
environment, its standard library, the distributions each framework needs
(its requirements followed, as installed: what pip would have installed),
the system libraries all of those load (ldd), the dynamic loader, and glibc's
ldconfig for the linker cache the GPU injection refreshes. Its labels name the
built-in tests and the versions the installed wheels state, which the tests
compare with what the frameworks report.

JAX compiles its kernels with ptxas and libdevice: from the nvidia-cuda-nvcc
wheel where it is installed, else (as on a host whose JAX uses the system's
toolkit) from CUDA_ROOT, which go to /usr/local/cuda in the image, a
directory XLA searches.

Usage: python_image.py WORKDIR TAG MERGED_ROOT LDCONFIG [CUDA_ROOT] > recipe.yaml
Prints on stderr what it found; exits 2 when no framework is installed or
the environment is under /tmp (the sandbox's /tmp is an empty tmpfs), 64
on a usage error.
"""
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import sysconfig

try:
    from packaging.requirements import Requirement
except ImportError:  # pip's copy, where packaging itself is not installed
    from pip._vendor.packaging.requirements import Requirement

FRAMEWORKS = {"pytorch": "torch", "jax": "jax"}  # built-in test -> distribution


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def installed():
    out = {}
    for d in md.distributions():
        name = d.metadata["Name"]
        if name:
            out.setdefault(norm(name), d)  # the first on sys.path wins, as for import
    return out


def closure(dists, seeds):
    """seeds: [(name, extras)] -> the installed distributions they need."""
    todo, seen = list(seeds), {}
    while todo:
        name, extras = todo.pop()
        d = dists.get(norm(name))
        if d is None:
            continue  # not installed: optional, or met another way
        key = norm(name)
        if key in seen and extras <= seen[key]:
            continue
        seen[key] = seen.get(key, set()) | extras
        for text in d.requires or []:
            r = Requirement(text)
            envs = [{"extra": e} for e in ({""} | extras)]
            if r.marker is None or any(r.marker.evaluate(e) for e in envs):
                todo.append((r.name, set(r.extras)))
    return [dists[k] for k in sorted(seen)]


def top_paths(d):
    """The paths a distribution installed into its site directory, cut to the
    top-level package (or namespace/package: nvidia/cudnn, jax_plugins/x)."""
    site = str(d.locate_file(""))
    out = set()
    for f in d.files or []:
        parts = f.parts
        if not parts or parts[0] == ".." or "__pycache__" in parts:
            continue
        top = parts[0]
        full = os.path.join(site, top)
        if os.path.isdir(full) and not os.path.exists(os.path.join(full, "__init__.py")) and len(parts) > 2:
            top = os.path.join(top, parts[1])
        out.add(os.path.join(site, top))
    return out


def ldd(paths):
    """Libraries the files need, as ldd resolves them (with their RUNPATH, not
    this shell's LD_LIBRARY_PATH): {path as found}."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    found = set()
    for i in range(0, len(paths), 200):
        r = subprocess.run(["ldd"] + paths[i:i + 200], capture_output=True, text=True, env=env)
        for line in r.stdout.splitlines():
            m = re.search(r"=> (/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
            if m:
                found.add(m.group(1))
    return found


def is_elf(p):
    try:
        with open(p, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def merged(p):
    for d in ("/lib/", "/lib64/", "/bin/", "/sbin/"):
        if p.startswith(d):
            return "/usr" + p
    return p


def main():
    if len(sys.argv) not in (5, 6):
        print("usage: python_image.py WORKDIR TAG MERGED_ROOT LDCONFIG [CUDA_ROOT] > recipe.yaml", file=sys.stderr)
        return 64
    work, tag, merged_root, ldconfig = sys.argv[1:5]
    cuda_root = sys.argv[5] if len(sys.argv) > 5 else ""
    dists = installed()
    want = [t for t, dist in FRAMEWORKS.items() if norm(dist) in dists]
    if not want:
        print("no framework installed in " + sys.executable + " (" + ", ".join(FRAMEWORKS.values()) + ")",
              file=sys.stderr)
        return 2
    # The sandbox gives foreign code an empty /tmp: an environment there would
    # be in the image and not seen by its tests.
    for path in (os.path.abspath(sys.executable), sys.prefix):
        if path == "/tmp" or path.startswith("/tmp/"):
            print(sys.executable + " is under /tmp, which the sandbox replaces with an empty tmpfs: "
                  "its image could not run it (put the environment elsewhere)", file=sys.stderr)
            return 2
    seeds = [(FRAMEWORKS[t], set()) for t in want]
    if "jax" in want:  # its CUDA plugin is an extra (jax[cuda13]); the installed one, with its CUDA wheels
        seeds += [(n, {"with-cuda", "with_cuda"}) for n in dists if re.match(r"jax-cuda\d+-(plugin|pjrt)$", n)]
    need = closure(dists, seeds)
    tops = set()
    for d in need:
        tops |= top_paths(d)
    tops = sorted(t for t in tops if not any(t.startswith(o + "/") for o in tops if o != t))

    # The interpreter and its standard library (less what no test imports).
    exe_link = os.path.abspath(sys.executable)
    exe = os.path.realpath(exe_link)
    stdlib = sysconfig.get_path("stdlib")
    files = [(exe, exe)]
    for e in sorted(os.listdir(stdlib)):
        if e not in ("site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"):
            files.append((os.path.join(stdlib, e), os.path.join(stdlib, e)))
    platstdlib = sysconfig.get_path("platstdlib")
    if os.path.realpath(platstdlib) != os.path.realpath(stdlib):
        dyn = os.path.join(platstdlib, "lib-dynload")
        if os.path.isdir(dyn):
            files.append((dyn, dyn))
    links = os.path.join(work, "python-links")
    bindir = os.path.dirname(exe_link)
    os.makedirs(links + merged(bindir), exist_ok=True)
    for name in ("python3", "python"):
        link = links + merged(bindir) + "/" + name
        if not os.path.lexists(link):
            os.symlink(exe, link)
    if sys.prefix != sys.base_prefix and os.path.exists(os.path.join(sys.prefix, "pyvenv.cfg")):
        files.append((os.path.join(sys.prefix, "pyvenv.cfg"), os.path.join(sys.prefix, "pyvenv.cfg")))

    # XLA's ptxas and libdevice where no wheel brings them.
    toolkit = []
    if "jax" in want and cuda_root and not any(norm(d.metadata["Name"]).startswith("nvidia-cuda-nvcc") for d in need):
        for rel in ("bin/ptxas", "bin/nvlink", "nvvm/libdevice"):
            src = os.path.realpath(os.path.join(cuda_root, rel))
            if os.path.exists(src):
                toolkit.append(rel)
                files.append((src, "/usr/local/cuda/" + rel))

    # What all of it loads, but the driver's libraries (injected).
    elves = [exe] + [os.path.realpath(os.path.join(cuda_root, r)) for r in toolkit if r.startswith("bin/")]
    for root in [stdlib, platstdlib] + tops:
        if os.path.isfile(root):
            if is_elf(root):
                elves.append(root)
            continue
        for dirpath, _, names in os.walk(root):
            elves += [os.path.join(dirpath, n) for n in names
                      if (".so" in n or os.access(os.path.join(dirpath, n), os.X_OK)) and
                      is_elf(os.path.join(dirpath, n))]
    covered = [exe, stdlib, platstdlib] + tops
    libs = {}  # image path -> host file
    for lib in sorted(os.path.normpath(p) for p in ldd(sorted(set(elves)))):
        base = os.path.basename(lib)
        if base.startswith(("libcuda.so", "libnvidia-")):
            continue
        if any(lib == c or lib.startswith(c + "/") for c in covered):
            continue
        libs.setdefault(merged(lib), os.path.realpath(lib))

    # The versions the installed wheels state, which the frameworks must report.
    # NVIDIA's wheels carry files that fail a static check for a reason
    # accepted here (each is still listed in the report, as ignored): cuFFT's
    # FFTW wrapper has one cubin for an old arch and no PTX; cuFile's RDMA
    # library needs libibverbs and the like, NVSHMEM's bootstrap and transport
    # plugins MPI, PMIx, UCX or libfabric, all loaded only on hosts set up for
    # them; cuSOLVER's multi-GPU library in the CUDA 13.0 wheels has no
    # RUNPATH, so it finds cuBLAS and nvJitLink beside it only once a
    # framework has loaded them (seen on the H200 host's torch 2.11); Triton's
    # plugins directory holds examples built against a libtriton.so that the
    # wheel does not install.
    static_checks = {
        "arch_ignore": ["**/nvidia/*/lib/libcufftw.so.*"],
        "libraries_ignore": ["**/libcufile_rdma.so.*", "**/nvidia/nvshmem/lib/nvshmem_*.so.*",
                             "**/libcusolverMg.so.*", "**/triton/plugins/*"],
    }
    labels = {"dev.stackbuild.tests": json.dumps({"tests": [], "builtin": want, "static_checks": static_checks})}
    versions = {}
    for d in need:
        n, v = norm(d.metadata["Name"]), d.version
        if n == "torch":
            versions["pytorch"] = v.split("+")[0]
        elif re.match(r"nvidia-cudnn-cu\d+$", n):
            versions["cudnn"] = v
        elif re.match(r"nvidia-nccl-cu\d+$", n):
            versions["nccl"] = v
        elif re.match(r"nvidia-cuda-runtime(-cu\d+)?$", n):
            versions["cuda"] = ".".join(v.split(".")[:2])
    for k, v in versions.items():
        labels["dev.stackbuild.version." + k] = v

    q = json.dumps  # a JSON string is a YAML string
    print("stack: " + tag.split(":")[0])
    print("layers:")
    print("  - name: python")
    print("    preserve_modes: true")
    print("    copy:")
    print("      - {src: %s, dst: /}" % q(merged_root + "/"))
    print("      - {src: %s, dst: /}" % q(links + "/"))
    print("      - {src: %s, dst: /usr/sbin/ldconfig}" % q(ldconfig))
    for src, dst in [(s, merged(d)) for s, d in files] + [(s, d) for d, s in sorted(libs.items())]:
        slash = "/" if os.path.isdir(src) and not os.path.islink(src) else ""
        print("      - {src: %s, dst: %s}" % (q(src + slash), q(dst + slash)))
    print("  - name: packages")
    print("    preserve_modes: true")
    print("    copy:")
    for t in tops:
        slash = "/" if os.path.isdir(t) and not os.path.islink(t) else ""
        print("      - {src: %s, dst: %s}" % (q(t + slash), q(merged(t) + slash)))
    print("config:")
    print("  env: {PATH: %s}" % q(bindir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
    print("  labels:")
    for k, v in labels.items():
        print("    %s: %s" % (k, q(v)))
    print("tags: [%s]" % q(tag))
    print("python image: %s (%s), frameworks %s, %d distributions, %d package paths, %d system libraries; "
          "versions %s%s" % (exe_link, sys.version.split()[0], ", ".join(want), len(need), len(tops), len(libs),
                             json.dumps(versions),
                             "; from " + cuda_root + " for XLA: " + ", ".join(toolkit) if toolkit else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
