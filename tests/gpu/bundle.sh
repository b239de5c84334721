#!/usr/bin/env bash
# Packs build/stackbuild (or $SB) with the shared libraries it needs (all but
# glibc's) into build/gpu-bundle and build/gpu-bundle.tar.gz, for a GPU host
# that has no network to install them. The device tool carries
# build/gpu-bundle.tar.gz with the working tree; tests/gpu/run.sh takes
# stackbuild from there first.
set -euo pipefail
sb=$(readlink -f "${SB:-build/stackbuild}")
cd "$(dirname "$0")/../.."
[[ -x "$sb" ]] || { echo "no stackbuild at $sb (build it, or give SB=PATH)" >&2; exit 1; }
out=build/gpu-bundle
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
cp "$sb" "$out/bin/"
ldd "$sb" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;  # the host's glibc
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
# Without debug info: the device tool carries at most 64 MiB (a RelWithDebInfo
# stackbuild alone is about 37 MiB with line tables, over 150 MiB with
# -DSTACKBUILD_LINE_TABLES=OFF, and about 5 stripped).
if command -v strip >/dev/null; then strip --strip-debug "$out/bin/stackbuild" "$out"/lib/*; fi
# Also packed: the device tool carries at most 64 MiB with the working tree,
# and the directory alone is about 60 MiB (31 of them ICU's data, which
# libarchive's libxml2 needs); packed it is about 25.
tar -czf "$out.tar.gz.tmp" -C build gpu-bundle && mv "$out.tar.gz.tmp" "$out.tar.gz"
du -sh "$out" "$out.tar.gz" | sed 's/^/gpu-bundle: /'

# The CUDA operators' source (tests/gpu/torch_ops.sh): build/gpu-ops holds
# tests/gpu/ops-source.yaml with its lockfile, the shell its build step runs
# in (this host's, with the libraries it loads), and a store of the three
# files of Debian's source package the lockfile pins (.dsc, orig and debian
# tarballs, 27 MiB), fetched here through this machine's apt configuration.
# The device tool carries build/gpu-ops beside the bundle; the GPU host builds
# the image from them with no network, checking every hash again.
ops=build/gpu-ops
rm -rf "$ops" "$ops.tmp" && mkdir -p "$ops.tmp/base/bin" "$ops.tmp/store/blobs/sha256"
cp tests/gpu/ops-source.yaml tests/gpu/ops-source.yaml.lock "$ops.tmp/"
shell=$(readlink -f /bin/sh)
cp "$shell" "$ops.tmp/base/bin/sh"
for lib in $(ldd "$shell" | awk '/=> \// {print $3} /^\t\/[^ ]*ld-linux/ {print $1}'); do
  mkdir -p "$ops.tmp/base$(dirname "$lib")" && cp -L "$lib" "$ops.tmp/base$lib"
done
"$sb" build "$ops.tmp/ops-source.yaml" --locked --store "$ops.tmp/fetched" -o "$ops.tmp/out" \
  --compression none --progress plain >"$ops.tmp/fetch.log" 2>&1 ||
  { tail -20 "$ops.tmp/fetch.log" >&2; echo "bundle: the source of $ops could not be fetched" >&2; exit 1; }
for h in $(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["points"][0]["source"]["ops"]
print(" ".join([e["dsc"]["sha256"]] + [f["sha256"] for f in e["files"]]))' "$ops.tmp/ops-source.yaml.lock"); do
  cp "$ops.tmp/fetched/blobs/sha256/$h" "$ops.tmp/store/blobs/sha256/$h"
done
rm -rf "$ops.tmp/fetched" "$ops.tmp/out" "$ops.tmp/fetch.log" && mv "$ops.tmp" "$ops"
du -sh "$ops" | sed 's/^/gpu-ops: /'

# What the device tool carries for `bash tests/gpu/run.sh`: the working tree
# (tracked files and untracked ones git does not ignore) with the two paths
# above, at most 64 MiB in all. Said here, before a device run fails on it.
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null |
  awk '{s += $1} END {print s + 0}')
total=$(( tree + $(stat -c %s build/gpu-bundle.tar.gz) + $(du -sb "$ops" | cut -f1) ))
echo "carry: build/gpu-bundle.tar.gz and $ops with the working tree: $(( total / 1048576 )) MiB of the device tool's 64"
(( total <= 64 * 1048576 )) || { echo "bundle: that is over the device tool's 64 MiB" >&2; exit 1; }
