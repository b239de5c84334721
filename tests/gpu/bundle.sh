#!/usr/bin/env bash
# Packs build/stackbuild with the shared libraries it needs (all but glibc's)
# into build/gpu-bundle, for a GPU host that has no network to install them.
# The device tool carries build/gpu-bundle with the working tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/gpu-bundle
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
cp build/stackbuild "$out/bin/"
ldd build/stackbuild | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;  # the host's glibc
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
du -sh "$out" | sed 's/^/gpu-bundle: /'
