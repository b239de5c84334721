#!/usr/bin/env bash
# Recipes that ship are locked (issue 34): every recipe these machines build
# has its lockfile committed beside it, and every committed lockfile is
# current for its recipe and the catalog (`stackbuild lock --check`, offline:
# no repository, index or registry is asked). A recipe changed without its
# lock fails here, naming the layer. Lockfiles hold no host: packages are
# paths in their repository, wheels are file names (a --locked build takes
# the URLs from the machine's configuration).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
src=${SB_SOURCE_DIR:?}

check "the recipes these machines build have their lockfile"
for r in recipes/pytorch.yaml recipes/cuda-base-wheels.yaml recipes/jax.yaml recipes/tensorflow.yaml \
  recipes/pytorch-debian.yaml recipes/torch-cuda-ops.yaml; do
  [[ -f "$src/$r.lock" ]] || fail "$r ships without $r.lock: run 'stackbuild lock $r' and commit it"
done

check "every committed lockfile is current, offline, and holds no URL"
n=0
for lock in "$src"/recipes/*.yaml.lock "$src"/examples/*.yaml.lock "$src"/tests/gpu/*.yaml.lock; do
  [[ -f $lock ]] || continue
  n=$((n + 1))
  recipe=${lock%.lock}
  name=${recipe#"$src/"}
  STACKBUILD_OFFLINE=1 expect_ok "check_$n" sb lock "$recipe" --check
  if grep -q '"url": \|"uri": ' "$lock"; then
    fail "$name.lock holds URLs: $(grep -o '"ur[il]": "[^"]*"' "$lock" | head -2 | tr '\n' ' ')"
  fi
done
((n >= 2)) || fail "only $n committed lockfiles"

check "the GPU check's source pins are torch-cuda-ops.yaml's"
# tests/gpu/ops-source.yaml keeps the tree recipes/torch-cuda-ops.yaml compiles,
# so that the operators tests/gpu/torch_ops.sh runs on a GPU are those.
python3 - "$src/tests/gpu/ops-source.yaml.lock" "$src/recipes/torch-cuda-ops.yaml.lock" <<'PY' ||
import json, sys
gpu, ops = (json.load(open(f))["points"][0]["source"]["ops"] for f in sys.argv[1:])
keys = ("debian", "version", "suite", "dsc", "files", "tree")
assert all(gpu[k] == ops[k] for k in keys), [k for k in keys if gpu[k] != ops[k]]
PY
  fail "tests/gpu/ops-source.yaml.lock pins another source than recipes/torch-cuda-ops.yaml.lock"

check "a recipe changed without its lock is caught, naming the layer"
mkdir -p "$TMP/r"
cp "$src/recipes/pytorch.yaml" "$src/recipes/pytorch.yaml.lock" "$TMP/r/"
sed -i 's|"numpy==2.2.6"|"numpy==2.2.5"|' "$TMP/r/pytorch.yaml"
grep -q '"numpy==2.2.5"' "$TMP/r/pytorch.yaml" || fail "the recipe no longer pins numpy==2.2.6: update this test"
STACKBUILD_OFFLINE=1 expect_rc 3 stale sb lock "$TMP/r/pytorch.yaml" --check --catalog "$src/layers"
grep -q "is not current" "$TMP/stale.err" && grep -q "layer 'tools'" "$TMP/stale.err" ||
  { show_output stale; fail "lock --check did not name the tools layer"; }
pass
