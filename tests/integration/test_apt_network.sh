#!/usr/bin/env bash
# Apt layers take the machine's apt network settings, as apt does (apt.conf(5)
# and apt_auth.conf(5), read under STACKBUILD_APT_ROOT), against a fixture
# repository on 127.0.0.1:
# - over HTTPS with a CA made here it fails as untrusted until
#   Acquire::https::CaInfo names the CA; a CaInfo that is not there is an
#   error naming the setting and its file and line;
# - behind a login it fails with 401 until auth.conf.d holds the login, and
#   the password is in no output and not in the lockfile; a login written
#   into the recipe's URL works too and stays out of the lockfile and image;
# - Acquire::http::Proxy sends every request through a logging forward proxy
#   (the image the same), Proxy::127.0.0.1 "DIRECT" sends none, and
#   Proxy-Auto-Detect's command, asked once a run for the host (two layers),
#   sends them through it again.
source "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=apt_lib.sh
source "$HERE/apt_lib.sh"
require_tool dpkg-deb gzip sha256sum openssl
unset APT_CONFIG http_proxy https_proxy all_proxy HTTP_PROXY ALL_PROXY no_proxy NO_PROXY

www="$TMP/www"
mkdeb repo tool 1.0 "" usr/bin/tool
mkdeb repo other 1.0 "" usr/bin/other
publish repo unsigned
make_ca "$TMP/ca"
serve_dir "$www" "$TMP/ca"
https_url=$SERVED_URL
serve_dir "$www"
http_url=$SERVED_URL

net_server login "$www" "apt:s3cret-pw"
login_url=$NET_URL
: >"$TMP/proxy.log"
net_server proxy "$TMP/proxy.log"
proxy_url=$NET_URL

mkdir -p "$TMP/recipe"
write_recipe() {  # $1: the repository's URL
  cat >"$TMP/recipe/r.yaml" <<YAML
stack: net
layers:
  - name: t
    apt: [tool]
    repositories: [{url: "$1/repo", suites: [test], trusted: true}]
tags: ["net:t"]
YAML
}
export STACKBUILD_APT_ROOT="$TMP/root"
conf="$TMP/root/etc/apt/apt.conf.d"
mkdir -p "$conf" "$TMP/root/etc/apt/auth.conf.d"
n=0
build() {  # build NAME: a fresh store each time, so every file is fetched again
  n=$((n + 1))
  sb build "$TMP/recipe/r.yaml" -o "$TMP/layout-$1" --store "$TMP/store-$n"
}

check "HTTPS with a CA made here: refused as untrusted, and the error says where apt's CA setting goes"
write_recipe "$https_url"
expect_rc 1 untrusted build untrusted
grep -q "certificate" "$TMP/untrusted.err" || { show_output untrusted; fail "not a certificate error"; }
grep -q "Acquire::https::CaInfo" "$TMP/untrusted.err" || { show_output untrusted; fail "no word of Acquire::https::CaInfo"; }
[[ ! -e $TMP/layout-untrusted/index.json ]] || fail "a refused build left an image"

check "Acquire::https::CaInfo naming the CA: the same build succeeds"
printf 'Acquire::https::CaInfo "%s";\n' "$TMP/ca/ca.pem" >"$conf/50ca"
expect_ok trusted build trusted
expect_ok unpack sb unpack "$TMP/layout-trusted:t" "$TMP/unpacked" --store "$TMP/store-$n"
[[ $(cat "$TMP/unpacked/usr/bin/tool") == "tool 1.0" ]] || fail "the package is not in the image"

check "a host's own CaInfo that is not there: an error naming the setting, its file and line"
printf '// a comment\nAcquire::https::127.0.0.1::CaInfo "%s";\n' "$TMP/nonexistent.pem" >"$conf/60host"
expect_rc 1 missing-ca build missing-ca
grep -qF "Acquire::https::127.0.0.1::CaInfo ($conf/60host:2) names $TMP/nonexistent.pem, which does not exist" \
  "$TMP/missing-ca.err" || { show_output missing-ca; fail "not the missing-CaInfo error"; }
rm "$conf/60host"

check "a syntax error in apt.conf.d is refused as apt refuses it, naming the file and line"
printf 'Acquire::http::Timeout "10"\n' >"$conf/70broken"
expect_rc 1 broken build broken
grep -qF "apt configuration $conf/70broken:2: extra junk at end of file" "$TMP/broken.err" ||
  { show_output broken; fail "not the syntax error"; }
rm "$conf/70broken"

check "behind a login: 401 without auth.conf; with auth.conf.d's login it builds, the password nowhere"
write_recipe "$login_url"
expect_rc 1 no-login build no-login
grep -q "HTTP 401 (a login goes in /etc/apt/auth.conf.d/\*.conf" "$TMP/no-login.err" ||
  { show_output no-login; fail "not a 401 saying where the login goes"; }
printf 'machine http://127.0.0.1:%s/repo\nlogin apt\npassword s3cret-pw\n' "${login_url##*:}" \
  >"$TMP/root/etc/apt/auth.conf.d/fixture.conf"
chmod 600 "$TMP/root/etc/apt/auth.conf.d/fixture.conf"
expect_ok login build login
expect_ok lock sb lock "$TMP/recipe/r.yaml" --store "$TMP/store-$n"
expect_ok locked sb build "$TMP/recipe/r.yaml" --locked -o "$TMP/layout-locked" --store "$TMP/store-login-locked"
[[ $(manifest_digest "$TMP/layout-login" t) == $(manifest_digest "$TMP/layout-locked" t) ]] ||
  fail "the locked build behind the login differs"
if grep -rl "s3cret-pw" "$TMP"/*.out "$TMP"/*.err "$TMP/recipe" "$TMP/layout-login"; then
  fail "the password is in the output, the lockfile or the image (files above)"
fi

check "a login written into the repository URL: it builds, and neither the lockfile nor the image holds it"
rm "$TMP/root/etc/apt/auth.conf.d/fixture.conf"
mkdir -p "$TMP/url-recipe"
sed "s|url: \"http://|url: \"http://apt:s3cret-pw@|" "$TMP/recipe/r.yaml" >"$TMP/url-recipe/r.yaml"
grep -q "apt:s3cret-pw@127.0.0.1" "$TMP/url-recipe/r.yaml" || fail "the recipe has no login in its URL"
expect_ok url-login sb build "$TMP/url-recipe/r.yaml" -o "$TMP/layout-url" --store "$TMP/store-url"
[[ $(manifest_digest "$TMP/layout-login" t) == $(manifest_digest "$TMP/layout-url" t) ]] ||
  fail "the image differs from the one built with auth.conf's login"
expect_ok url-lock sb lock "$TMP/url-recipe/r.yaml" --store "$TMP/store-url"
expect_ok url-locked sb build "$TMP/url-recipe/r.yaml" --locked -o "$TMP/layout-url-locked" --store "$TMP/store-url2"
expect_ok url-unpack sb unpack "$TMP/layout-url:t" "$TMP/url-unpacked" --store "$TMP/store-url"
grep -q "URIs: $login_url/repo" "$TMP/url-unpacked/etc/apt/sources.list.d/stackbuild.sources" ||
  fail "the image's sources list does not name the repository without its login"
if grep -rl "s3cret-pw" "$TMP"/url-*.out "$TMP"/url-*.err "$TMP/url-recipe/r.yaml.lock" "$TMP/url-unpacked" \
  "$TMP/layout-url"; then
  fail "the URL's password is in the output, the lockfile or the image (files above)"
fi

check "Acquire::http::Proxy: every request goes through the proxy, and the image is the same"
write_recipe "$http_url"
expect_ok direct build direct
[[ ! -s $TMP/proxy.log ]] || fail "requests reached the proxy before it was configured: $(cat "$TMP/proxy.log")"
printf 'Acquire::http { Proxy "%s"; };\n' "$proxy_url" >"$conf/80proxy"
expect_ok proxied build proxied
grep -qF "$http_url/repo/dists/test/Release" "$TMP/proxy.log" || fail "the Release did not go through the proxy: $(cat "$TMP/proxy.log")"
grep -qF "$http_url/repo/pool/tool_1.0_amd64.deb" "$TMP/proxy.log" || fail "the package did not go through the proxy"
[[ $(manifest_digest "$TMP/layout-direct" t) == $(manifest_digest "$TMP/layout-proxied" t) ]] ||
  fail "the image built through the proxy differs"

check "Acquire::http::Proxy::127.0.0.1 \"DIRECT\": no request goes through the proxy"
: >"$TMP/proxy.log"
printf 'Acquire::http::Proxy::127.0.0.1 "DIRECT";\n' >>"$conf/80proxy"
expect_ok bypass build bypass
[[ ! -s $TMP/proxy.log ]] || fail "requests went through the proxy despite DIRECT: $(cat "$TMP/proxy.log")"

check "Acquire::http::Proxy-Auto-Detect: the proxy the command prints is used, asked once a run for the host"
: >"$TMP/proxy.log"
cat >"$TMP/detect" <<SH
#!/bin/sh
echo "\$1" >>"$TMP/detect.calls"
echo "$proxy_url"
SH
chmod +x "$TMP/detect"
printf 'Acquire::http::Proxy-Auto-Detect "%s";\n' "$TMP/detect" >"$conf/80proxy"
cat >"$TMP/recipe/two.yaml" <<YAML
stack: net
repositories: [{url: "$http_url/repo", suites: [test], trusted: true}]
layers:
  - {name: t, apt: [tool]}
  - {name: u, apt: [other]}
tags: ["net:t"]
YAML
expect_ok detected sb build "$TMP/recipe/two.yaml" -o "$TMP/layout-detected" --store "$TMP/store-detected"
for deb in tool other; do
  grep -qF "$http_url/repo/pool/${deb}_1.0_amd64.deb" "$TMP/proxy.log" ||
    fail "$deb did not go through the detected proxy: $(cat "$TMP/proxy.log")"
done
[[ $(cat "$TMP/detect.calls") == "$http_url" ]] ||
  fail "the command was not asked exactly once for two layers: $(cat "$TMP/detect.calls")"
pass
