#!/usr/bin/env bash
# Hostile git sources (DESIGN.md, "Trust boundary"): a recipe's or the catalog's
# `git:` URL or `ref:` that git would read as an option (`--upload-pack=CMD` runs CMD
# on the host), one of git's other transports (`ext::`), or a bare local path, is
# refused by `plan`, `lock` and `build` with an error naming the value (file:line:col
# for the recipe), and the command it carries never runs (its marker file never
# appears). A `file://` URL, the explicit form of a local mirror, still works, for
# `lock` too (and test_kept_source.sh, test_sandbox_source.sh build from one).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool git
cd "$TMP"

gitc() { git -C "$1" -c user.name=t -c user.email=t@example.invalid "${@:2}"; }
mkdir -p repo && printf 'x\n' >repo/file
git init -q repo && gitc repo add -A && gitc repo commit -qm one && gitc repo tag v1
mkdir -p base/etc cat/base/etc && printf 'x\n' >base/etc/x && cp base/etc/x cat/base/etc/x  # what the build needs below

recipe() {  # recipe FILE GIT-URL REF
  cat >"$1" <<YAML
stack: hostile
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: demo
    source: {git: "$2", ref: "$3"}
    build:
      run: [sh build.sh]
tags: ["hostile:1"]
YAML
}

# refused NAME VALUE: plan, lock and build of NAME.yaml all fail, each naming VALUE,
# and no marker file appears (in $TMP, or where git runs: the store, the cwd).
refused() {
  local name=$1 value=$2 cmd
  for cmd in plan lock build; do
    local args=("$cmd" "$name.yaml")
    [[ $cmd == build ]] && args+=(-o "out-$name")
    run_capture "$name-$cmd" sb "${args[@]}" --store "$STORE"
    [[ $RC -ne 0 ]] || { show_output "$name-$cmd"; fail "$cmd accepted the git source $name"; }
    grep -qF -- "$value" "$TMP/$name-$cmd.err" || { show_output "$name-$cmd"; fail "$cmd's error does not name '$value'"; }
    if compgen -G "$TMP/pwned*" >/dev/null || find "$TMP" -name 'pwned*' | grep -q .; then
      show_output "$name-$cmd"
      fail "$cmd ran the command in the git source $name: $(find "$TMP" -name 'pwned*')"
    fi
  done
}

check "a URL that is a git option is refused, and its command never runs"
recipe url.yaml "--upload-pack=touch $TMP/pwned-url" v1
refused url "--upload-pack=touch $TMP/pwned-url"
grep -q "url.yaml:[0-9]*:[0-9]*: " "$TMP/url-plan.err" || { show_output url-plan; fail "the error does not point at the recipe's line"; }

check "a ref that is a git option is refused, and its command never runs"
recipe ref.yaml "file://$TMP/repo" "--upload-pack=touch $TMP/pwned-ref"
refused ref "--upload-pack=touch $TMP/pwned-ref"

check "git's ext:: transport (runs a command) is refused"
recipe ext.yaml "ext::sh -c touch% $TMP/pwned-ext" v1
refused ext "ext::sh -c touch% $TMP/pwned-ext"

check "an ssh host that is an option is refused"
recipe ssh.yaml "ssh://-oProxyCommand=touch $TMP/pwned-ssh/x" v1
refused ssh "ssh://-oProxyCommand=touch $TMP/pwned-ssh/x"

check "a bare local path is refused, with the file:// form as the hint"
recipe path.yaml "$TMP/repo" v1
refused path "$TMP/repo"
grep -q "file://" "$TMP/path-plan.err" || { show_output path-plan; fail "the error does not say how to name a local mirror"; }

check "the catalog's git source is held to the same rules"
mkdir -p cat/layers
cat >cat/layers/demo.yaml <<YAML
component: demo
description: a component whose catalog record names a hostile git source
versions:
  - version: "1.0"
    sources: {git: {url: "--upload-pack=touch $TMP/pwned-catalog", ref: v1}}
YAML
cat >cat/catalog.yaml <<YAML
stack: hostile
source_date_epoch: 1700000000
layers:
  - {name: base, copy: [{src: base/, dst: /}]}
  - name: demo
    use: demo
    version: "1.0"
    from: source
    build:
      run: [sh build.sh]
tags: ["hostile:1"]
YAML
(cd cat && for cmd in plan lock build; do
  args=("$cmd" catalog.yaml --store "$STORE")
  [[ $cmd == build ]] && args+=(-o out)
  run_capture "catalog-$cmd" sb "${args[@]}"
  [[ $RC -ne 0 ]] || { show_output "catalog-$cmd"; fail "$cmd accepted the catalog's git source"; }
  grep -qF -- "--upload-pack=touch $TMP/pwned-catalog" "$TMP/catalog-$cmd.err" ||
    { show_output "catalog-$cmd"; fail "$cmd's error does not name the catalog's URL"; }
done)
[[ -z $(find "$TMP" -name 'pwned*') ]] || fail "the catalog's git source ran its command"

check "a file:// URL (a local mirror, named explicitly) still locks"
recipe good.yaml "file://$TMP/repo" v1
expect_ok good-lock sb lock good.yaml --store "$STORE"
grep -q "$(git -C repo rev-parse v1)" good.yaml.lock || fail "the lockfile does not pin v1: $(cat good.yaml.lock)"

pass
