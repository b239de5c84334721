#!/usr/bin/env bash
# The same layer bytes whatever the CPU: ISA-L and libzstd pick code paths by
# CPU features (SSE4.2, AVX2, AVX-512). Runs `stackbuild layer` natively and
# under qemu-user emulating older x86-64 CPUs, and compares the digests.
# Below SSE4.2 (x86-64-v1) ISA-L's gzip output differs, so stackbuild refuses
# gzip there and zstd must still match.
set -euo pipefail
: "${SB:?path to the stackbuild binary}"
command -v qemu-x86_64 >/dev/null || { echo "skip: qemu-x86_64 (qemu-user) is not installed"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "skip: needs an x86_64 host"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/tree" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(42)
words = [b"cuda", b"cudnn", b"kernel", b"\x7fELF", b"\0\0\0\0", b"sm_90", b"nccl"]
for d in range(4):
    os.makedirs(f"{root}/d{d}", exist_ok=True)
    for f in range(6):
        data = b"".join(rng.choice(words) + bytes([rng.randrange(256)]) * rng.randrange(3) for _ in range(60000))
        with open(f"{root}/d{d}/f{f}.bin", "wb") as fh:
            fh.write(data)
PY
digest() {  # $1: compression, rest: command prefix
  local comp=$1; shift
  rm -rf "$work/store"
  "$@" "$SB" layer "$work/tree" --store "$work/store" --compression "$comp" --jobs 2 --progress plain 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])'
}
fail=0
for comp in gzip zstd; do
  native=$(digest "$comp")
  echo "native ($comp): $native"
  for cpu in Nehalem-v2 Haswell; do
    emulated=$(digest "$comp" qemu-x86_64 -cpu "$cpu")
    if [ "$emulated" = "$native" ]; then
      echo "ok: $cpu ($comp) gives the same digest"
    else
      echo "FAIL: $cpu ($comp) gives $emulated"
      fail=1
    fi
  done
done
# Below SSE4.2 gzip would differ, so stackbuild refuses it; zstd still matches.
if out=$(qemu-x86_64 -cpu core2duo "$SB" layer "$work/tree" --store "$work/s2" --progress plain 2>&1); then
  echo "FAIL: gzip on a CPU without SSE4.2 was not refused"; fail=1
elif grep -q "lacks SSE4.2" <<<"$out"; then
  echo "ok: gzip refused without SSE4.2"
else
  echo "FAIL: unexpected error without SSE4.2: $out"; fail=1
fi
native=$(digest zstd)
[ "$(digest zstd qemu-x86_64 -cpu core2duo)" = "$native" ] && echo "ok: core2duo (zstd) gives the same digest" ||
  { echo "FAIL: core2duo (zstd) differs"; fail=1; }
exit $fail
