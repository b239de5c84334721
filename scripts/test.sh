#!/usr/bin/env bash
# Installs, builds and runs the tests: unit tests (no network, root or GPU)
# and integration tests against real tools. Tests labelled `e2e` are heavier
# and run only with --e2e (or STACKBUILD_E2E=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --with-tests
bash scripts/build.sh
labels='unit|integration'
if [ "${1:-}" = "--e2e" ] || [ "${STACKBUILD_E2E:-0}" = 1 ]; then labels='unit|integration|e2e'; fi
cd build
ctest -L "$labels" -j"$(nproc)" --output-on-failure --timeout 900
