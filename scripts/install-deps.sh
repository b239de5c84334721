#!/usr/bin/env bash
# Installs what stackbuild needs to build and test, from Debian's packages.
# Runs as root on a fresh Debian 12; does nothing when all is already there.
set -euo pipefail

build_deps=(g++ cmake make pkg-config
  libarchive-dev libssl-dev libyaml-cpp-dev libcurl4-openssl-dev nlohmann-json3-dev
  libzstd-dev libisal-dev zlib1g-dev libtomlplusplus-dev catch2
  libkainjow-mustache-dev libseccomp-dev
  gpgv debian-archive-keyring git patch)
# Real tools the integration tests drive (nobody here wrote them).
test_deps=(skopeo umoci python3 python3-jsonschema docker-registry crun pigz zstd qemu-user qemu-user-static tar gzip busybox-static python3-pip python3-venv)
test_deps+=(apache2-utils openssl curl python3-cryptography)  # registry tests: bcrypt htpasswd, CA, token signing
test_deps+=(faketime)  # e2e: test_reproducible.sh moves the clock
test_deps+=(debian-keyring)  # e2e: test_debian_source_real.sh checks the .dsc uploaders' signatures
# test_bench_smoke.sh runs every bench/*.sh --smoke: buildah and mmdebstrap are the
# tools they compare against, bc their arithmetic, gpg signs the apt fixture.
test_deps+=(buildah mmdebstrap bc gpg)
# bench_partial_pull.sh --smoke: podman (4.3, with its overlay driver as root) is the client
# whose zstd:chunked partial pulls it measures.
test_deps+=(podman)
test_deps+=(shellcheck python3-yaml)  # test_cluster_ci.sh: the generated CI files' shell, and reading them
# test_cluster_slurm.sh and bench_cluster.sh start a single-node Slurm cluster (as root).
test_deps+=(slurm-wlm munge)
# test_estargz_go_check.sh builds tests/tools/estargz-check offline with Debian's Go
# and the stargz snapshotter's estargz library, packaged as Go source.
test_deps+=(golang-go golang-github-containerd-stargz-snapshotter-dev)

# The SPDX project's validator (spdx-tools), the NTIA minimum-elements
# checker and CycloneDX's own library with its JSON schemas, which
# test_sbom_validators.sh runs on stackbuild's SBOMs. They are
# not Debian packages: a venv from the Python index, through the machine's
# pip configuration, after the Debian packages; without them that test is
# skipped, never passed.
spdx_venv=${STACKBUILD_SPDX_VENV:-/opt/stackbuild-spdx-venv}
spdx_tools() {
  [ "${1:-}" = "--with-tests" ] || return 0
  [ -x "$spdx_venv/bin/pyspdxtools" ] && [ -x "$spdx_venv/bin/ntia-checker" ] &&
    "$spdx_venv/bin/python" -c 'import cyclonedx.validation.json' 2>/dev/null && return 0
  echo "install-deps: spdx-tools, ntia-conformance-checker and cyclonedx-python-lib into $spdx_venv"
  { python3 -m venv "$spdx_venv" &&
    "$spdx_venv/bin/pip" install -q spdx-tools==0.8.5 ntia-conformance-checker==6.0.0 \
      "cyclonedx-python-lib[json-validation]==11.12.0"; } ||
    echo "install-deps: warning: could not install them; test_sbom_validators will be skipped"
}

# The validators test_cluster_ci.sh runs on the generated CI files:
# check-jsonschema with the GitHub workflow and GitLab CI schemas it vendors
# (SchemaStore's), and kubernetes-validate with Kubernetes' own schemas. A venv
# from the Python index, as above; without them that test is skipped.
ci_venv=${STACKBUILD_CI_VENV:-/opt/stackbuild-ci-venv}
ci_tools() {
  [ "${1:-}" = "--with-tests" ] || return 0
  [ -x "$ci_venv/bin/check-jsonschema" ] && [ -x "$ci_venv/bin/kubernetes-validate" ] && return 0
  echo "install-deps: check-jsonschema and kubernetes-validate into $ci_venv"
  { python3 -m venv "$ci_venv" &&
    "$ci_venv/bin/pip" install -q check-jsonschema==0.39.0 kubernetes-validate==1.37.0; } ||
    echo "install-deps: warning: could not install them; test_cluster_ci will be skipped"
}

# The in-toto project's Python bindings (in-toto-attestation: the Statement
# v1, ResourceDescriptor and SLSA Provenance v1 protobuf definitions and their
# checks), which test_provenance.sh validates build --provenance's statements
# with. A venv of its own from the Python index, as above; without it that
# test is skipped, never passed.
intoto_venv=${STACKBUILD_INTOTO_VENV:-/opt/stackbuild-intoto-venv}
intoto_tools() {
  [ "${1:-}" = "--with-tests" ] || return 0
  "$intoto_venv/bin/python" -c \
    'import in_toto_attestation.v1.statement, in_toto_attestation.predicates.provenance.v1.provenance_pb2' \
    2>/dev/null && return 0
  echo "install-deps: in-toto-attestation into $intoto_venv"
  { python3 -m venv "$intoto_venv" &&
    "$intoto_venv/bin/pip" install -q in-toto-attestation==0.9.3 protobuf==7.36.2; } ||
    echo "install-deps: warning: could not install it; test_provenance will be skipped"
}

want=("${build_deps[@]}")
[ "${1:-}" = "--with-tests" ] && want+=("${test_deps[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#want[@]} packages present"
  spdx_tools "${1:-}"
  ci_tools "${1:-}"
  intoto_tools "${1:-}"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
spdx_tools "${1:-}"
ci_tools "${1:-}"
intoto_tools "${1:-}"
