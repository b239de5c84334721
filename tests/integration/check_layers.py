#!/usr/bin/env python3
"""Checks that the layers of an image in an OCI layout are canonical tars.

usage: check_layers.py LAYOUT REF EPOCH

For each layer of the image REF: the uncompressed tar hashes to the config's diff_id;
a gzip layer's header has mtime 0 and no file name; every entry has uid/gid 0, an
mtime <= EPOCH, a relative path without '..'; entries are in byte order of their path
with no duplicates; a hardlink points at an earlier entry. Exits 1 listing problems.
"""
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile


def blob(layout, digest):
    with open(f"{layout}/blobs/sha256/{digest.split(':', 1)[1]}", "rb") as f:
        return f.read()


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    layout, ref, epoch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    index = json.load(open(f"{layout}/index.json"))
    descs = [m for m in index["manifests"]
             if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == ref]
    if len(descs) != 1:
        sys.exit(f"check_layers: {len(descs)} images named {ref!r} in {layout}")
    manifest = json.loads(blob(layout, descs[0]["digest"]))
    config = json.loads(blob(layout, manifest["config"]["digest"]))
    diff_ids = config["rootfs"]["diff_ids"]
    problems = []
    if len(diff_ids) != len(manifest["layers"]):
        problems.append(f"{len(manifest['layers'])} layers but {len(diff_ids)} diff_ids")
    for i, layer in enumerate(manifest["layers"]):
        data, mt = blob(layout, layer["digest"]), layer["mediaType"]
        what = f"layer {i} ({layer['digest'][:19]})"
        if mt.endswith("+gzip"):
            if data[:3] != b"\x1f\x8b\x08":
                problems.append(f"{what}: not gzip")
                continue
            if data[3] & 0x08:
                problems.append(f"{what}: gzip header carries a file name")
            if data[4:8] != b"\0\0\0\0":
                problems.append(f"{what}: gzip header mtime is {int.from_bytes(data[4:8], 'little')}, not 0")
            tar = gzip.decompress(data)
        elif mt.endswith("+zstd"):
            tar = subprocess.run(["zstd", "-dc"], input=data, stdout=subprocess.PIPE, check=True).stdout
        else:
            tar = data
        if i < len(diff_ids) and "sha256:" + hashlib.sha256(tar).hexdigest() != diff_ids[i]:
            problems.append(f"{what}: uncompressed sha256 is not the diff_id {diff_ids[i]}")
        names, seen = [], set()
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as tf:
            for m in tf.getmembers():
                name = m.name.rstrip("/")
                if m.uid != 0 or m.gid != 0:
                    problems.append(f"{what}: {name!r} is owned by {m.uid}:{m.gid}, not 0:0")
                if m.mtime > epoch:
                    problems.append(f"{what}: {name!r} has mtime {m.mtime} > {epoch}")
                if name.startswith("/") or ".." in name.split("/"):
                    problems.append(f"{what}: unsafe path {name!r}")
                if name in seen:
                    problems.append(f"{what}: {name!r} appears twice")
                if m.islnk() and m.linkname.rstrip("/") not in seen:
                    problems.append(f"{what}: hardlink {name!r} -> {m.linkname!r} does not point at an earlier entry")
                seen.add(name)
                names.append(name)
        keys = [n.encode("utf-8", "surrogateescape") for n in names]
        if keys != sorted(keys):
            bad = next(j for j in range(1, len(keys)) if keys[j] < keys[j - 1])
            problems.append(f"{what}: entries not in byte order: {names[bad - 1]!r} before {names[bad]!r}")
        print(f"check_layers: {what}: {mt.rsplit('.', 1)[-1]}, {len(names)} entries")
    for p in problems:
        print("check_layers: FAIL: " + p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
