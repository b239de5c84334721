#!/usr/bin/env bash
# skopeo with sigstore, against stackbuild's signatures (issue 34). Debian 12's
# skopeo was built with sigstore disabled, so tests/integration/
# test_sign_skopeo.sh skips in the default run; here stackbuild builds an image
# of Debian 13 with its skopeo (1.18, sigstore enabled) from the configured
# Debian archive, unpacks it, and runs that test with SB_SKOPEO set to the
# image's skopeo (chroot, with the host's /tmp and /dev bound in; the network is
# the host's, so it reaches the test registry on 127.0.0.1). There it must pass:
# skopeo's sigstoreSigned policy accepts what `stackbuild sign` signed and
# refuses another key and an image pushed over the tag; `stackbuild verify`
# accepts a signature skopeo made with a key of its own.
# Label e2e: needs the Debian archive (~40 MB) and root; not in the default run.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
require_tool chroot unshare mount
[[ $(id -u) == 0 ]] || skip "chroot and bind mounts need root"
S=${SB_E2E_STORE:-$STORE}

check "an image of Debian 13 with its skopeo builds and unpacks"
cat >"$TMP/skopeo.yaml" <<'YAML'
stack: skopeo-trixie
layers:
  - {name: os, use: debian, version: trixie, packages: [skopeo, ca-certificates]}
tags: ["skopeo:trixie"]
YAML
expect_ok build sb build "$TMP/skopeo.yaml" -o "$TMP/out" --store "$S"
mkdir -p "$TMP/skopeo"
expect_ok unpack sb unpack "$TMP/out:trixie" "$TMP/skopeo/root" --store "$S"
cat >"$TMP/skopeo/skopeo" <<'SH'
#!/bin/bash
root=$(dirname "$(readlink -f "$0")")/root
exec unshare -m bash -c 'mount --bind /tmp "$0/tmp" && mount --bind /dev "$0/dev" && exec chroot "$0" /usr/bin/skopeo "$@"' "$root" "$@"
SH
chmod +x "$TMP/skopeo/skopeo"
version=$("$TMP/skopeo/skopeo" --version) || fail "the image's skopeo does not run"
say "$version"

check "test_sign_skopeo passes with it (a skip is a failure here)"
rc=0
SB_SKOPEO="$TMP/skopeo/skopeo" bash "$SB_SOURCE_DIR/tests/integration/test_sign_skopeo.sh" >"$TMP/sign.out" 2>&1 || rc=$?
cat "$TMP/sign.out"
(( rc == 0 )) || fail "test_sign_skopeo exited $rc with $version"
pass
