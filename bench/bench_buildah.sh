#!/usr/bin/env bash
# stackbuild against buildah on the main recipe: one point of recipes/pytorch.yaml
# (cuda 12.6, torch 2.7.0), cold and with a warm cache.
#
#   bash bench/bench_buildah.sh            the full run (network, ~12 GB of disk)
#   bash bench/bench_buildah.sh --smoke    the same steps on a tiny recipe, no network
#
# The same stack both ways:
#   stackbuild  `stackbuild build recipes/pytorch.yaml --only cuda=12.6 --only pytorch=2.7.0`
#               into an OCI layout (Debian 12 os layer, a tools layer, the torch layer).
#   buildah     a Debian 12 base made by `mmdebstrap --variant=apt` with the recipe's
#               packages (what the os layer installs), then a Containerfile: ADD the base,
#               a venv (Debian's python3 has no pip), one `RUN pip install` for the tools
#               and one for torch, of the same wheels stackbuild resolves (`stackbuild pip`,
#               written as `name==version --hash=sha256:...`, installed with --no-deps
#               --require-hashes so pip fetches exactly those files), built with
#               `buildah bud --layers --isolation chroot` and pushed to an OCI layout.
# cold: empty caches for both: a fresh --store for stackbuild; a fresh storage root and
#       `pip --no-cache-dir` for buildah. Both download every .deb and wheel.
# warm: the same command again. stackbuild: a no-change rebuild (the summary must say
#       0 built), as is and with --locked after `stackbuild lock`. buildah: `bud --layers` again (every step from its layer cache; the
#       mmdebstrap base tar is kept, as a user would) and the push.
# The tools run one after the other, never at once; each tool's storage is removed
# after its two runs (peak disk: ~12 GB for one tool).
# --smoke: the same cold, warm and --locked runs, checks and table on a recipe made here,
# a copy layer of a tree (a static busybox and tests/integration/make_tree.py's tree)
# and one build-step layer, against a Containerfile FROM scratch, ADD of the same tree
# as a tar (made where the full run runs mmdebstrap) and a RUN of the same step, on
# buildah's vfs driver. No pins, no network, a few seconds. No bar is enforced (the full
# run only prints them too). Exits 77 (skipped) when root, buildah, bc or /bin/busybox
# is missing; installs nothing (bench/lib.sh).
# Environment: SB (default: build/stackbuild of this checkout), WORK (scratch directory,
# default a new one under /var/tmp), STORAGE_DRIVER (buildah: overlay, else vfs; --smoke:
# vfs), KEEP=1 (leave WORK behind). Needs root; installs buildah and mmdebstrap with
# apt-get when missing. Not a test: run it by hand (--smoke is, in the default test run).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
BENCH_NAME=bench_buildah
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi
SB=${SB:-$root/build/stackbuild}
RECIPE=$root/recipes/pytorch.yaml
# --only picks the recipe's own point. --set would replace matrix.cuda and matrix.pytorch,
# making a product point without the include's arch beside the include's point: two
# points under one tag, refused before anything builds.
POINT=(--only cuda=12.6 --only pytorch=2.7.0)
PY=3.11 GLIBC=2.36                    # Debian 12's python3 and glibc
TOOLS=(numpy==2.2.6 jupyterlab==4.4.10)                  # the recipe's tools layer
TORCH=(torch==2.7.0)

die() { printf 'bench_buildah: %s\n' "$*" >&2; exit 1; }
say() { printf 'bench_buildah: %s\n' "$*" >&2; }
[[ $(id -u) -eq 0 ]] || bench_skip "needs root (buildah's chroot isolation, mmdebstrap, the sandbox)"
[[ -x "$SB" ]] || die "no stackbuild at $SB (set SB=...)"
if [[ $SMOKE == 1 ]]; then
  for t in buildah bc tar; do command -v "$t" >/dev/null || bench_skip "'$t' is not installed"; done
  [[ -x /bin/busybox ]] || bench_skip "/bin/busybox is missing (apt-get install busybox-static)"
  POINT=()
  STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}   # no probing: vfs works on any file system
else
  grep -q 'pytorch: "2.7.0"' "$RECIPE" || die "$RECIPE has no point cuda 12.6 / torch 2.7.0"
  # The os layer's packages, as the recipe lists them (one `packages: [...]` line).
  PACKAGES=$(sed -n 's/^ *packages: *\[\(.*\)\].*/\1/p' "$RECIPE" | head -1 | tr -d ' ')
  [[ -n "$PACKAGES" ]] || die "no 'packages: [...]' line in $RECIPE"
  need=()
  command -v buildah >/dev/null || need+=(buildah)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  command -v bc >/dev/null || need+=(bc)
  if ((${#need[@]})); then
    say "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
  fi
fi

WORK=${WORK:-$(mktemp -d /var/tmp/bench_buildah.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
BR=$WORK/buildah-root BRUN=$WORK/buildah-run
DRIVER=${STORAGE_DRIVER:-}
bh() { buildah --root "$BR" --runroot "$BRUN" --storage-driver "$DRIVER" "$@"; }
unmount_under() {  # leftover mounts below $1, deepest first
  findmnt -rn -o TARGET | awk -v p="$1/" 'index($0, p) == 1' | sort -r |
    while read -r m; do umount -l "$m" || true; done
}
clean_buildah() {
  if [[ -d "$BR" ]]; then
    bh rm -a >/dev/null 2>&1 || true
    bh rmi -a -f >/dev/null 2>&1 || true
  fi
  unmount_under "$WORK"
  rm -rf --one-file-system "$BR" "$BRUN" "$WORK/buildah-oci" "$WORK/ctx/base.tar"
}
cleanup() {
  clean_buildah
  if [[ "${KEEP:-}" == 1 ]]; then say "left $WORK"; else rm -rf --one-file-system "$WORK"; fi
}
trap cleanup EXIT
cd "$WORK"

if [[ -z "$DRIVER" ]]; then  # overlay where this kernel and file system allow it
  DRIVER=overlay
  if ! bh from --name probe scratch >/dev/null 2>&1; then DRIVER=vfs; fi
  bh rm -a >/dev/null 2>&1 || true
fi

now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
load() { cut -d' ' -f1 /proc/loadavg; }
du_gb() { du -sxb "$@" 2>/dev/null | awk '{s += $1} END {printf "%.1f GB", s / 1e9}'; }

if [[ $SMOKE == 1 ]]; then
  # --- the smoke's stack: a busybox tree, one copy layer and one step ---------------
  mkdir -p tree/bin ctx
  cp /bin/busybox tree/bin/
  for a in sh mkdir echo; do ln -s busybox "tree/bin/$a"; done
  bench_smoke_tree tree/opt/tree
  STEP='mkdir -p /out && echo smoke >/out/smoke'
  cat >smoke.yaml <<EOF
stack: smoke
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: tree/, dst: /}]}
  - {name: step, build: {run: "$STEP"}}
config: {cmd: [/bin/sh]}
tags: ["smoke:1"]
EOF
  cat >ctx/Containerfile <<EOF
FROM scratch
ADD base.tar /
RUN $STEP
CMD ["/bin/sh"]
EOF
  SB_RECIPE=$WORK/smoke.yaml IMG=localhost/bench-smoke:1 OCI_REF=1 BUD_EXTRA=() BASE_WHAT="tar of the tree"
  make_base() { tar --sort=name -C tree -cf ctx/base.tar .; }
else
  # --- the pins: the wheels stackbuild installs, resolved once, untimed ---------------
  say "resolving the wheels (stackbuild pip, untimed)"
  pin() {  # pin OUT REQ...: 'name==version --hash=sha256:...' per wheel, and OUT.nv
    local out=$1; shift
    "$SB" pip --store "$WORK/pin-store" --progress plain --python "$PY" --glibc "$GLIBC" \
      --distro debian "$@" >"$out.lines" 2>"$out.err" || { cat "$out.err" >&2; die "stackbuild pip $* failed"; }
    awk '{printf "%s==%s --hash=sha256:%s\n", $1, $2, $4}' "$out.lines" | LC_ALL=C sort -f >"$out"
    awk '{print tolower($1), $2}' "$out.lines" | LC_ALL=C sort >"$out.nv"
  }
  t0=$(now)
  pin tools.txt "${TOOLS[@]}"
  pin torch-all.txt "${TORCH[@]}"
  pin_s=$(secs "$t0" "$(now)")
  # What resolving stored: index pages and wheel metadata (read by range requests), not
  # the wheels, which each build fetches itself.
  pin_bytes=$(du -sxb "$WORK/pin-store" | awk '{printf "%.0f MB", $1 / 1e6}')
  rm -rf "$WORK/pin-store"
  # The torch layer installs what the tools layer does not already hold (stackbuild's pip
  # layers keep what lower layers installed); a package in both must be the same version.
  clash=$(LC_ALL=C join tools.txt.nv torch-all.txt.nv | awk '$2 != $3')
  [[ -z "$clash" ]] || die "tools and torch resolve a package differently: $clash"
  LC_ALL=C join -v2 tools.txt.nv torch-all.txt.nv | cut -d' ' -f1 >torch-only.names
  awk 'NR == FNR {keep[$1] = 1; next} {n = $0; sub(/==.*/, "", n)} tolower(n) in keep' \
    torch-only.names torch-all.txt >torch.txt
  n_tools=$(wc -l <tools.txt) n_torch=$(wc -l <torch.txt)
  [[ $n_torch -gt 0 && $(wc -l <torch-only.names) -eq $n_torch ]] ||
    die "torch.txt has $n_torch pins for $(wc -l <torch-only.names) packages"
  say "pins: $n_tools wheels for the tools, $n_torch more for torch (resolved in $(printf '%.1f' "$pin_s") s, $pin_bytes of metadata)"

  mkdir -p ctx
  cp tools.txt torch.txt ctx/
  cat >ctx/Containerfile <<'EOF'
FROM scratch
ADD base.tar /
COPY tools.txt torch.txt /tmp/pins/
RUN python3 -m venv /opt/venv
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --require-hashes --cert /run/host-ca.crt -r /tmp/pins/tools.txt
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --require-hashes --cert /run/host-ca.crt -r /tmp/pins/torch.txt
ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin \
    PYTORCH_VERSION=2.7.0 CUDA_VERSION=12.6 NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
WORKDIR /workspace
CMD ["python3"]
EOF
  # The host's CA bundle, for pip inside the build (this machine's egress needs it).
  CA=/etc/ssl/certs/ca-certificates.crt
  # A copy of the recipe, so that its lockfile is written here and not in the checkout.
  cp "$RECIPE" "$WORK/pytorch.yaml"
  SB_RECIPE=$WORK/pytorch.yaml IMG=localhost/bench-pytorch:2.7.0-cuda12.6 OCI_REF=2.7.0-cuda12.6
  BUD_EXTRA=(--network host -v "$CA:/run/host-ca.crt:ro") BASE_WHAT=mmdebstrap
  make_base() {
    mmdebstrap --quiet --mode=root --variant=apt --include="$PACKAGES" bookworm ctx/base.tar \
      /etc/apt/sources.list.d/debian.sources >mmdebstrap.log 2>&1 ||
      { tail -30 mmdebstrap.log >&2; die "mmdebstrap failed"; }
  }
fi

# --- stackbuild ----------------------------------------------------------------------
sb_build() {  # sb_build LABEL [OPTION...]: seconds on stdout
  local t0 t1 label=$1
  shift
  t0=$(now)
  "$SB" build "$SB_RECIPE" --catalog "$root/layers" "${POINT[@]}" --store "$WORK/sb-store" \
    -o "$WORK/sb-out" --progress plain "$@" >"$label.out" 2>"$label.err" ||
    { tail -30 "$label.err" >&2; die "stackbuild $label failed"; }
  t1=$(now)
  secs "$t0" "$t1"
}
say "stackbuild cold (load $(load))"
sb_cold=$(sb_build sb-cold)
sb_size=$(du_gb "$WORK/sb-store" "$WORK/sb-out")
say "stackbuild warm (load $(load))"
sb_warm=$(sb_build sb-warm)
grep -q '(0 built' sb-warm.err || { tail -20 sb-warm.err >&2; die "the no-change rebuild built a layer"; }
# The same with a lockfile: the pip layers read no index (apt's too). lock takes no
# --only: it pins every point, and build --locked checks the whole plan against it.
"$SB" lock "$SB_RECIPE" --catalog "$root/layers" --store "$WORK/sb-store" \
  >lock.out 2>lock.err || { tail -20 lock.err >&2; die "stackbuild lock failed"; }
say "stackbuild warm --locked (load $(load))"
sb_locked=$(sb_build sb-locked --locked)
grep -q '(0 built' sb-locked.err || { tail -20 sb-locked.err >&2; die "the --locked rebuild built a layer"; }
sb_summary_cold=$(grep -E 'built, [0-9]+ from the cache' sb-cold.err | tail -1)
sb_summary_warm=$(grep -E 'built, [0-9]+ from the cache' sb-warm.err | tail -1)
rm -rf "$WORK/sb-store" "$WORK/sb-out"

# --- buildah -------------------------------------------------------------------------
bh_build() {  # bh_build LABEL: sets bud_s and push_s
  local t0 t1 t2
  t0=$(now)
  bh bud --layers --isolation chroot "${BUD_EXTRA[@]}" \
    -f ctx/Containerfile -t "$IMG" ctx >"$1-bud.log" 2>&1 ||
    { tail -30 "$1-bud.log" >&2; die "buildah bud ($1) failed"; }
  t1=$(now)
  bh push "$IMG" "oci:$WORK/buildah-oci:$OCI_REF" >"$1-push.log" 2>&1 ||
    { tail -30 "$1-push.log" >&2; die "buildah push ($1) failed"; }
  t2=$(now)
  bud_s=$(secs "$t0" "$t1") push_s=$(secs "$t1" "$t2")
}
say "buildah cold (load $(load), storage driver $DRIVER)"
t0=$(now)
make_base
base_s=$(secs "$t0" "$(now)")
bh_build bh-cold
bh_cold_bud=$bud_s bh_cold_push=$push_s
bh_cold=$(echo "$base_s + $bud_s + $push_s" | bc -l)
bh_size=$(du_gb "$BR" "$WORK/buildah-oci")
say "buildah warm (load $(load))"
bh_build bh-warm
bh_warm_bud=$bud_s bh_warm_push=$push_s
bh_warm=$(echo "$bud_s + $push_s" | bc -l)
grep -q -i 'using cache' bh-warm-bud.log || die "buildah's second bud used no cached layer"
bh_cached=$(grep -c -i 'using cache' bh-warm-bud.log)
clean_buildah

ratio() { echo "$1 / $2" | bc -l; }
if [[ $SMOKE == 1 ]]; then
  printf '\nbench_buildah: --smoke: a copy layer of a busybox tree and one build step\n'
else
  printf '\nbench_buildah: recipes/pytorch.yaml, point cuda 12.6 / torch 2.7.0 (%s + %s wheels)\n' \
    "$n_tools" "$n_torch"
fi
printf '  ran one tool after the other on %s cores (load now %s); buildah storage: %s\n' \
  "$(nproc)" "$(load)" "$DRIVER"
printf '  %-44s %9s %9s %9s\n' "" stackbuild buildah "sb/bah"
printf '  %-44s %8.1fs %8.1fs %9.3f\n' "cold (empty caches, all downloads)" "$sb_cold" "$bh_cold" "$(ratio "$sb_cold" "$bh_cold")"
printf '  %-44s %8.3fs %8.3fs %9.4f\n' "warm (no change)" "$sb_warm" "$bh_warm" "$(ratio "$sb_warm" "$bh_warm")"
printf '  %-44s %8.3fs %8.3fs %9.4f\n' "warm (no change), stackbuild with --locked" "$sb_locked" "$bh_warm" \
  "$(ratio "$sb_locked" "$bh_warm")"
printf '  buildah cold: %s %.1f s, bud %.1f s, push to OCI layout %.1f s\n' \
  "$BASE_WHAT" "$base_s" "$bh_cold_bud" "$bh_cold_push"
printf '  buildah warm: bud %.2f s (%s steps from the cache), push %.2f s\n' \
  "$bh_warm_bud" "$bh_cached" "$bh_warm_push"
printf '  stackbuild cold: %s\n  stackbuild warm: %s\n' "$sb_summary_cold" "$sb_summary_warm"
[[ $SMOKE == 1 ]] ||
  printf '  pins: stackbuild pip alone resolved them in %.1f s (%s of index pages and metadata, no wheels)\n' \
    "$pin_s" "$pin_bytes"
printf '  storage after cold: stackbuild %s (store + layout), buildah %s (storage + layout)\n' \
  "$sb_size" "$bh_size"
printf '  bar: stackbuild cold <= 0.5 x buildah cold: %s; no-change rebuild < 1 s: %s\n' \
  "$( (($(echo "$sb_cold <= 0.5 * $bh_cold" | bc -l))) && echo met || echo NOT met)" \
  "$( (($(echo "$sb_warm < 1" | bc -l))) && echo met || echo NOT met) ($(printf '%.2f' "$sb_warm") s; --locked $(printf '%.2f' "$sb_locked") s)"
bench_smoke_note
