#!/usr/bin/env bash
# stackbuild cluster github|gitlab|k8s (issue 35): the files each engine needs
# to fan a release out, generated for an offline recipe of three points.
#   - They validate with tools nobody here wrote: the GitHub workflow and the
#     GitLab file against SchemaStore's schemas as check-jsonschema vendors
#     them (vendor.github-workflows, vendor.gitlab-ci: only documented keys),
#     the Kubernetes Jobs against the batch/v1 schema (kubernetes-validate
#     --strict); a file with an undocumented key fails each validator. Their
#     shell passes shellcheck.
#   - Each generated task command, run here as the engine would run it (the
#     GitHub job's script with its matrix entry's ONLY, the GitLab job's with
#     its parallel:matrix ONLY, the k8s pod's with JOB_COMPLETION_INDEX),
#     builds its point and pushes it to a docker-registry on 127.0.0.1: the
#     digest is the one `stackbuild build --locked` gives here; then the
#     generated merge step assembles the matrix index `build --locked` gives.
#   - Hostile values (a matrix value with '$(...)', a recipe path with a
#     space) stop the generation, writing nothing.
# The validators come from scripts/install-deps.sh --with-tests
# ($STACKBUILD_CI_VENV, default /opt/stackbuild-ci-venv); without them the test
# is skipped.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$HERE/registry/lib.sh"
venv=${STACKBUILD_CI_VENV:-/opt/stackbuild-ci-venv}
[[ -x $venv/bin/check-jsonschema && -x $venv/bin/kubernetes-validate ]] ||
  skip "check-jsonschema and kubernetes-validate are not in $venv (scripts/install-deps.sh --with-tests)"
require_registry
require_tool shellcheck
require_python_module yaml
start_registry plain
REG="127.0.0.1:$REG_PORT"

R="$TMP/repo"
mkdir -p "$R/files"
for f in small medium large; do echo "$f" >"$R/files/$f.txt"; done
cat >"$R/flavors.yaml" <<'YAML'
stack: flavors
source_date_epoch: 1700000000
matrix:
  flavor: [small, medium, large]
layers:
  - {name: base, copy: [{src: files/small.txt, dst: /etc/base.txt}]}
  - {name: flavor, copy: [{src: "files/${flavor}.txt", dst: /etc/flavor.txt}]}
tags: ["flavors:${flavor}"]
YAML
cd "$R"
expect_ok lock sb lock flavors.yaml
# The tasks push to a plain-http registry: registries.conf marks it insecure,
# as a site would for its own registry.
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REG" >"$TMP/registries.conf"
export CONTAINERS_REGISTRIES_CONF="$TMP/registries.conf"

check "generate the three engines' files"
expect_ok gen_github sb cluster github flavors.yaml --registry "$REG/team/flavors" -o "$TMP/ci"
expect_ok gen_gitlab sb cluster gitlab flavors.yaml --registry "$REG/team/flavors" -o "$TMP/ci"
expect_ok gen_k8s sb cluster k8s flavors.yaml --registry "$REG/team/flavors" --image stackbuild:1 -o "$TMP/ci"
ls -A "$TMP/ci"

check "they validate: SchemaStore's GitHub workflow and GitLab CI schemas, Kubernetes' batch/v1 Job"
expect_ok v_github "$venv/bin/check-jsonschema" --builtin-schema vendor.github-workflows "$TMP/ci/stackbuild-flavors.yml"
expect_ok v_gitlab "$venv/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$TMP/ci/.gitlab-ci.yml"
expect_ok v_k8s "$venv/bin/kubernetes-validate" --strict "$TMP/ci/k8s-points.yaml" "$TMP/ci/k8s-release.yaml"

check "the validators can fail: an undocumented key in each file is refused"
sed 's/^  timeout: /  timeout_minutes: /' "$TMP/ci/.gitlab-ci.yml" >"$TMP/bad-gitlab.yml"
sed 's/^    runs-on: /    runs_on: /' "$TMP/ci/stackbuild-flavors.yml" >"$TMP/bad-github.yml"
sed 's/^  completionMode: /  completion_mode: /' "$TMP/ci/k8s-points.yaml" >"$TMP/bad-k8s.yaml"
! cmp -s "$TMP/bad-gitlab.yml" "$TMP/ci/.gitlab-ci.yml" && ! cmp -s "$TMP/bad-github.yml" "$TMP/ci/stackbuild-flavors.yml" &&
  ! cmp -s "$TMP/bad-k8s.yaml" "$TMP/ci/k8s-points.yaml" || fail "the templates changed: update the mutations"
expect_rc 1 bad_gitlab "$venv/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$TMP/bad-gitlab.yml"
expect_rc 1 bad_github "$venv/bin/check-jsonschema" --builtin-schema vendor.github-workflows "$TMP/bad-github.yml"
run_capture bad_k8s "$venv/bin/kubernetes-validate" --strict "$TMP/bad-k8s.yaml"
[[ $RC != 0 ]] || fail "kubernetes-validate took a Job with completion_mode"

# The task scripts, as each engine runs them: NAME ENV... (one file per task).
python3 - "$TMP/ci" "$TMP/tasks" <<'PY'
import os, sys, yaml
ci, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
def write(name, script, env, shell):
    with open(os.path.join(out, name + ".sh"), "w") as f:
        f.write(f"#!/bin/{shell}\n" + "".join(f"export {k}='{v}'\n" for k, v in env.items()) + script + "\n")
gh = yaml.safe_load(open(os.path.join(ci, "stackbuild-flavors.yml")))
run = [s for s in gh["jobs"]["point"]["steps"] if "run" in s][0]["run"]
for i, p in enumerate(gh["jobs"]["point"]["strategy"]["matrix"]["include"]):
    write(f"github-{i}", run, {"ONLY": p["only"]}, "bash")
write("github-merge", [s for s in gh["jobs"]["merge"]["steps"] if "run" in s][0]["run"], {}, "bash")
gl = yaml.safe_load(open(os.path.join(ci, ".gitlab-ci.yml")))
for i, m in enumerate(gl["stackbuild-point"]["parallel"]["matrix"]):
    write(f"gitlab-{i}", "\n".join(gl["stackbuild-point"]["script"]), {"ONLY": m["ONLY"]}, "sh")
k8s = yaml.safe_load(open(os.path.join(ci, "k8s-points.yaml")))
cmd = k8s["spec"]["template"]["spec"]["containers"][0]["command"]
assert cmd[:2] == ["/bin/sh", "-c"], cmd
for i in range(k8s["spec"]["completions"]):
    write(f"k8s-{i}", cmd[2], {"JOB_COMPLETION_INDEX": str(i)}, "sh")
write("k8s-bad-index", cmd[2], {"JOB_COMPLETION_INDEX": "7"}, "sh")
PY
ls "$TMP/tasks"

check "the task scripts pass shellcheck"
expect_ok shellcheck shellcheck "$TMP"/tasks/*.sh

check "each engine's task builds its point, here, and pushes it; the digests are build --locked's"
mkdir -p "$TMP/bin"
ln -s "$SB" "$TMP/bin/stackbuild"
expect_ok local sb build flavors.yaml --locked -o "$TMP/local" --store "$STORE"
task() {  # task NAME: runs the task's script in the checkout, stackbuild on PATH
  run_capture "$1" env PATH="$TMP/bin:$PATH" XDG_CACHE_HOME="$TMP/cache-$1" bash "$TMP/tasks/$1.sh"
}
for engine_task in github-0 gitlab-1 k8s-2; do
  task "$engine_task"
  [[ $RC == 0 ]] || { show_output "$engine_task"; fail "task $engine_task failed"; }
done
for flavor in small medium large; do
  want=$(manifest_digest "$TMP/local" "$flavor")
  got=$(curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' -o /dev/null -D - \
          "http://$REG/v2/team/flavors/manifests/$flavor" | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: sha256://p')
  [[ $got == "$want" ]] || fail "flavors:$flavor in the registry is sha256:${got:-none}, build --locked gave sha256:$want"
done
say "three points pushed by three engines' tasks, each the digest build --locked gives"

check "the merge step (GitHub's, as the others) assembles the release: the index build --locked gives, the notes"
task github-merge
[[ $RC == 0 ]] || { show_output github-merge; fail "the merge task failed"; }
want=$(manifest_digest "$TMP/local" flavors-matrix)
got=$(curl -sf -H 'Accept: application/vnd.oci.image.index.v1+json' -o /dev/null -D - \
        "http://$REG/v2/team/flavors/manifests/flavors-matrix" | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: sha256://p')
[[ $got == "$want" ]] || fail "the merged index is sha256:${got:-none}, build --locked's is sha256:$want"
grep -q "flavors" release-notes.md || fail "the merge wrote no release notes"
say "merged index sha256:$got, as build --locked"
task k8s-bad-index
[[ $RC == 2 ]] && grep -q "no matrix point has index 7" "$TMP/k8s-bad-index.err" ||
  { show_output k8s-bad-index; fail "a pod of an index with no point did not stop"; }

check "hostile values stop the generation and write nothing"
mkdir -p "$TMP/hostile"
sed 's/medium, large/"medium$(touch pwned)", large/' flavors.yaml >"$TMP/hostile/flavors.yaml"
cp -r files "$TMP/hostile/"
(cd "$TMP/hostile" && expect_ok hlock sb lock flavors.yaml)
(cd "$TMP/hostile" && expect_rc 3 hostile sb cluster gitlab flavors.yaml --registry "$REG/team/x" -o "$TMP/hostile/ci")
grep -q "cannot be written into a CI file safely" "$TMP/hostile.err" || { show_output hostile; fail "no reason given"; }
[[ ! -e $TMP/hostile/ci && ! -e $TMP/hostile/pwned ]] || fail "something was written"
cp flavors.yaml "with space.yaml" && cp flavors.yaml.lock "with space.yaml.lock"
expect_rc 3 space sb cluster github "with space.yaml" --registry "$REG/team/x" -o "$TMP/space"
[[ ! -e $TMP/space ]] || fail "something was written for a path with a space"
expect_rc 2 abs sb cluster github "$R/flavors.yaml" --registry "$REG/team/x" -o "$TMP/abs"
grep -q "is absolute" "$TMP/abs.err" || { show_output abs; fail "an absolute recipe path was taken"; }
pass
