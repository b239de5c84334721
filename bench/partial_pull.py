#!/usr/bin/env python3
"""Helpers of bench/bench_partial_pull.sh: what a registry served, what an image holds.

usage:
  partial_pull.py served LOG FROM_LINE          bytes the registry served after line FROM_LINE
  partial_pull.py image REG REPO TAG            an image's blobs, as the registry has them
  partial_pull.py changed IMAGE_A IMAGE_B       B's layers that A does not have
  partial_pull.py row NAME TOTAL CHANGED SERVED_A SERVED_B SECS_A SECS_B PARTIAL  one result line

`served` reads the access log of docker-registry (distribution 2.8, `log.accesslog`
enabled): one line per request in the combined log format,
  127.0.0.1 - - [date] "GET /v2/r/blobs/sha256:... HTTP/1.1" 206 1001667 "" "agent"
where the number after the status is the bytes the registry wrote in the response body
(for a range request: the ranges, with the multipart boundaries). Prints JSON: the bytes
of blob responses, of manifests and of the rest, how many requests and how many were
answered 206 (partial content). Lines of the registry's own log between them are
skipped.

`image` asks the registry for REPO:TAG's OCI or Docker manifest over plain HTTP and
prints JSON: the config and each layer (digest, size, media type, the compression that
its annotations name: zstd:chunked, estargz or none) and the total of the blobs.
"""
import json
import re
import sys
import urllib.request

ACCESS = re.compile(r'^\S+ \S+ \S+ \[[^\]]*\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+|-) ')
ACCEPT = ", ".join([
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])
ZSTD_CHUNKED = "io.containers.zstd-chunked.manifest-checksum"
ESTARGZ = "containerd.io/snapshot/stargz/toc.digest"


def served(log, from_line):
    out = {"blob_bytes": 0, "manifest_bytes": 0, "other_bytes": 0, "requests": 0, "ranged": 0}
    with open(log, "rb") as f:
        for n, raw in enumerate(f, 1):
            if n <= from_line:
                continue
            m = ACCESS.match(raw.decode("utf-8", "replace"))
            if not m:
                continue
            method, uri, status, size = m.groups()
            size = 0 if size == "-" else int(size)
            out["requests"] += 1
            if status == "206":
                out["ranged"] += 1
            if "/blobs/" in uri and method == "GET":
                out["blob_bytes"] += size
            elif "/manifests/" in uri:
                out["manifest_bytes"] += size
            else:
                out["other_bytes"] += size
    out["total"] = out["blob_bytes"] + out["manifest_bytes"] + out["other_bytes"]
    return out


def image(reg, repo, tag):
    req = urllib.request.Request(f"http://{reg}/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
    with urllib.request.urlopen(req) as r:
        man = json.load(r)
    if "layers" not in man:
        sys.exit(f"{reg}/{repo}:{tag} is not an image manifest (an index? give one platform's tag)")
    layers = []
    for l in man["layers"]:
        ann = l.get("annotations") or {}
        kind = "zstd:chunked" if ZSTD_CHUNKED in ann else "estargz" if ESTARGZ in ann else "none"
        layers.append({"digest": l["digest"], "size": l["size"], "mediaType": l["mediaType"], "toc": kind})
    total = man["config"]["size"] + sum(l["size"] for l in layers)
    return {"config": man["config"], "layers": layers, "total": total}


def changed(a, b):
    have = {l["digest"] for l in a["layers"]}
    new = [l for l in b["layers"] if l["digest"] not in have]
    return {"layers": len(new), "bytes": sum(l["size"] for l in new) + b["config"]["size"]}


def row(name, total, changed_bytes, served_a, served_b, secs_a, secs_b, partial):
    total, changed_bytes, served_a, served_b = map(int, (total, changed_bytes, served_a, served_b))
    pct = 100.0 * served_b / total if total else 0.0
    pct_changed = 100.0 * served_b / changed_bytes if changed_bytes else 0.0
    return (f"bench_partial_pull: {name:<13} pull B after A: {served_b:>12} bytes served = {pct:6.2f}% of B's "
            f"{total} ({pct_changed:6.2f}% of its new layers' {changed_bytes}) in {float(secs_b):.2f} s; "
            f"A cold: {served_a} bytes in {float(secs_a):.2f} s; partial layers: {partial}")


def main():
    a = sys.argv[1:]
    if a[:1] == ["served"] and len(a) == 3:
        print(json.dumps(served(a[1], int(a[2]))))
    elif a[:1] == ["image"] and len(a) == 4:
        print(json.dumps(image(*a[1:])))
    elif a[:1] == ["changed"] and len(a) == 3:
        print(json.dumps(changed(json.load(open(a[1])), json.load(open(a[2])))))
    elif a[:1] == ["row"] and len(a) == 9:
        print(row(*a[1:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
