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
