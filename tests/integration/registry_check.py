#!/usr/bin/env python3
# registry_check.py HOST:PORT REPO: whether a registry's repository is
# consistent: every tag names a manifest or index the registry serves with
# the digest it says, every blob a manifest names (config, layers) is there
# with its size and, read back, its digest, and every manifest an index lists
# is there. Prints one line per tag; exits 1 naming what is wrong.
import hashlib
import json
import sys
import urllib.request

host, repo = sys.argv[1], sys.argv[2]
base = f"http://{host}/v2/{repo}"
ACCEPT = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json"])
bad = []


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req) as r:
        return r.read(), dict(r.headers)


def check_manifest(ref, seen):
    try:
        body, headers = get(f"{base}/manifests/{ref}", ACCEPT)
    except Exception as e:
        bad.append(f"{ref}: {e}")
        return None
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    said = headers.get("Docker-Content-Digest", digest)
    if said != digest:
        bad.append(f"{ref}: served {digest} but says {said}")
    if ref.startswith("sha256:") and ref != digest:
        bad.append(f"{ref}: served bytes of {digest}")
    if digest in seen:
        return digest
    seen.add(digest)
    m = json.loads(body)
    for child in m.get("manifests", []):
        check_manifest(child["digest"], seen)
    blobs = ([m["config"]] if "config" in m else []) + m.get("layers", [])
    for b in blobs:
        try:
            data, _ = get(f"{base}/blobs/{b['digest']}")
        except Exception as e:
            bad.append(f"{ref}: blob {b['digest']}: {e}")
            continue
        if len(data) != b["size"] or "sha256:" + hashlib.sha256(data).hexdigest() != b["digest"]:
            bad.append(f"{ref}: blob {b['digest']} has other bytes ({len(data)} of {b['size']})")
    return digest


tags = json.loads(get(f"{base}/tags/list")[0]).get("tags") or []
seen = set()
for t in sorted(tags):
    d = check_manifest(t, seen)
    print(f"{repo}:{t} {d}")
if bad:
    print("inconsistent:\n  " + "\n  ".join(bad), file=sys.stderr)
    sys.exit(1)
