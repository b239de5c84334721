#!/usr/bin/env bash
# A store on overlayfs, as inside a container's own root (runs as root; skipped
# otherwise): overlayfs takes no overlayfs as its upper layer, so a build step
# cannot run on an overlay there, nor can `stackbuild run` or `test`. A build
# falls back to the copy-and-compare root with a warning that says why (before,
# it failed with "cannot mount the overlay root ...: Invalid argument"), and
# gives the same layers as a store on this disk; `stackbuild run` puts its
# writable layer in the temporary directory, and its writes still go nowhere.
# Where overlayfs takes no directory at all (forced here with
# STACKBUILD_SANDBOX_OVERLAY=0), a command runs in a full copy of the root.
# As root the sandbox's directories must be idmapped mounts, which overlayfs
# does not give: a build there fails saying so and naming the weaker mode
# (docs/security.md), and with STACKBUILD_SANDBOX_USERNS=off it works as above.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox_lib.sh
source "$(dirname "$0")/sandbox_lib.sh"
require_sandbox
cd "$TMP"

make_busybox_root base
cat >r.yaml <<'YAML'
stack: ovstore
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - {name: step, build: {run: [[/bin/sh, -c, "echo made >/made.txt; rm /etc/group"]]}}
config:
  env: {PATH: /bin}
tags: ["ovstore:1"]
YAML
check "a store on this disk: the reference"
expect_ok build-disk sb build r.yaml -o disk --store "$STORE"

check "a store on overlayfs: the build falls back, saying why, to the same layers"
# In a mount namespace of its own, so the overlay goes with it.
mkdir -p ovl/l ovl/u ovl/w ovl/m
cat >inside.sh <<INSIDE
set -euo pipefail
mount -t overlay overlay -o lowerdir=$TMP/ovl/l,upperdir=$TMP/ovl/u,workdir=$TMP/ovl/w $TMP/ovl/m
! "$SB" build r.yaml -o ovl-out --store $TMP/ovl/m/store --progress plain >build-idmap.log 2>&1
export STACKBUILD_SANDBOX_USERNS=off
"$SB" build r.yaml -o ovl-out --store $TMP/ovl/m/store --progress plain >build-ovl.log 2>&1
"$SB" run ovl-out:1 --store $TMP/ovl/m/store --progress plain -- sh -c \
  'cat /made.txt; ls /etc/group 2>&1; echo changed >/made.txt' >run1.log 2>&1
"$SB" run ovl-out:1 --store $TMP/ovl/m/store --progress plain -- cat /made.txt >run2.log 2>&1
INSIDE
unshare --mount --propagation private bash inside.sh || {
  cat build-ovl.log run1.log run2.log 2>/dev/null || true
  fail "a store on overlayfs: build or run failed"
}
grep -q "cannot make an idmapped mount of .*overlayfs has none.*STACKBUILD_SANDBOX_USERNS=off" build-idmap.log ||
  fail "no error naming the weaker mode: $(cat build-idmap.log)"
grep -qF "warning: overlayfs is unavailable (mount -t overlay, its upper layer in $TMP/ovl/m/store/tmp: Invalid argument): layer step is built in a full copy of its root" build-ovl.log ||
  fail "no warning saying why: $(cat build-ovl.log)"
[[ $(manifest_digest ovl-out 1) == $(manifest_digest disk 1) ]] ||
  fail "other layers than with a store on this disk"

check "stackbuild run with that store: the writable layer elsewhere, thrown away"
[[ $(head -1 run1.log) == made && $(sed -n 2p run1.log) == *"No such file"* ]] || fail "run: $(cat run1.log)"
[[ $(cat run2.log) == made ]] || fail "a write survived: $(cat run2.log)"

check "where overlayfs takes nothing (forced): run in a full copy, saying so, its writes thrown away"
out=$(STACKBUILD_SANDBOX_OVERLAY=0 sb run disk:1 --store "$STORE" -- sh -c 'cat /made.txt; echo x >/made.txt' \
  2>warn.log) || fail "run in a full copy failed: $out $(cat warn.log)"
[[ $out == made ]] || fail "run in a full copy: $out"
grep -qF "warning: each command in the image runs in a full copy of its root, which is slow for a big image (STACKBUILD_SANDBOX_OVERLAY=0)" warn.log ||
  fail "no warning: $(cat warn.log)"
out=$(STACKBUILD_SANDBOX_OVERLAY=0 sb run disk:1 --store "$STORE" -- cat /made.txt 2>/dev/null) || fail "second run: $out"
[[ $out == made ]] || fail "a write survived the full copy: $out"
[[ -z $(find "$STORE/roots" -maxdepth 1 -name '.run-*') ]] || fail "a copy was left in the store"
pass
