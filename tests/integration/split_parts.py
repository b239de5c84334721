#!/usr/bin/env python3
"""Lists the layers of an image by recipe layer and checks its split layers.

usage: split_parts.py LAYOUT REF

Reads the image REF of the OCI layout LAYOUT and its config history
("stackbuild: layer 'NAME' (KIND, part I of N)"). Prints, per recipe layer,
"parts NAME KIND N" and, per entry of each image layer, "entry INDEX NAME PATH"
(INDEX: the image layer, from 0). Checks every split layer's parts: they are
numbered 1..N in order; each holds the parent directories of its entries (a
valid layer alone); no part hides what an earlier part of the same split holds
(a whiteout of a path, or of a directory above it, that an earlier part has as
a file, link or device; an opaque marker of a directory an earlier part has
anything under); no path other than a directory is in two parts. Exits 1
listing the problems.
"""
import gzip
import io
import json
import re
import subprocess
import sys
import tarfile


def blob(layout, digest):
    with open(f"{layout}/blobs/sha256/{digest.split(':', 1)[1]}", "rb") as f:
        return f.read()


def members(layout, layer):
    data, mt = blob(layout, layer["digest"]), layer["mediaType"]
    if mt.endswith("+gzip"):
        data = gzip.decompress(data)
    elif mt.endswith("+zstd"):
        data = subprocess.run(["zstd", "-dc"], input=data, stdout=subprocess.PIPE, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        return [(m.name.rstrip("/"), m.isdir()) for m in tf.getmembers()]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    layout, ref = sys.argv[1], sys.argv[2]
    index = json.load(open(f"{layout}/index.json"))
    descs = [m for m in index["manifests"]
             if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == ref]
    if len(descs) != 1:
        sys.exit(f"split_parts: {len(descs)} images named {ref!r} in {layout}")
    manifest = json.loads(blob(layout, descs[0]["digest"]))
    config = json.loads(blob(layout, manifest["config"]["digest"]))
    history = [h for h in config.get("history", []) if not h.get("empty_layer")]
    if len(history) != len(manifest["layers"]):
        sys.exit(f"split_parts: {len(manifest['layers'])} layers but {len(history)} history entries")
    problems = []
    splits = {}  # name -> (kind, [(part, of, index)])
    for i, h in enumerate(history):
        m = re.fullmatch(r"stackbuild: layer '(.*)' \((\w+)(?:, part (\d+) of (\d+))?\)", h.get("created_by", ""))
        name, kind = (m.group(1), m.group(2)) if m else (f"#{i}", "base")
        part, of = (int(m.group(3)), int(m.group(4))) if m and m.group(3) else (1, 1)
        splits.setdefault(name, (kind, []))[1].append((part, of, i))
    for name, (kind, parts) in splits.items():
        n = len(parts)
        print(f"parts {name} {kind} {n}")
        if [(p, o) for p, o, _ in parts] != [(k + 1, n) for k in range(n)]:
            problems.append(f"{name}: parts numbered {[(p, o) for p, o, _ in parts]}")
        held = {}  # non-directory path -> the part (1-based) that holds it
        under = set()  # every path (directories too) an earlier part holds
        for p, _, i in parts:
            entries = members(layout, manifest["layers"][i])
            names = {e for e, _ in entries}
            for e, is_dir in entries:
                print(f"entry {i} {name} {e}")
                parent = e.rsplit("/", 1)[0] if "/" in e else ""
                if parent and parent not in names:
                    problems.append(f"{name} part {p}: {e} without its parent directory")
                base = e.rsplit("/", 1)[-1]
                if base == ".wh..wh..opq":
                    hits = sorted(q for q in under if not parent or q.startswith(parent + "/"))
                    if hits:
                        problems.append(f"{name} part {p}: opaque {parent}/ hides {hits[0]} of an earlier part")
                elif base.startswith(".wh."):
                    hidden = (parent + "/" if parent else "") + base[4:]
                    hits = sorted(q for q in under if q == hidden or q.startswith(hidden + "/"))
                    if hits:
                        problems.append(f"{name} part {p}: {e} hides {hits[0]} of an earlier part")
                elif not is_dir:
                    if e in held:
                        problems.append(f"{name}: {e} is in part {held[e]} and part {p}")
            for e, is_dir in entries:
                if e.rsplit("/", 1)[-1].startswith(".wh."):
                    continue
                under.add(e)
                if not is_dir:
                    held.setdefault(e, p)
    for p in problems:
        print("split_parts: FAIL: " + p, file=sys.stderr)
    sys.exit(1 if problems else 0)


main()
