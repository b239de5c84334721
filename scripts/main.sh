#!/usr/bin/env bash
# The main job: install, build stackbuild, build the main recipe into an OCI
# layout under out/, each image with its SBOM beside it (--sbom), from the
# recipe's committed lockfile (--locked: the same packages and wheels, any
# day). Extra arguments go to `stackbuild build`.
# A recipe without a lockfile beside it (STACKBUILD_RECIPE=examples/hello.yaml)
# builds as it resolves today.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
recipe="${STACKBUILD_RECIPE:-recipes/pytorch.yaml}"
stack=$(basename "$recipe" .yaml)
locked=()
[[ -f "$recipe.lock" ]] && locked=(--locked)
./build/stackbuild build "$recipe" -o "out/$stack" --sbom "${locked[@]}" "$@"
./build/stackbuild notes "out/$stack" -o "out/$stack-release-notes.md"
echo "main: OCI layout written to out/$stack, its release notes to out/$stack-release-notes.md"
