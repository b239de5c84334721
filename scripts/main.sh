#!/usr/bin/env bash
# The main job: install, build stackbuild, build the main recipe into an OCI
# layout under out/, each image with its SBOM beside it (--sbom). Extra
# arguments go to `stackbuild build`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
recipe="${STACKBUILD_RECIPE:-recipes/pytorch.yaml}"
stack=$(basename "$recipe" .yaml)
./build/stackbuild build "$recipe" -o "out/$stack" --sbom "$@"
./build/stackbuild notes "out/$stack" -o "out/$stack-release-notes.md"
echo "main: OCI layout written to out/$stack, its release notes to out/$stack-release-notes.md"
