#!/usr/bin/env bash
# The GPU check (tests/gpu/run.sh) on this machine, which has nvcc and no GPU:
# every step that needs no GPU runs (the programs compiled, the images of
# host files built, the static checks, the built-in tests compiled, and
# step 10 where build/gpu-ops and PyTorch are there) and passes; every GPU
# result is skipped, never passed; the exit status is 77. The check runs only
# where a device is lent, so without this it rotted unseen once: a change to
# copy layers refused its host-file images for two days.
# The frameworks' image (step 9, gigabytes) is left out: SB_GPU_FRAMEWORKS=0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || skip "the check's images run in the build sandbox, which needs root here"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$nvcc" ]] || skip "no nvcc (the CUDA toolkit at /usr/local/cuda)"
[[ ! -e /dev/nvidiactl ]] || skip "this host has an NVIDIA GPU: run tests/gpu/run.sh itself"

check "tests/gpu/run.sh without a GPU: exit 77, nothing failed, the GPU results skipped"
rc=0
NVCC=$nvcc SB_GPU_FRAMEWORKS=0 OUT="$TMP" bash "$SB_SOURCE_DIR/tests/gpu/run.sh" >"$TMP/run.out" 2>&1 || rc=$?
[[ -s "$TMP/gpu-summary.json" ]] || fail "no summary (exit $rc): $(tail -30 "$TMP/run.out")"
python3 - "$TMP/gpu-summary.json" <<'PY' || fail "the summary: $(tail -40 "$TMP/run.out")"
import json, sys
results = json.load(open(sys.argv[1]))["results"]
by = {r["name"]: r["outcome"] for r in results}
failed = {n: r["detail"][-600:] for n, r in ((r["name"], r) for r in results) if r["outcome"] == "failed"}
assert not failed, failed
# What needs no GPU ran and passed.
for name in ("build the image", "static checks (sm_90)", "static checks refuse a wrong-arch image",
             "static checks refuse an image missing cuBLAS"):
    assert by.get(name) == "passed", (name, by.get(name))
assert any(n.startswith("compile ") and o == "passed" for n, o in by.items()), by
assert any(n.startswith("stackbuild test builtin: compile ") and o == "passed" for n, o in by.items()), by
# Nothing that needs a GPU passed.
assert by.get("GPU tests") == "skipped", by.get("GPU tests")
for n, o in by.items():
    if n.startswith("stackbuild test builtin: ") and not n.startswith("stackbuild test builtin: compile "):
        assert o == "skipped", (n, o)
print(sum(o == "passed" for o in by.values()), "passed,", sum(o == "skipped" for o in by.values()), "skipped")
PY
((rc == 77)) || fail "exit $rc, not 77 (no GPU): $(tail -20 "$TMP/run.out")"
pass
