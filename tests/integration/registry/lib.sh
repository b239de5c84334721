# Registry fixtures for tests/integration/test_registry*.sh (sourced after ../lib.sh):
# the real registry from Debian's docker-registry package (distribution 2.8) on
# 127.0.0.1, a token server and a fault-injecting proxy, all stopped on exit.
REG_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REG_PIDS=()
stop_fixtures() {
  local p
  for p in "${REG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${REG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap 'rc=$?; stop_fixtures; cleanup; exit $rc' EXIT

require_registry() {
  require_tool docker-registry openssl curl
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port_file FILE: waits for a fixture to write its port.
wait_port_file() {
  local i
  for i in $(seq 100); do [[ -s "$1" ]] && { cat "$1"; return 0; }; sleep 0.1; done
  fail "no port in $1"
}

# make_ca DIR is in ../lib.sh.

# start_registry NAME [tls|mtls] [htpasswd USER PASS] [token REALM CERT]: starts a registry;
# sets REG_PORT and REG_DIR (its data and config under $TMP/NAME).
start_registry() {
  local name=$1
  shift
  REG_DIR="$TMP/$name"
  mkdir -p "$REG_DIR/data"
  REG_PORT=$(free_port)
  local tls="" auth="" scheme=http
  while [[ $# -gt 0 ]]; do
    case $1 in
      tls)
        make_ca "$REG_DIR/ca"
        tls="  tls: {certificate: $REG_DIR/ca/server.pem, key: $REG_DIR/ca/server.key}"
        scheme=https
        shift ;;
      mtls)  # TLS that also wants a client certificate signed by the same CA (make_client_cert)
        make_ca "$REG_DIR/ca"
        tls="  tls: {certificate: $REG_DIR/ca/server.pem, key: $REG_DIR/ca/server.key, clientcas: [$REG_DIR/ca/ca.pem]}"
        scheme=https
        shift ;;
      htpasswd)
        htpasswd -Bbn "$2" "$3" >"$REG_DIR/htpasswd" 2>/dev/null ||
          python3 -c 'import bcrypt,sys; print(sys.argv[1]+":"+bcrypt.hashpw(sys.argv[2].encode(),bcrypt.gensalt()).decode())' \
            "$2" "$3" >"$REG_DIR/htpasswd" || skip "neither htpasswd (apache2-utils) nor python3-bcrypt"
        auth="auth: {htpasswd: {realm: stackbuild-test, path: $REG_DIR/htpasswd}}"
        shift 3 ;;
      token)
        auth="auth: {token: {realm: \"$2\", service: stackbuild-test-registry, issuer: stackbuild-test-issuer, rootcertbundle: $3}}"
        shift 3 ;;
      *) fail "start_registry: unknown setup $1" ;;
    esac
  done
  cat >"$REG_DIR/config.yml" <<YAML
version: 0.1
log: {level: info}
storage:
  filesystem: {rootdirectory: $REG_DIR/data}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:$REG_PORT
  secret: stackbuild-test-secret
$tls
$auth
YAML
  docker-registry serve "$REG_DIR/config.yml" >"$REG_DIR/log" 2>&1 &
  REG_PIDS+=($!)
  local i
  for i in $(seq 100); do
    if curl -sk -o /dev/null "$scheme://127.0.0.1:$REG_PORT/v2/"; then return 0; fi
    # A registry that wants a client certificate refuses curl's handshake once it listens.
    if [[ -n $tls && $tls == *clientcas* ]] && grep -q "listening on" "$REG_DIR/log" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  cat "$REG_DIR/log" >&2
  fail "the registry did not start"
}

# make_client_cert CA_DIR OUT_DIR: a TLS client certificate (OUT_DIR/client.cert,
# OUT_DIR/client.key) signed by make_ca's CA in CA_DIR.
make_client_cert() {
  local ca=$1 out=$2
  mkdir -p "$out"
  openssl req -newkey rsa:2048 -nodes -keyout "$out/client.key" -out "$out/client.csr" \
    -subj /CN=stackbuild-test-client >/dev/null 2>&1 || fail "openssl: client CSR"
  printf 'extendedKeyUsage=clientAuth\n' >"$out/client.cnf"
  openssl x509 -req -in "$out/client.csr" -CA "$ca/ca.pem" -CAkey "$ca/ca.key" -CAcreateserial \
    -out "$out/client.cert" -days 2 -extfile "$out/client.cnf" >/dev/null 2>&1 || fail "openssl: client certificate"
  rm -f "$out/client.csr" "$out/client.cnf"
}

# start_token_server USER PASS TTL [token_server.py options]: sets TOKEN_PORT, TOKEN_CERT, TOKEN_LOG.
TOKEN_SERVERS=0
start_token_server() {
  require_python_module cryptography
  local d="$TMP/token.$((++TOKEN_SERVERS))"  # one directory each: its port file, key and log
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/key.pem" -out "$d/cert.pem" -days 2 \
    -subj /CN=stackbuild-test-token >/dev/null 2>&1 || fail "openssl: token key"
  TOKEN_CERT="$d/cert.pem"
  TOKEN_LOG="$d/log.jsonl"
  python3 "$REG_HERE/token_server.py" --port-file "$d/port" --key "$d/key.pem" --cert "$d/cert.pem" \
    --user "$1" --password "$2" --ttl "$3" --log "$TOKEN_LOG" "${@:4}" 2>"$d/stderr" &
  REG_PIDS+=($!)
  TOKEN_PORT=$(wait_port_file "$d/port")
}

# start_proxy UPSTREAM_PORT LOG [faultproxy options]: sets PROXY_PORT.
start_proxy() {
  local up=$1 log=$2
  shift 2
  local pf="$TMP/proxy.$RANDOM.port"
  python3 "$REG_HERE/faultproxy.py" --upstream "127.0.0.1:$up" --port-file "$pf" --log "$log" "$@" \
    2>"$log.stderr" &
  REG_PIDS+=($!)
  PROXY_PORT=$(wait_port_file "$pf")
}

# blob_bytes LOG: bytes of blob data the proxy forwarded to the registry (PATCH/PUT to uploads).
blob_bytes() {
  python3 - "$1" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "/blobs/uploads/" in r["path"] and r["method"] in ("PATCH", "PUT", "POST"):
        n += r.get("forwarded", 0)
print(n)
PY
}

# image_fixture DIR SIZE_MB: an OCI layout DIR/layout with ref "1" of a copy recipe:
# one layer of SIZE_MB of random bytes (incompressible) and one small layer.
image_fixture() {
  local d=$1 mb=$2
  mkdir -p "$d/src/big" "$d/src/small"
  python3 -c 'import os,sys,random; r=random.Random(7); open(sys.argv[1],"wb").write(r.randbytes(int(sys.argv[2])<<20))' \
    "$d/src/big/data.bin" "$mb"
  echo hello >"$d/src/small/hello.txt"
  cat >"$d/src/recipe.yaml" <<YAML
stack: regtest
layers:
  - {name: big, copy: [{src: big/, dst: /big/}]}
  - {name: small, copy: [{src: small/, dst: /small/}]}
tags: ["regtest:1"]
YAML
  "$SB" build "$d/src/recipe.yaml" -o "$d/layout" --store "$STORE" --progress plain --compression gzip --level 1 \
    >"$d/build.log" 2>&1 || { cat "$d/build.log" >&2; fail "building the fixture image"; }
}
