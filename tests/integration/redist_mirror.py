"""Builds a fixture NVIDIA redist mirror from this machine's CUDA toolkit.

usage: redist_mirror.py CUDA_DIR OUT_DIR VERSION [--cudnn MANIFEST=VERSION] [--nccl VERSION+cudaX.Y]

Writes, in NVIDIA's layout below OUT_DIR (a stand-in for NVIDIA's compute/):
- cuda/redist/redistrib_VERSION.json and
  <component>/linux-x86_64/<component>-linux-x86_64-<version>-archive.tar.xz for
  cuda_cudart (include/, lib/libcudart*) and cuda_nvcc (bin/nvcc, fatbinary,
  bin2c), made from the real files;
- with --cudnn, cudnn/redist/redistrib_MANIFEST.json with one `cudnn`
  component of VERSION and an archive per CUDA variant (cuda12, cuda13), each
  holding the real cudnn headers and libcudnn.so.9 (the small dispatcher
  library; the engine libraries are hundreds of MB and left out);
- with --nccl, redist/nccl/v<version>/nccl_<VERSION+cudaX.Y>_x86_64.txz (NCCL
  has no manifest) holding the real nccl.h (libnccl.so.2 is 200 MB: left out).
Archives are xz at preset 0, which keeps the test fast.
"""
import hashlib
import io
import json
import os
import sys
import tarfile

args = sys.argv[1:]
opts = {}
while len(args) > 3 and args[-2].startswith("--"):
    opts[args[-2]] = args[-1]
    args = args[:-2]
cuda, out, version = args[:3]


def add_text(t, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))


def archive(dest, top, paths, license_name="LICENSE"):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with tarfile.open(dest, "w:xz", format=tarfile.PAX_FORMAT, preset=0) as t:
        for p in paths:
            src = os.path.join(cuda, p)
            if not os.path.lexists(src):
                continue
            t.add(src, arcname=f"{top}/{p.replace('lib64/', 'lib/', 1)}", recursive=True)
        add_text(t, f"{top}/{license_name}", b"fixture license\n")
    blob = open(dest, "rb").read()
    return {"sha256": hashlib.sha256(blob).hexdigest(), "md5": hashlib.md5(blob).hexdigest(), "size": str(len(blob))}


def libs(prefix):
    return ["lib64/" + n for n in sorted(os.listdir(os.path.join(cuda, "lib64"))) if n.startswith(prefix)]


# CUDA: cudart and nvcc.
components = {
    "cuda_cudart": ["include/cuda_runtime_api.h", "include/cuda_runtime.h", "include/driver_types.h"]
    + libs("libcudart.so"),
    # nvcc itself (enough for `nvcc --version`); ptxas, nvlink, cudafe++ and
    # nvvm/ are 150 MB more that would only slow the test down.
    "cuda_nvcc": ["bin/" + n for n in ("nvcc", "nvcc.profile", "fatbinary", "bin2c")],
}
manifest = {"release_date": "2026-01-01", "release_label": version, "release_product": "cuda"}
for comp, paths in components.items():
    cver = version + ".1"
    top = f"{comp}-linux-x86_64-{cver}-archive"
    rel = f"{comp}/linux-x86_64/{top}.tar.xz"
    entry = archive(os.path.join(out, "cuda", "redist", rel), top, paths)
    manifest[comp] = {"name": comp, "license": "CUDA Toolkit", "version": cver,
                      "linux-x86_64": dict(relative_path=rel, **entry)}
with open(os.path.join(out, "cuda", "redist", f"redistrib_{version}.json"), "w") as f:
    json.dump(manifest, f, indent=2)

# cuDNN: one manifest, one archive per CUDA variant.
if "--cudnn" in opts:
    mver, cver = opts["--cudnn"].split("=")
    files = [p for p in ("include/cudnn.h", "include/cudnn_version.h", "include/cudnn_graph.h") if
             os.path.exists(os.path.join(cuda, p))] + ["lib64/libcudnn.so.9", "lib64/libcudnn.so"]
    variants = {}
    for v in ("cuda12", "cuda13"):
        top = f"cudnn-linux-x86_64-{cver}_{v}-archive"
        rel = f"cudnn/linux-x86_64/{top}.tar.xz"
        variants[v] = dict(relative_path=rel, **archive(os.path.join(out, "cudnn", "redist", rel), top, files))
    m = {"release_date": "2026-01-01", "release_label": mver, "release_product": "cudnn",
         "cudnn": {"name": "NVIDIA CUDA Deep Neural Network library", "license": "cudnn", "version": cver,
                   "cuda_variant": ["12", "13"], "linux-x86_64": variants}}
    with open(os.path.join(out, "cudnn", "redist", f"redistrib_{mver}.json"), "w") as f:
        json.dump(m, f, indent=2)

# NCCL: a tarball without a manifest.
if "--nccl" in opts:
    full = opts["--nccl"]  # 2.27.7-1+cuda13.0
    short = full.split("-")[0]
    top = f"nccl_{full}_x86_64"
    archive(os.path.join(out, "redist", "nccl", f"v{short}", f"{top}.txz"), top, ["include/nccl.h"], "LICENSE.txt")
