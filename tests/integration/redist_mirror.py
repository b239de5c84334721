"""Builds a fixture NVIDIA redist mirror from this machine's CUDA toolkit.

usage: redist_mirror.py CUDA_DIR OUT_DIR VERSION

Writes OUT_DIR/cuda/redist/redistrib_VERSION.json and, in NVIDIA's layout,
<component>/linux-x86_64/<component>-linux-x86_64-<version>-archive.tar.xz for
cuda_cudart (include/, lib/libcudart*) and cuda_nvcc (bin/nvcc and what it
runs, include/crt, nvvm/), made from the real files.
"""
import hashlib
import json
import os
import sys
import tarfile

cuda, out, version = sys.argv[1:4]
components = {
    "cuda_cudart": ["include/cuda_runtime_api.h", "include/cuda_runtime.h", "include/driver_types.h"]
    + ["lib64/" + n for n in sorted(os.listdir(os.path.join(cuda, "lib64"))) if n.startswith("libcudart.so")],
    "cuda_nvcc": ["bin/" + n for n in ("nvcc", "nvcc.profile", "ptxas", "fatbinary", "nvlink", "cudafe++", "bin2c")]
    + ["nvvm"],
}
manifest = {"release_date": "2026-01-01", "release_label": version, "release_product": "cuda"}
for comp, paths in components.items():
    cver = version + ".1"
    top = f"{comp}-linux-x86_64-{cver}-archive"
    rel = f"{comp}/linux-x86_64/{top}.tar.xz"
    dest = os.path.join(out, "cuda", "redist", rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with tarfile.open(dest, "w:xz", format=tarfile.PAX_FORMAT) as t:
        for p in paths:
            src = os.path.join(cuda, p)
            if not os.path.lexists(src):
                continue
            arc = p.replace("lib64/", "lib/", 1)
            t.add(src, arcname=f"{top}/{arc}", recursive=True)
        info = tarfile.TarInfo(f"{top}/LICENSE")
        data = b"fixture license\n"
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    blob = open(dest, "rb").read()
    manifest[comp] = {
        "name": comp, "license": "CUDA Toolkit", "version": cver,
        "linux-x86_64": {"relative_path": rel, "sha256": hashlib.sha256(blob).hexdigest(),
                         "md5": hashlib.md5(blob).hexdigest(), "size": str(len(blob))},
    }
with open(os.path.join(out, "cuda", "redist", f"redistrib_{version}.json"), "w") as f:
    json.dump(manifest, f, indent=2)
