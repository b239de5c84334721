#!/usr/bin/env python3
"""Checks a SLSA provenance statement with the in-toto project's own bindings.

usage: check_provenance.py STATEMENT IMAGE_DIGEST [EXPECTED]

Run with the python of the venv scripts/install-deps.sh --with-tests makes
(in-toto-attestation from the Python index: the in-toto Statement v1,
ResourceDescriptor and SLSA Provenance v1 protobuf definitions, and their
validate() checks). Checks, each of which can fail:
- the statement parses into the Statement message with no field the
  definition lacks and every field of its type (google.protobuf.json_format,
  strict), and Statement.validate() accepts it;
- its predicateType is https://slsa.dev/provenance/v1 and its predicate
  parses, as strictly, into the Provenance message (timestamps as RFC 3339);
- the predicate has what the SLSA v1 specification requires and the
  bindings' Go validator checks (their Python package has no validate() for
  the predicate): buildType, externalParameters, builder.id; every
  resolvedDependency and byproduct is a valid ResourceDescriptor
  (ResourceDescriptor.validate()) with a digest, each sha256 64 and each
  gitCommit 40 or 64 lowercase hex digits; startedOn is not after finishedOn;
- every subject is the image: its sha256 is IMAGE_DIGEST (hex);
- with EXPECTED (JSON: {"dependencies": [{"name" or "uri": ..., "digest":
  {...}}], "externalParameters": {...}, "byproducts": [{"digest": {...}}]}),
  each listed dependency and byproduct is there with that digest, and each
  listed parameter has that value.
Prints what it checked; exits 1 with the reason on the first failure.
"""
import json
import re
import sys

from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement

HEX = {"sha256": (64,), "sha512": (128,), "gitCommit": (40, 64)}


def fail(why):
    sys.exit(f"check_provenance: {why}")


def check_descriptor(rd, where):
    r = ResourceDescriptor.copy_from_pb(rd)
    try:
        r.validate()
    except ValueError as e:
        fail(f"{where}: {e}")
    if not rd.digest:
        fail(f"{where} ({rd.name or rd.uri}) has no digest")
    for alg, value in rd.digest.items():
        if alg in HEX and (len(value) not in HEX[alg] or not re.fullmatch("[0-9a-f]+", value)):
            fail(f"{where} ({rd.name or rd.uri}): {alg} {value!r} is not {HEX[alg]} lowercase hex digits")


def main():
    text = open(sys.argv[1]).read()
    image = sys.argv[2]
    try:
        pb = json_format.Parse(text, statement_pb2.Statement())
    except json_format.ParseError as e:
        fail(f"not an in-toto Statement v1: {e}")
    try:
        Statement.copy_from_pb(pb).validate()
    except ValueError as e:
        fail(f"Statement.validate(): {e}")
    print("statement: in-toto Statement v1, valid")

    if pb.predicate_type != "https://slsa.dev/provenance/v1":
        fail(f"predicateType is {pb.predicate_type!r}")
    try:
        prov = json_format.ParseDict(json.loads(text)["predicate"], provenance_pb2.Provenance())
    except json_format.ParseError as e:
        fail(f"the predicate is not SLSA Provenance v1: {e}")
    bd, rd = prov.build_definition, prov.run_details
    if not prov.HasField("build_definition") or not prov.HasField("run_details"):
        fail("buildDefinition and runDetails are required")
    if not bd.build_type:
        fail("buildDefinition.buildType is required")
    if not bd.HasField("external_parameters") or not bd.external_parameters.fields:
        fail("buildDefinition.externalParameters is required")
    if not rd.HasField("builder") or not rd.builder.id:
        fail("runDetails.builder.id is required")
    for i, d in enumerate(bd.resolved_dependencies):
        check_descriptor(d, f"resolvedDependencies[{i}]")
    for i, d in enumerate(rd.byproducts):
        check_descriptor(d, f"byproducts[{i}]")
    md = rd.metadata
    if md.HasField("started_on") and md.HasField("finished_on") and md.started_on.ToDatetime() > md.finished_on.ToDatetime():
        fail("startedOn is after finishedOn")
    print(f"predicate: SLSA Provenance v1, valid ({len(bd.resolved_dependencies)} resolved dependencies,"
          f" {len(rd.byproducts)} byproducts)")

    for s in pb.subject:
        if s.digest.get("sha256") != image:
            fail(f"subject {s.name!r} is sha256:{s.digest.get('sha256')}, not the image sha256:{image}")
    print(f"subject: {len(pb.subject)} name(s) of sha256:{image}")

    if len(sys.argv) > 3:
        want = json.load(open(sys.argv[3]))
        have = json_format.MessageToDict(bd)
        deps = have.get("resolvedDependencies", [])
        for w in want.get("dependencies", []):
            key = "name" if "name" in w else "uri"
            hits = [d for d in deps if d.get(key) == w[key]]
            if not hits:
                fail(f"no resolved dependency with {key} {w[key]!r}")
            if all(d.get("digest") != w["digest"] for d in hits):
                fail(f"{w[key]!r} has digest {[d.get('digest') for d in hits]}, not {w['digest']}")
        params = json.loads(text)["predicate"]["buildDefinition"]["externalParameters"]
        for k, v in want.get("externalParameters", {}).items():
            if params.get(k) != v:
                fail(f"externalParameters.{k} is {params.get(k)!r}, not {v!r}")
        by = json_format.MessageToDict(rd).get("byproducts", [])
        for w in want.get("byproducts", []):
            if not any(b.get("digest") == w["digest"] for b in by):
                fail(f"no byproduct with digest {w['digest']}")
        print(f"expected: {len(want.get('dependencies', []))} dependencies, "
              f"{len(want.get('externalParameters', {}))} parameters, {len(want.get('byproducts', []))} byproducts")


main()
