#!/usr/bin/env bash
# Partial pulls: what a client that holds last month's image (A) fetches to pull this
# month's (B), measured at the registry, for zstd:chunked against gzip (issue 38).
#
#   SB=build/stackbuild bash bench/bench_partial_pull.sh [--tree DIR [PCT]]  (default: /usr/local/cuda 5)
#   SB=build/stackbuild bash bench/bench_partial_pull.sh RECIPE_A.yaml RECIPE_B.yaml
#   SB=build/stackbuild bash bench/bench_partial_pull.sh --layouts GZ_A:REF GZ_B:REF [CH_A:REF CH_B:REF]
#   SB=build/stackbuild bash bench/bench_partial_pull.sh --smoke  (a tiny tree, bench/lib.sh)
#
# The images, built by stackbuild in gzip:
#   --tree DIR PCT   A: DIR under /opt/tree, one layer per top-level directory (as the
#                    other benches' images); B: the same after PCT% of its regular files
#                    (every (100/PCT)th in path order) changed, as CHANGE says:
#                    append (default): 16 bytes appended, the rest of the file as it was
#                    (an edit); rewrite: every byte XORed with 0x5a, the same size and
#                    compressibility but nothing in common (a new build of the file).
#   RECIPE_A RECIPE_B  each recipe's image (BUILD_ARGS_A, BUILD_ARGS_B: more build
#                    arguments, e.g. "--only cuda=12.6"; REF_A, REF_B: which ref of the
#                    layout when it holds several).
#   --layouts        layouts built already (e.g. out/pytorch:26.11-2.7.0-cuda12.6 and
#                    ...-cuda12.8); CH_A, CH_B: the same images as stackbuild wrote them
#                    in $COMPRESSION.
# The chunked images, COMPRESSION:
#   zstd:chunked (default), estargz  as stackbuild writes them (build --compression
#                     $COMPRESSION; the script stops, saying so, when this stackbuild does
#                     not take it).
#   podman            A and B as containers/image re-compresses them: skopeo copy
#                     --dest-compress-format zstd:chunked into an OCI layout (the library
#                     and the code of podman push --compression-format zstd:chunked), for
#                     comparison. Pushed by stackbuild push.
#   --smoke takes zstd:chunked from stackbuild when it accepts it, else podman's.
# Then, with Debian's podman (4.3) and a private storage.conf (overlay, enable_partial_images;
# docs/partial-pulls.md), for gzip and for the chunked images, each in a fresh podman
# store: pull A, then pull B. Bytes served are read from the access log of the registry
# (docker-registry, plain HTTP on 127.0.0.1; the gzip and the chunked images in a registry
# each, no blob shared between them); every chunked layer must carry its table of contents
# and the chunked pull of B must be partial (podman's debug log: "Retrieved partial blob"
# for each layer A lacks). Prints per format: B's pull after A in bytes served, as % of
# B's blobs and of its new layers, and seconds. Last, podman's root filesystem of B
# (podman image mount), from the gzip and the chunked pulls, must equal stackbuild unpack
# of B's gzip layout (treecmp.py: type, mode, owner, size, sha256, symlink target,
# hardlinks; mtimes too for the gzip pull, while for the chunked one they are counted and
# printed: podman 4.3's partial pulls give files the pull's time).
# Needs root (podman's overlay driver), podman, skopeo, docker-registry, curl, python3.
# Environment: SB, COMPRESSION, CHANGE, MOUNT_PROGRAM (e.g. /usr/bin/fuse-overlayfs: overlay
# through it rather than the kernel's), WORK (scratch, default a new folder under /tmp, removed at
# the end; B's tree, both layouts, two registries, two podman stores and B unpacked, an
# estimated 6-7 x the tree's size), KEEP (non-empty: leave that folder for a look).
# Not a test: run it by hand (--smoke is, in the default test run). Exit 77 in --smoke
# when podman cannot do partial pulls here (not root, no overlay), saying why.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
BENCH_NAME=bench_partial_pull
SMOKE=0; if [[ ${1:-} == --smoke ]]; then SMOKE=1; shift; fi

# What to build: KIND tree|recipes|layouts and its arguments.
KIND=tree TREE=/usr/local/cuda PCT=5
if [[ $SMOKE == 1 ]]; then PCT=10
elif [[ ${1:-} == --tree ]]; then TREE=${2:?--tree DIR [PCT]}; PCT=${3:-5}
elif [[ ${1:-} == --layouts ]]; then KIND=layouts; shift; LAYOUTS=("$@")
  ((${#LAYOUTS[@]} == 2 || ${#LAYOUTS[@]} == 4)) || die "--layouts GZ_A:REF GZ_B:REF [CH_A:REF CH_B:REF]"
elif (($# == 2)); then KIND=recipes; RECIPE_A=$(realpath "$1"); RECIPE_B=$(realpath "$2")
elif (($# != 0)); then die "usage: bench_partial_pull.sh [--smoke | --tree DIR [PCT] | RECIPE_A RECIPE_B | --layouts ...]"
fi
if ! [[ $PCT =~ ^[0-9]+$ ]] || ((PCT < 1 || PCT > 100)); then die "PCT must be a whole percentage, 1 to 100"; fi
setup_src=.; [[ $KIND == tree ]] && setup_src=$TREE
bench_setup bench_partial_pull "$setup_src" podman skopeo docker-registry curl python3
[[ $KIND == tree ]] && TREE=$SRC
PIDS=()
on_exit() {
  local p m
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  # podman's mounts under W (image mounts, the overlay driver's own), deepest first.
  for m in $(awk -v w="$W/" 'index($5, w) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  [[ -n ${KEEP:-} ]] && { echo "kept $W" >&2; return; }
  rm -rf "$W"
}
trap on_exit EXIT
PP="python3 $here/partial_pull.py"

# --- can podman do partial pulls here? ------------------------------------------------
[[ $(id -u) == 0 ]] || bench_skip "podman's partial pulls here use its overlay driver, which needs root (rootless podman would need fuse-overlayfs in a user namespace; not set up by this bench)"
printf '{"default": [{"type": "insecureAcceptAnything"}]}\n' >"$W/policy.json"
printf 'unqualified-search-registries = []\n' >"$W/registries.conf"
: >"$W/containers.conf"
# pstore NAME: a podman store of its own under W/podman/NAME, partial pulls enabled.
pstore() {
  local s=$W/podman/$1
  mkdir -p "$s/graph" "$s/run" "$s/tmp"
  cat >"$s/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$s/graph"
runroot = "$s/run"
[storage.options]
pull_options = {enable_partial_images = "true", use_hard_links = "false", ostree_repos = ""}
[storage.options.overlay]
mountopt = "nodev"
EOF
  if [[ -n ${MOUNT_PROGRAM:-} ]]; then echo "mount_program = \"$MOUNT_PROGRAM\"" >>"$s/storage.conf"; fi
}
# pm NAME ARGS...: podman on the store NAME, reading only this run's configuration.
pm() {
  local s=$W/podman/$1
  shift
  CONTAINERS_STORAGE_CONF=$s/storage.conf CONTAINERS_REGISTRIES_CONF=$W/registries.conf \
    CONTAINERS_CONF=$W/containers.conf TMPDIR=$s/tmp \
    podman --events-backend none --tmpdir "$s/libpod" "$@"
}
pstore probe
if ! pm probe info --format '{{.Store.GraphDriverName}}' >"$W/probe.out" 2>"$W/probe.err"; then
  bench_skip "podman cannot use its overlay driver here, so no partial pulls: $(grep -m1 -iE 'error|overlay' "$W/probe.err" || head -c 300 "$W/probe.err")"
fi
[[ $(cat "$W/probe.out") == overlay ]] ||
  bench_skip "podman's store here uses '$(cat "$W/probe.out")', not overlay: containers/storage does partial pulls with overlay only"
log "podman $(podman --version | awk '{print $3}'), overlay driver${MOUNT_PROGRAM:+ through $MOUNT_PROGRAM}, partial pulls enabled"

# --- the gzip images --------------------------------------------------------------------
# build NAME RECIPE COMPRESSION [ARGS...]: stackbuild build into W/NAME (a layout).
build() {
  local name=$1 recipe=$2 comp=$3
  shift 3
  "$SB" build "$recipe" -o "$W/$name" --store "$W/store" --progress plain --compression "$comp" \
    --allow-host-paths "$@" >"$W/$name.log" 2>&1 ||
    { tail -30 "$W/$name.log" >&2; die "stackbuild build of $recipe ($comp) failed"; }
}
# only_ref LAYOUT [REF]: LAYOUT:REF, REF defaulting to the layout's only ref name.
only_ref() {
  python3 - "$1" "${2:-}" <<'PY'
import json, sys
refs = [m.get("annotations", {}).get("org.opencontainers.image.ref.name")
        for m in json.load(open(sys.argv[1] + "/index.json"))["manifests"]]
refs = [r for r in refs if r]
if sys.argv[2]:
    if sys.argv[2] not in refs: sys.exit(f"{sys.argv[1]} has no ref {sys.argv[2]!r}: {refs}")
    print(sys.argv[1] + ":" + sys.argv[2])
elif len(refs) == 1: print(sys.argv[1] + ":" + refs[0])
else: sys.exit(f"{sys.argv[1]} holds {len(refs)} refs {refs}: say which (REF_A, REF_B)")
PY
}

if [[ $SMOKE == 1 ]]; then
  # The smoke tree (bench_setup) and 30 files of text in gen/, so that B changes a few
  # whole files among many; PCT=10 changes every 10th file.
  python3 - "$TREE/gen" <<'PY'
import os, random, sys
r = random.Random(5)
os.makedirs(sys.argv[1])
for i in range(30):
    words = [r.choice(["cuda", "tensor", "kernel", "layer", "wheel", "image", "blob"]) for _ in range(6000)]
    open(os.path.join(sys.argv[1], f"f{i:02d}.txt"), "w").write(" ".join(words) + "\n")
PY
fi

CH_MODE=${COMPRESSION:-zstd:chunked}
if [[ $SMOKE == 1 && -z ${COMPRESSION:-} ]]; then CH_MODE=auto; fi
# accepts COMP: whether this stackbuild builds with --compression COMP.
accepts() {
  mkdir -p "$W/probe-recipe/f" && echo x >"$W/probe-recipe/f/x"
  printf 'stack: probe\nlayers:\n  - {name: f, copy: [{src: f/, dst: /f/}]}\ntags: ["probe:1"]\n' >"$W/probe-recipe/r.yaml"
  "$SB" build "$W/probe-recipe/r.yaml" -o "$W/probe-layout" --store "$W/probe-store" --progress plain \
    --compression "$1" >"$W/probe-build.log" 2>&1
}
if [[ $CH_MODE == auto ]]; then
  if accepts zstd:chunked; then CH_MODE=zstd:chunked; else CH_MODE=podman; fi
elif [[ $CH_MODE != podman && $KIND != layouts ]]; then
  accepts "$CH_MODE" || die "this stackbuild does not take --compression $CH_MODE ($(tail -1 "$W/probe-build.log")); COMPRESSION=podman uses podman's re-compression"
fi
case $CH_MODE in
  podman) CH_NAME=zstd:chunked CH_DESC="zstd:chunked re-compressed by containers/image (skopeo copy --dest-compress-format zstd:chunked into an OCI layout)" ;;
  zstd:chunked|estargz) CH_NAME=$CH_MODE CH_DESC="$CH_MODE written by stackbuild" ;;
  *) die "COMPRESSION must be podman, zstd:chunked or estargz, not '$CH_MODE'" ;;
esac

log "building A and B (gzip$([[ $CH_MODE != podman ]] && echo " and $CH_MODE")) ..."
CH_A='' CH_B=''
case $KIND in
  tree)
    # B: a copy of the tree with every Kth regular file (path order) 16 bytes longer.
    mkdir -p "$W/trees"
    cp -a "$TREE" "$W/trees/b"
    CHANGE=${CHANGE:-append}
    [[ $CHANGE == append || $CHANGE == rewrite ]] || die "CHANGE must be append or rewrite, not '$CHANGE'"
    changed=$(python3 - "$W/trees/b" "$PCT" "$CHANGE" <<'PY'
import os, sys
root, pct, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = []
for d, dirs, names in os.walk(root):
    dirs.sort()
    for n in sorted(names):
        p = os.path.join(d, n)
        if os.path.isfile(p) and not os.path.islink(p):
            files.append(p)
files.sort()
step = max(1, round(100 / pct))
seen, hit, hit_bytes, all_bytes = set(), 0, 0, 0
for i, p in enumerate(files):
    st = os.stat(p)
    all_bytes += st.st_size
    if i % step == 0 and (st.st_dev, st.st_ino) not in seen:   # a hardlink's file once
        seen.add((st.st_dev, st.st_ino))
        hit_bytes += st.st_size
        if how == "append":
            with open(p, "ab") as f:
                f.write(b"next month %5d\n" % i)
        else:
            data = open(p, "rb").read()
            key = bytes([0x5a]) * len(data)
            new = (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(len(data), "little")
            open(p, "wb").write(new)
        hit += 1
print(f"{hit} of {len(files)} files ({100 * hit_bytes / max(all_bytes, 1):.1f}% of their bytes, {how})")
PY
    )
    log "B: $changed changed"
    bench_tree_recipe "$TREE" "$W/recipe-a" partialpull
    bench_tree_recipe "$W/trees/b" "$W/recipe-b" partialpull
    # An epoch, so that mtimes are not all 0 and the tree comparison sees them.
    build gz-a "$W/recipe-a/r.yaml" gzip --source-date-epoch 1700000000
    build gz-b "$W/recipe-b/r.yaml" gzip --source-date-epoch 1700000000
    GZ_A=$W/gz-a:1 GZ_B=$W/gz-b:1
    if [[ $CH_MODE != podman ]]; then
      build ch-a "$W/recipe-a/r.yaml" "$CH_MODE" --source-date-epoch 1700000000
      build ch-b "$W/recipe-b/r.yaml" "$CH_MODE" --source-date-epoch 1700000000
      CH_A=$W/ch-a:1 CH_B=$W/ch-b:1
    fi
    DESC_A="$TREE" DESC_B="$TREE with $changed changed"
    ;;
  recipes)
    # shellcheck disable=SC2086  # BUILD_ARGS_* are word lists
    { build gz-a "$RECIPE_A" gzip ${BUILD_ARGS_A:-}; build gz-b "$RECIPE_B" gzip ${BUILD_ARGS_B:-}; }
    GZ_A=$(only_ref "$W/gz-a" "${REF_A:-}") || die "A"; GZ_B=$(only_ref "$W/gz-b" "${REF_B:-}") || die "B"
    if [[ $CH_MODE != podman ]]; then
      # shellcheck disable=SC2086
      { build ch-a "$RECIPE_A" "$CH_MODE" ${BUILD_ARGS_A:-}; build ch-b "$RECIPE_B" "$CH_MODE" ${BUILD_ARGS_B:-}; }
      CH_A=$(only_ref "$W/ch-a" "${REF_A:-}") || die "A"; CH_B=$(only_ref "$W/ch-b" "${REF_B:-}") || die "B"
    fi
    DESC_A="$RECIPE_A ${BUILD_ARGS_A:-}" DESC_B="$RECIPE_B ${BUILD_ARGS_B:-}"
    ;;
  layouts)
    GZ_A=${LAYOUTS[0]} GZ_B=${LAYOUTS[1]} CH_A=${LAYOUTS[2]:-} CH_B=${LAYOUTS[3]:-}
    [[ $CH_MODE == podman || -n $CH_B ]] || die "COMPRESSION=$CH_MODE with --layouts needs CH_A and CH_B"
    [[ $CH_MODE != podman || -z $CH_B ]] || die "CH_A and CH_B given: say their COMPRESSION (zstd:chunked or estargz)"
    DESC_A=$GZ_A DESC_B=$GZ_B
    ;;
esac
rm -rf "$W/store" "$W/trees"

# --- two registries with access logs ------------------------------------------------------
# registry NAME: docker-registry on a free port with its access log in W/NAME/log; sets REG.
registry() {
  local dir=$W/$1 port _
  port=$(bench_port)
  mkdir -p "$dir"
  cat >"$dir/config.yml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: false}}
storage: {filesystem: {rootdirectory: $dir/data}}
http: {addr: 127.0.0.1:$port, secret: bench}
YAML
  docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
  PIDS+=($!)
  REG=127.0.0.1:$port
  for _ in $(seq 100); do curl -s -o /dev/null "http://$REG/v2/" && return 0; sleep 0.1; done
  die "the registry $1 did not start; its log: $(tail -5 "$dir/log")"
}
registry reg-gzip; REG_GZ=$REG
registry reg-chunked; REG_CH=$REG
sbpush() {
  "$SB" push "$1" "$2" --store "$W/pushstore" --progress plain >"$W/push.log" 2>&1 ||
    { cat "$W/push.log" >&2; die "stackbuild push $1 $2 failed"; }
}
sbpush "$GZ_A" "$REG_GZ/bench:a"; sbpush "$GZ_B" "$REG_GZ/bench:b"
if [[ $CH_MODE == podman ]]; then
  # Into a fresh OCI layout each, then pushed by stackbuild as it is: skopeo copying
  # straight to the registry consults the machine's blob-info cache
  # (/var/lib/containers/cache, shared with every skopeo run as root), and with what it
  # holds it can reuse a blob the registry has under another manifest without the
  # layer's zstd:chunked annotations (seen here for B's layers shared with A). Into a new
  # layout it has nothing to reuse; the output is the same bytes every time.
  for x in a b; do
    src=$GZ_A; [[ $x == b ]] && src=$GZ_B
    skopeo --policy "$W/policy.json" --registries-conf "$W/registries.conf" copy -q \
      --dest-compress-format zstd:chunked "oci:$src" "oci:$W/ch-$x:1" >"$W/skopeo.log" 2>&1 ||
      { cat "$W/skopeo.log" >&2; die "skopeo copy to zstd:chunked failed"; }
  done
  CH_A=$W/ch-a:1 CH_B=$W/ch-b:1
fi
sbpush "$CH_A" "$REG_CH/bench:a"; sbpush "$CH_B" "$REG_CH/bench:b"
rm -rf "$W/pushstore" "$W/ch-a" "$W/ch-b"
for f in gzip chunked; do
  reg=$REG_GZ; [[ $f == chunked ]] && reg=$REG_CH
  for x in a b; do $PP image "$reg" bench "$x" >"$W/img-$f-$x.json" || die "no manifest of $reg/bench:$x"; done
  $PP changed "$W/img-$f-a.json" "$W/img-$f-b.json" >"$W/changed-$f.json"
done
# Every chunked layer must carry its format's table of contents, else nothing is partial.
want_toc=zstd:chunked; [[ $CH_NAME == estargz ]] && want_toc=estargz
jget() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
for x in a b; do
  bad=$(python3 -c 'import json,sys; print(" ".join(l["digest"] for l in json.load(open(sys.argv[1]))["layers"] if l["toc"] != sys.argv[2]))' \
    "$W/img-chunked-$x.json" "$want_toc")
  [[ -z $bad ]] || die "the chunked image $x has layers without a $want_toc table of contents: $bad"
done
NL=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["layers"]))' "$W/img-gzip-b.json")
log "B: $NL layers; new to A: $(jget "$W/changed-gzip.json" layers) (gzip), $(jget "$W/changed-chunked.json" layers) ($CH_NAME)"

# --- pulls ---------------------------------------------------------------------------------
# pull STORE REF: podman pull (debug log in W/STORE.pull-REF.log); prints "SECONDS BYTES".
pull() {
  local store=$1 ref=$2 reg from t0 t1 tag=${2##*:}
  reg=${ref%%/*}
  local log_=$W/reg-gzip/log; [[ $reg == "$REG_CH" ]] && log_=$W/reg-chunked/log
  from=$(wc -l <"$log_")
  t0=$(bench_now)
  pm "$store" --log-level=debug pull --tls-verify=false "$ref" >"$W/$store.pull-$tag.log" 2>&1 ||
    { tail -30 "$W/$store.pull-$tag.log" >&2; die "podman pull $ref ($store) failed"; }
  t1=$(bench_now)
  sleep 0.2  # the access log line follows the response
  echo "$(python3 -c "print(f'{$t1-$t0:.3f}')") $($PP served "$log_" "$from" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')"
}
partials() { grep -c 'Retrieved partial blob' "$1" || true; }
declare -A SECS SERVED PARTIAL
for f in gzip chunked; do
  reg=$REG_GZ; [[ $f == chunked ]] && reg=$REG_CH
  pstore "$f"
  read -r sa ba < <(pull "$f" "$reg/bench:a")
  read -r sb bb < <(pull "$f" "$reg/bench:b")
  SECS[$f-a]=$sa SERVED[$f-a]=$ba SECS[$f-b]=$sb SERVED[$f-b]=$bb
  PARTIAL[$f]="$(partials "$W/$f.pull-b.log")/$(jget "$W/changed-$f.json" layers)"
  log "$f: A $ba bytes in $sa s, B after A $bb bytes in $sb s, partial layers of B: ${PARTIAL[$f]}"
done
[[ ${PARTIAL[gzip]%%/*} == 0 ]] || die "podman reports partial pulls of gzip layers"
want=$(jget "$W/changed-chunked.json" layers)
if [[ ${PARTIAL[chunked]} != "$want/$want" ]]; then
  grep -iE 'partial|chunk|differ|fallback' "$W/chunked.pull-b.log" | tail -20 >&2 || true
  die "podman pulled ${PARTIAL[chunked]%%/*} of B's $want new $CH_NAME layers as partial pulls; all must be"
fi

# --- podman's root filesystem of B against stackbuild unpack ------------------------------
"$SB" unpack "$GZ_B" "$W/unpacked-b" --store "$W/unpackstore" --progress plain >"$W/unpack.log" 2>&1 ||
  { cat "$W/unpack.log" >&2; die "stackbuild unpack $GZ_B failed"; }
same=()
for f in gzip chunked; do
  reg=$REG_GZ; [[ $f == chunked ]] && reg=$REG_CH
  mnt=$(pm "$f" image mount "$reg/bench:b" 2>"$W/mount.err") || die "podman image mount ($f): $(cat "$W/mount.err")"
  # mtimes: podman 4.3's partial pulls give files the time of the pull, not the layer's
  # (docs/partial-pulls.md); the gzip pull must keep them, the chunked one is reported.
  mt=(--mtimes); [[ $f == chunked ]] && mt=()
  if ! python3 "$BENCH_ROOT/tests/integration/treecmp.py" "$W/unpacked-b" "$mnt" "${mt[@]}" --owners \
    >"$W/treecmp-$f.out" 2>&1; then
    head -40 "$W/treecmp-$f.out" >&2
    die "podman's root filesystem of B ($f pull) differs from stackbuild unpack of B"
  fi
  note="mtimes the same"
  if [[ $f == chunked ]]; then
    python3 "$BENCH_ROOT/tests/integration/treecmp.py" "$W/unpacked-b" "$mnt" --mtimes >"$W/treecmp-mt.out" 2>&1 || true
    n_mt=$(grep -c ': mtime expected' "$W/treecmp-mt.out" || true)
    ((n_mt == 0)) || note="$n_mt mtimes differ (podman's partial pull wrote the pull's time)"
  fi
  pm "$f" image unmount "$reg/bench:b" >/dev/null 2>&1 || true
  same+=("$f: $(sed 's/^treecmp: same: //' "$W/treecmp-$f.out"), $note;")
done

# --- the table -------------------------------------------------------------------------------
echo "bench_partial_pull: A: $DESC_A"
echo "bench_partial_pull: B: $DESC_B"
echo "bench_partial_pull: chunked images: $CH_DESC; podman $(podman --version | awk '{print $3}')"
for f in gzip chunked; do
  name=gzip; [[ $f == chunked ]] && name=$CH_NAME
  $PP row "$name" "$(jget "$W/img-$f-b.json" total)" "$(jget "$W/changed-$f.json" bytes)" \
    "${SERVED[$f-a]}" "${SERVED[$f-b]}" "${SECS[$f-a]}" "${SECS[$f-b]}" "${PARTIAL[$f]}"
done
python3 -c "import sys; g, c = int(sys.argv[1]), int(sys.argv[2]); print(f'bench_partial_pull: {sys.argv[3]} / gzip, bytes served pulling B after A: {c / g if g else 0:.3f}')" \
  "${SERVED[gzip-b]}" "${SERVED[chunked-b]}" "$CH_NAME"
echo "bench_partial_pull: podman's root filesystem of B = stackbuild unpack of B (gzip): ${same[*]}"
bench_smoke_note
