#!/usr/bin/env bash
# Apt layers configured by the recipe, against fixture repositories served on
# 127.0.0.1 (packages built with dpkg-deb, Releases signed by a key gpg makes
# here): `repositories:` with a keyring builds; a Release + Release.gpg
# repository works; an unsigned one is refused unless `trusted: true`; a second
# layer upgrades a package of the first (dpkg's status read back with
# dpkg-query --admindir, the dropped file gone from the unpacked image); and
# `build --locked` refuses once the recipe's apt packages changed after `lock`.
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
require_tool gpg gpgv dpkg-deb gzip sha256sum

www="$TMP/www"
export GNUPGHOME="$TMP/gnupg"
mkdir -p "$GNUPGHOME" "$TMP/recipe" && chmod 700 "$GNUPGHOME"
gpg --batch --passphrase '' --quick-gen-key 'Fixture <fixture@example.invalid>' ed25519 sign never 2>/dev/null ||
  fail "gpg could not make a key"
gpg --batch --export >"$TMP/recipe/key.gpg"

mkdeb main libgreet 1.0 "" usr/lib/libgreet.so.1 usr/share/doc/libgreet/old.txt
mkdeb main hello 1.0 "libgreet (>= 1.0)" usr/bin/hello
mkdeb main curlish 1.0 "" usr/bin/curlish
publish main inrelease
mkdeb updates libgreet 2.0 "" usr/lib/libgreet.so.2
publish updates detached
mkdeb local tool 1.0 "" usr/bin/tool
publish local unsigned

serve_dir "$www"
url="$SERVED_URL"

# The recipe: layer 'base' from the signed repository; layer 'more' names only
# the Release.gpg-only repository, whose newer libgreet it asks for.
write_recipe() {  # $1: the packages of layer 'more'
  cat >"$TMP/recipe/r.yaml" <<YAML
stack: aptr
repositories:
  - {url: "$url/main", suites: [test], keyring: key.gpg}
layers:
  - {name: base, apt: [hello]}
  - name: more
    apt: [$1]
    repositories:
      - {url: "$url/updates", suites: test, keyring: key.gpg}
tags: ["aptr:t"]
YAML
}
write_recipe libgreet

check "a recipe with repositories: builds, the second layer upgrading libgreet from a Release.gpg repository"
expect_ok build sb build "$TMP/recipe/r.yaml" -o "$TMP/layout" --store "$STORE"
grep -q "upgrades libgreet 1.0 -> 2.0" "$TMP/build.err" "$TMP/build.out" || { show_output build; fail "no upgrade reported"; }
expect_ok unpack sb unpack "$TMP/layout:t" "$TMP/root" --store "$STORE"
[[ -f $TMP/root/usr/bin/hello && -f $TMP/root/usr/lib/libgreet.so.2 ]] || fail "hello or libgreet.so.2 missing from the image"
[[ ! -e $TMP/root/usr/lib/libgreet.so.1 ]] || fail "libgreet 1.0's libgreet.so.1 is still in the image"
[[ ! -e $TMP/root/usr/share/doc/libgreet/old.txt ]] || fail "libgreet 1.0's old.txt is still in the image"

check "dpkg's status in the image: hello 1.0 and libgreet 2.0, each once"
admin="$TMP/root/var/lib/dpkg"
if command -v dpkg-query >/dev/null; then
  got=$(dpkg-query --admindir="$admin" -W -f '${Package} ${Version} ${db:Status-Status}\n' | sort | tr '\n' ';')
  [[ $got == "hello 1.0 installed;libgreet 2.0 installed;" ]] || fail "dpkg-query -W: $got"
  dpkg-query --admindir="$admin" -L libgreet >"$TMP/list" || fail "dpkg-query -L libgreet failed"
  grep -qx /usr/lib/libgreet.so.2 "$TMP/list" || fail "libgreet's file list lacks libgreet.so.2: $(cat "$TMP/list")"
  ! grep -q libgreet.so.1 "$TMP/list" || fail "libgreet's file list still names libgreet.so.1"
else
  say "dpkg-query is not installed; reading the status file instead"
fi
got=$(awk '/^Package:/{p=$2} /^Version:/{print p, $2}' "$admin/status" | sort | tr '\n' ';')
[[ $got == "hello 1.0;libgreet 2.0;" ]] || fail "var/lib/dpkg/status lists: $got"
check "the image's sources list holds the repositories of both layers, with the keyring they name"
sources="$TMP/root/etc/apt/sources.list.d/stackbuild.sources"
grep -q "URIs: $url/updates" "$sources" || fail "the image's sources list lacks the updates repository: $(cat "$sources")"
grep -q "URIs: $url/main" "$sources" ||
  fail "the add-on layer replaced the sources list: the base layer's repository is gone: $(cat "$sources")"
[[ $(grep -c '^Types: deb' "$sources") == 2 ]] || fail "not two repositories in the sources list: $(cat "$sources")"
keyring=$(awk '/^Signed-By:/{print $2; exit}' "$sources")
[[ -n $keyring ]] || fail "no Signed-By in the sources list: $(cat "$sources")"
cmp -s "$TMP/root$keyring" "$TMP/recipe/key.gpg" || fail "the keyring $keyring is not in the image (or differs)"

check "run from the recipe's own directory, 'keyring: key.gpg' (no directory part) still verifies"
expect_ok here in_dir "$TMP/recipe" sb build r.yaml -o "$TMP/layout-here" --store "$STORE"
[[ $(manifest_digest "$TMP/layout" t) == $(manifest_digest "$TMP/layout-here" t) ]] ||
  fail "the build from the recipe's directory differs"

check "over --layer-budget 1 both apt layers split by package, dpkg's status last; stacked, the same tree"
for run in a b; do  # two stores: the second build shares nothing with the first
  expect_ok "split-$run" sb build "$TMP/recipe/r.yaml" -o "$TMP/split-$run" --store "$TMP/store-$run" --layer-budget 1
done
grep -q "layer base (2 packages): .* split by package into 3 layers" "$TMP/split-a.err" "$TMP/split-a.out" ||
  { show_output split-a; fail "no split of layer base reported"; }
[[ $(image_digests "$TMP/split-a" t) == "$(image_digests "$TMP/split-b" t)" ]] ||
  fail "two split builds differ: $(image_digests "$TMP/split-a" t) vs $(image_digests "$TMP/split-b" t)"
python3 "$HERE/split_parts.py" "$TMP/split-a" t >"$TMP/parts" || fail "the split parts are not sound (above)"
grep -qx "parts base apt 3" "$TMP/parts" && grep -qx "parts more apt 2" "$TMP/parts" ||
  fail "not hello, libgreet, dpkg's state | libgreet, dpkg's state: $(grep ^parts "$TMP/parts")"
part_of() { awk -v n="$1" -v p="$2" '$1 == "entry" && $3 == n && $4 == p { print $2 }' "$TMP/parts"; }
[[ $(part_of base usr/bin/hello) == 0 && $(part_of base var/lib/dpkg/info/hello.list) == 0 ]] ||
  fail "hello's file and its dpkg list are not in the first part"
[[ $(part_of base var/lib/dpkg/status) == 2 && $(part_of base etc/apt/sources.list.d/stackbuild.sources) == 2 ]] ||
  fail "dpkg's status and the sources are not in the last part of layer base"
[[ $(part_of more usr/lib/.wh.libgreet.so.1) == 3 && $(part_of more var/lib/dpkg/status) == 4 ]] ||
  fail "the upgrade's whiteout is not with libgreet 2.0, or the status not last: $(grep ' more ' "$TMP/parts")"
expect_ok split-unpack sb unpack "$TMP/split-a:t" "$TMP/split-root" --store "$TMP/store-a"
expect_ok split-cmp python3 "$HERE/treecmp.py" "$TMP/root" "$TMP/split-root"
if command -v umoci >/dev/null; then
  expect_ok split-umoci umoci unpack --rootless --image "$TMP/split-a:t" "$TMP/split-bundle"
  expect_ok split-cmp-umoci python3 "$HERE/treecmp.py" "$TMP/root" "$TMP/split-bundle/rootfs"
fi
if command -v dpkg-query >/dev/null; then
  got=$(dpkg-query --admindir="$TMP/split-root/var/lib/dpkg" -W -f '${Package} ${Version} ${db:Status-Status}\n' |
    sort | tr '\n' ';')
  [[ $got == "hello 1.0 installed;libgreet 2.0 installed;" ]] || fail "dpkg-query -W over the split image: $got"
  dpkg-query --admindir="$TMP/split-root/var/lib/dpkg" -L hello | grep -qx /usr/bin/hello ||
    fail "dpkg-query -L hello over the split image does not list /usr/bin/hello"
fi
expect_ok split-again sb build "$TMP/recipe/r.yaml" -o "$TMP/split-a" --store "$TMP/store-a" --layer-budget 1
grep -q "(0 built, 2 from the cache)" "$TMP/split-again.err" "$TMP/split-again.out" ||
  { show_output split-again; fail "the split rebuild was not cached"; }
expect_ok budget-0 sb build "$TMP/recipe/r.yaml" -o "$TMP/budget0" --store "$TMP/store-a" --layer-budget 0
[[ $(json "$TMP/budget0/blobs/sha256/$(manifest_digest "$TMP/budget0" t)" 'len(j["layers"])') == 2 ]] ||
  fail "--layer-budget 0 split an apt layer"

check "an unsigned repository is refused, naming it, and builds once marked trusted: true"
cat >"$TMP/recipe/u.yaml" <<YAML
stack: aptu
layers:
  - name: t
    apt: [tool]
    repositories: [{url: "$url/local", suites: [test]}]
tags: ["aptu:t"]
YAML
expect_rc 1 unsigned sb build "$TMP/recipe/u.yaml" -o "$TMP/ulayout" --store "$STORE"
grep -q "dists/test/Release: refusing the repository: it is not signed (there is no InRelease and no Release.gpg)" \
  "$TMP/unsigned.err" || { show_output unsigned; fail "not the unsigned-repository error"; }
grep -q "u.yaml:5" "$TMP/unsigned.err" || { show_output unsigned; fail "the error does not name the recipe line"; }
[[ ! -e $TMP/ulayout/index.json ]] || fail "a refused build left an image"
sed -i 's|suites: \[test\]}|suites: [test], trusted: true}|' "$TMP/recipe/u.yaml"
expect_ok trusted sb build "$TMP/recipe/u.yaml" -o "$TMP/ulayout" --store "$STORE"

check "a repository that is not there is a clear error"
sed -i "s|$url/local|$url/nowhere|" "$TMP/recipe/u.yaml"
expect_rc 1 nowhere sb build "$TMP/recipe/u.yaml" -o "$TMP/nlayout" --store "$STORE"
grep -q "has neither InRelease nor Release (HTTP 404)" "$TMP/nowhere.err" || { show_output nowhere; fail "not the missing-repository error"; }

check "lock, then build --locked; after the apt packages change, --locked refuses naming the layer and packages"
expect_ok lock sb lock "$TMP/recipe/r.yaml" --store "$STORE"
expect_ok check_current sb lock "$TMP/recipe/r.yaml" --check
grep -q "r.yaml.lock is current" "$TMP/check_current.out" "$TMP/check_current.err" || { show_output check_current; fail "lock --check did not say current"; }

check "a lockfile whose package path leaves its repository, or names no repository, is refused before anything is fetched"
cp "$TMP/recipe/r.yaml.lock" "$TMP/good.lock"
tamper() {  # tamper FIELD JSON-VALUE: sets it on layer 'more's first package
  python3 - "$TMP/recipe/r.yaml.lock" "$1" "$2" <<'PY'
import json, sys
f, field, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
j = json.load(open(f))
j["points"][0]["apt"]["more"]["packages"][0][field] = value
json.dump(j, open(f, "w"), indent=2)
PY
}
tamper path '"../../../outside/libgreet_2.0_amd64.deb"'
expect_rc 3 dotdot sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout-dotdot" --store "$TMP/store-dotdot"
grep -q "malformed entry: packages\[0\]: path '../../../outside/libgreet_2.0_amd64.deb' .* is not a file of a repository" \
  "$TMP/dotdot.err" || { show_output dotdot; fail "a path with '..' was not refused"; }
[[ -z $(find "$TMP/store-dotdot/blobs" -type f 2>/dev/null) ]] || fail "something was fetched"
cp "$TMP/good.lock" "$TMP/recipe/r.yaml.lock"
tamper repository 7
expect_rc 3 norepo sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout-norepo" --store "$TMP/store-norepo"
grep -q "packages\[0\]: repository 7 is not one of the entry's" "$TMP/norepo.err" ||
  { show_output norepo; fail "a package of no repository was not refused"; }
cp "$TMP/good.lock" "$TMP/recipe/r.yaml.lock"
json "$TMP/recipe/r.yaml.lock" '[p["name"] + "=" + p["version"] for p in j["points"][0]["apt"]["more"]["packages"]]' \
  >"$TMP/locked" || fail "the lockfile has no apt packages for layer 'more'"
grep -q "libgreet=2.0" "$TMP/locked" || fail "locked: $(cat "$TMP/locked")"
expect_ok locked sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout2" --store "$STORE"
[[ $(manifest_digest "$TMP/layout" t) == $(manifest_digest "$TMP/layout2" t) ]] || fail "the locked build differs"

check "the lockfile names the keyrings relative to the recipe: --locked builds a moved copy, from an empty store"
if grep -q "$TMP/recipe" "$TMP/recipe/r.yaml.lock"; then
  fail "the lockfile holds paths of this machine: $(grep -o "\"[^\"]*$TMP/recipe[^\"]*\"" "$TMP/recipe/r.yaml.lock" | sort -u | head -3)"
fi
mv "$TMP/recipe" "$TMP/moved"
expect_ok moved sb build "$TMP/moved/r.yaml" --locked -o "$TMP/layout-moved" --store "$TMP/store-moved"
mv "$TMP/moved" "$TMP/recipe"
[[ $(manifest_digest "$TMP/layout" t) == $(manifest_digest "$TMP/layout-moved" t) ]] || fail "the moved locked build differs"
write_recipe "libgreet, curlish"
expect_rc 3 stale sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout3" --store "$STORE"
grep -q "layer 'more' (.*): packages added: curlish" "$TMP/stale.err" || { show_output stale; fail "not the stale-apt error"; }

check "lock --check sees the stale lock, offline; lock again says what it changes, both ways"
STACKBUILD_OFFLINE=1 expect_rc 3 check_stale sb lock "$TMP/recipe/r.yaml" --check
grep -q "r.yaml.lock is not current" "$TMP/check_stale.err" && grep -q "layer 'more'.*curlish" "$TMP/check_stale.err" ||
  { show_output check_stale; fail "lock --check did not name the stale layer"; }
write_recipe libgreet
sed -i 's|suites: test, keyring: key.gpg}$|suites: test, keyring: key.gpg, priority: 100}|' "$TMP/recipe/r.yaml"
expect_ok relock sb lock "$TMP/recipe/r.yaml" --store "$STORE"
grep -q "apt more: the same versions, other files or requests" "$TMP/relock.err" ||
  { show_output relock; fail "lock did not say the layer's request changed"; }
expect_ok check_relocked sb lock "$TMP/recipe/r.yaml" --check
write_recipe libgreet
expect_ok relock_back sb lock "$TMP/recipe/r.yaml" --store "$STORE"
grep -q "changes to .*r.yaml.lock (1)" "$TMP/relock_back.err" || { show_output relock_back; fail "lock did not count one change"; }
cp "$TMP/recipe/r.yaml.lock" "$TMP/lock-before"
expect_ok relock_current sb lock "$TMP/recipe/r.yaml" --store "$STORE"
grep -q "is current .*nothing resolved again" "$TMP/relock_current.err" ||
  { show_output relock_current; fail "lock of a current lockfile did not say it left it"; }
cmp -s "$TMP/recipe/r.yaml.lock" "$TMP/lock-before" || fail "lock rewrote a current lockfile"
expect_ok relock_same sb lock "$TMP/recipe/r.yaml" --update --store "$STORE"
grep -q "the lock pins what it pinned before" "$TMP/relock_same.err" || { show_output relock_same; fail "lock --update did not say nothing changed"; }
write_recipe libgreet
sed -i 's|suites: test, keyring: key.gpg}$|suites: test, keyring: key.gpg, priority: 100}|' "$TMP/recipe/r.yaml"
expect_rc 3 stale2 sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout3" --store "$STORE"
grep -q "layer 'more' (.*): repositories removed: $url/updates test main (keyring=key.gpg); .*repositories added: $url/updates test main (keyring=key.gpg, priority=100)" \
  "$TMP/stale2.err" || { show_output stale2; fail "a repository change was not seen"; }

check "a keyring file with new contents builds the apt layers again, and the image holds the new keyring"
write_recipe libgreet
gpg --batch --passphrase '' --quick-gen-key 'Second <second@example.invalid>' ed25519 sign never 2>/dev/null ||
  fail "gpg could not make a second key"
gpg --batch --export >"$TMP/recipe/key.gpg"
expect_ok rekey sb build "$TMP/recipe/r.yaml" -o "$TMP/layout4" --store "$STORE"
if grep -q "layer base: cached" "$TMP/rekey.err"; then show_output rekey; fail "layer base came from the cache with the old keyring"; fi
expect_ok rekey_unpack sb unpack "$TMP/layout4:t" "$TMP/root4" --store "$STORE"
cmp -s "$TMP/root4/etc/apt/keyrings/key.gpg" "$TMP/recipe/key.gpg" || fail "the image does not hold the new keyring"
pass
