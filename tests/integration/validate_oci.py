#!/usr/bin/env python3
"""Validates an OCI image layout against the OCI image-spec JSON schemas.

usage: validate_oci.py SCHEMA_DIR LAYOUT_DIR

Checks: oci-layout against image-layout-schema.json; index.json against
image-index-schema.json; then every descriptor reachable from index.json, recursively:
the blob exists, its size and sha256 match the descriptor, and a manifest, nested
index or config blob validates against its schema (and its mediaType field, where it
has one, agrees with the descriptor). An artifact (a manifest with artifactType or
subject, OCI 1.1) may have the empty config; its subject's blob must be in the layout. Layer blobs are checked for digest and size.
$refs between the schemas are resolved from SCHEMA_DIR only (never the network).
Prints one line per document checked; exits 1 with the reasons on any failure.
"""
import hashlib
import json
import os
import sys
import urllib.parse

import jsonschema

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"  # an artifact's config
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
SCHEMA_OF = {
    MANIFEST: "image-manifest-schema.json",
    INDEX: "image-index-schema.json",
    CONFIG: "config-schema.json",
}


class Validator:
    def __init__(self, schema_dir):
        self.schema_dir = schema_dir
        self.docs = {}
        self.errors = []
        self.checked = 0

    def load_schema(self, name):
        if name not in self.docs:
            path = os.path.join(self.schema_dir, name)
            if not os.path.isfile(path):
                raise LookupError(f"schema {name} is not in {self.schema_dir}")
            with open(path) as f:
                self.docs[name] = json.load(f)
        return self.docs[name]

    def local(self, uri):
        """Any reference resolves to the file of that name in the schema folder."""
        name = os.path.basename(urllib.parse.urlparse(uri).path)
        return self.load_schema(name if name.endswith(".json") else name + ".json")

    def validator(self, name):
        schema = self.load_schema(name)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft4Validator)
        try:  # jsonschema >= 4.18: the referencing library
            import referencing
            import referencing.jsonschema

            def retrieve(uri):
                return referencing.Resource.from_contents(
                    self.local(uri), default_specification=referencing.jsonschema.DRAFT4)

            registry = referencing.Registry(retrieve=retrieve)
            return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)
        except ImportError:  # older jsonschema (Debian 12 has 4.10): RefResolver
            handlers = {scheme: self.local for scheme in ("http", "https", "file", "")}
            resolver = jsonschema.RefResolver.from_schema(schema, handlers=handlers)
            return cls(schema, resolver=resolver, format_checker=cls.FORMAT_CHECKER)

    def check_schema(self, what, doc, schema_name):
        errs = sorted(self.validator(schema_name).iter_errors(doc), key=lambda e: list(e.path))
        for e in errs:
            where = "/".join(str(p) for p in e.path) or "(top)"
            self.errors.append(f"{what}: {schema_name}: at {where}: {e.message}")
        print(f"validate_oci: {what}: {schema_name}: {'ok' if not errs else f'{len(errs)} error(s)'}")
        self.checked += 1

    def read_blob(self, layout, desc, what):
        digest = desc.get("digest", "")
        algo, _, hexpart = digest.partition(":")
        if algo != "sha256" or len(hexpart) != 64:
            self.errors.append(f"{what}: unsupported or malformed digest {digest!r}")
            return None
        path = os.path.join(layout, "blobs", "sha256", hexpart)
        if not os.path.isfile(path):
            self.errors.append(f"{what}: blob {digest} is missing ({path})")
            return None
        h, size = hashlib.sha256(), 0
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
        if h.hexdigest() != hexpart:
            self.errors.append(f"{what}: blob {digest} has sha256 {h.hexdigest()}")
        if size != desc.get("size"):
            self.errors.append(f"{what}: blob {digest} has {size} bytes, the descriptor says {desc.get('size')}")
        return path

    def walk(self, layout, desc, what, seen):
        path = self.read_blob(layout, desc, what)
        mt = desc.get("mediaType")
        if path is None or mt not in SCHEMA_OF or desc["digest"] in seen:
            return
        seen.add(desc["digest"])
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            self.errors.append(f"{what}: {desc['digest']} is not JSON: {e}")
            return
        self.check_schema(f"{what} {desc['digest'][:19]}", doc, SCHEMA_OF[mt])
        if mt != CONFIG and doc.get("mediaType") not in (None, mt):
            self.errors.append(f"{what}: mediaType {doc.get('mediaType')!r} but the descriptor says {mt!r}")
        if mt == MANIFEST:
            artifact = "artifactType" in doc or "subject" in doc
            if isinstance(doc.get("config"), dict):
                cmt = doc["config"].get("mediaType")
                if artifact and cmt == EMPTY:
                    # OCI 1.1's artifact guidance: the empty descriptor, whose blob is "{}".
                    if doc["config"].get("digest") != EMPTY_DIGEST or doc["config"].get("size") != 2:
                        self.errors.append(f"{what}: the empty config is not the 2-byte blob '{{}}'")
                elif cmt != CONFIG:
                    self.errors.append(f"{what}: config mediaType is {cmt!r}")
                self.walk(layout, doc["config"], what + " config", seen)
            if artifact:
                # An artifact's subject is an image of the same layout.
                subject = doc.get("subject") or {}
                if subject.get("mediaType") not in (MANIFEST, INDEX):
                    self.errors.append(f"{what}: subject mediaType is {subject.get('mediaType')!r}")
                else:
                    self.read_blob(layout, subject, what + " subject")
            for i, layer in enumerate(doc.get("layers") or []):
                self.walk(layout, layer, f"{what} layer {i}", seen)
        elif mt == INDEX:
            for i, m in enumerate(doc.get("manifests") or []):
                self.walk(layout, m, f"{what} manifest {i}", seen)

    def run(self, layout):
        try:
            with open(os.path.join(layout, "oci-layout")) as f:
                self.check_schema("oci-layout", json.load(f), "image-layout-schema.json")
            with open(os.path.join(layout, "index.json")) as f:
                index = json.load(f)
        except (OSError, ValueError) as e:
            self.errors.append(str(e))
            return
        self.check_schema("index.json", index, "image-index-schema.json")
        seen = set()
        manifests = index.get("manifests") or []
        if not manifests:
            self.errors.append("index.json lists no manifests")
        for i, m in enumerate(manifests):
            ref = (m.get("annotations") or {}).get("org.opencontainers.image.ref.name", "")
            self.walk(layout, m, f"index.json manifest {i} ({ref})", seen)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    v = Validator(sys.argv[1])
    v.run(sys.argv[2])
    for e in v.errors:
        print("validate_oci: FAIL: " + e, file=sys.stderr)
    if v.errors or v.checked == 0:
        sys.exit(1)
    print(f"validate_oci: {sys.argv[2]}: {v.checked} documents valid, all blobs match their descriptors")


if __name__ == "__main__":
    main()
