# shellcheck shell=bash
# What test_sign.sh and test_sign_skopeo.sh start from (sourced after
# lib.sh): a one-layer image built and pushed to a fresh registry on
# 127.0.0.1 as $REG/team/app:1 ($TMP/out is its layout), and two OpenSSL
# P-256 key pairs, $TMP/key.{pem,pub} and $TMP/other.{pem,pub}.
source "$HERE/registry/lib.sh"
require_registry
require_tool skopeo openssl

R="$TMP/recipe"
mkdir -p "$R"
echo one >"$R/a.txt"
cat >"$R/r.yaml" <<'YAML'
stack: signed
source_date_epoch: 1700000000
layers:
  - {name: files, copy: [{src: a.txt, dst: /a.txt}]}
tags: ["app:1"]
YAML
start_registry plain
REG="127.0.0.1:$REG_PORT"
expect_ok build sb build "$R/r.yaml" -o "$TMP/out" --store "$STORE"
expect_ok push sb push "$TMP/out:1" "$REG/team/app:1" --store "$STORE" --insecure-registry "$REG"

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/key.pem" 2>/dev/null
openssl pkey -in "$TMP/key.pem" -pubout -out "$TMP/key.pub"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$TMP/other.pem" 2>/dev/null
openssl pkey -in "$TMP/other.pem" -pubout -out "$TMP/other.pub"
