#!/usr/bin/env bash
# What stackbuild writes is read by tools nobody here wrote: the OCI JSON schemas,
# skopeo and umoci. Builds examples/hello.yaml and a richer recipe of our own (nested
# dirs, executables, symlinks, a hardlink pair, an empty file and dir, a 0600 file via
# `mode:`, names with spaces and unicode, a path over 100 bytes), then:
#   - validates the OCI layout (oci-layout, index.json, manifests, configs) against the
#     schemas and every blob against its descriptor (validate_oci.py);
#   - checks the layers are canonical tars (check_layers.py);
#   - skopeo inspects and copies the layout (to docker-archive), and reads and copies
#     stackbuild's own docker-archive (to an OCI layout); the diff_ids agree throughout;
#   - umoci unpacks the images, and the rootfs equals the tree the recipe describes
#     (types, modes, sizes, content, symlink targets, hardlinks, clamped mtimes).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
require_tool skopeo umoci sha256sum zstd
require_python_module jsonschema
require_schemas
cd "$TMP"

EPOCH=1704067200   # examples/hello.yaml's source_date_epoch, used by our recipe too
validate() { expect_ok "validate-$(basename "$1")" python3 "$HERE/validate_oci.py" "$SCHEMAS" "$1"; cat "$TMP/validate-$(basename "$1").out"; }

# archive_diff_ids TAR: the sha256 of each (decompressed) layer of the docker-archive's
# only image, in order, as "sha256:..." lines.
archive_diff_ids() {
  python3 - "$1" <<'PY'
import gzip, hashlib, json, posixpath, subprocess, sys, tarfile
with tarfile.open(sys.argv[1]) as tf:
    items = json.load(tf.extractfile("manifest.json"))
    if len(items) != 1:
        sys.exit(f"{sys.argv[1]}: manifest.json has {len(items)} items, expected 1")
    for path in items[0]["Layers"]:
        m = tf.getmember(path)
        while m.issym():
            m = tf.getmember(posixpath.normpath(posixpath.join(posixpath.dirname(m.name), m.linkname)))
        data = tf.extractfile(m).read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        elif data[:4] == b"\x28\xb5\x2f\xfd":
            data = subprocess.run(["zstd", "-dc"], input=data, stdout=subprocess.PIPE, check=True).stdout
        print("sha256:" + hashlib.sha256(data).hexdigest())
PY
}
# layout_diff_ids LAYOUT REF: the sha256 of each decompressed layer blob of image REF.
layout_diff_ids() {
  local m l
  m=$(manifest_digest "$1" "$2")
  for l in $(json "$1/blobs/sha256/$m" '" ".join(x["digest"][7:] for x in j["layers"])'); do
    case "$(head -c4 "$1/blobs/sha256/$l" | od -An -tx1 | tr -d ' ')" in
      1f8b*) echo "sha256:$(gzip -dc <"$1/blobs/sha256/$l" | sha256sum | cut -d' ' -f1)" ;;
      28b52ffd) echo "sha256:$(zstd -dc <"$1/blobs/sha256/$l" | sha256sum | cut -d' ' -f1)" ;;
      *) echo "sha256:$(sha256sum <"$1/blobs/sha256/$l" | cut -d' ' -f1)" ;;
    esac
  done
}
# config_diff_ids LAYOUT REF: the rootfs.diff_ids of image REF's config, one a line.
config_diff_ids() {
  local m c
  m=$(manifest_digest "$1" "$2")
  c=$(json "$1/blobs/sha256/$m" 'j["config"]["digest"][7:]')
  json "$1/blobs/sha256/$c" '"\n".join(j["rootfs"]["diff_ids"])'
}
same_lines() {  # same_lines WHAT A B: A and B (multi-line strings) are equal
  [[ "$2" == "$3" && -n "$2" ]] || fail "$1 differ:"$'\n'"--- expected:"$'\n'"$2"$'\n'"--- got:"$'\n'"$3"
}

# --- examples/hello.yaml -----------------------------------------------------------------
check "build examples/hello.yaml into an OCI layout"
expect_ok build-hello sb build "$SB_SOURCE_DIR/examples/hello.yaml" -o "$TMP/hello" --store "$STORE"
[[ -f hello/index.json && -f hello/oci-layout ]] || fail "no OCI layout at $TMP/hello"

check "index.json names the image 1.0 and latest (the tags' part after ':'), one manifest"
m10=$(manifest_digest hello 1.0) || fail "no image 1.0 in index.json"
mlatest=$(manifest_digest hello latest) || fail "no image latest in index.json"
[[ "$m10" == "$mlatest" ]] || fail "1.0 ($m10) and latest ($mlatest) are different manifests"
OURS=$(config_diff_ids hello 1.0)
[[ $(wc -l <<<"$OURS") -eq 2 ]] || fail "expected 2 diff_ids (layers app, config), got: $OURS"

check "the layout validates against the OCI schemas; every blob matches its descriptor"
validate hello

check "the validator can fail: a manifest with a bad digest and a short blob is rejected"
cp -a hello broken
python3 - broken "$m10" <<'PY'
import hashlib, json, sys
layout, m = sys.argv[1], sys.argv[2]
doc = json.load(open(f"{layout}/blobs/sha256/{m}"))
doc["layers"][0]["digest"] = "not a digest"            # fails the schema's digest pattern ($ref)
doc["config"]["size"] += 1                             # fails the blob check
b = json.dumps(doc).encode()
d = hashlib.sha256(b).hexdigest()
open(f"{layout}/blobs/sha256/{d}", "wb").write(b)
idx = json.load(open(f"{layout}/index.json"))
for x in idx["manifests"]:
    x["digest"], x["size"] = "sha256:" + d, len(b)
json.dump(idx, open(f"{layout}/index.json", "w"))
PY
run_capture validate-broken python3 "$HERE/validate_oci.py" "$SCHEMAS" broken
[[ $RC -ne 0 ]] || fail "validate_oci.py accepted a broken layout"
grep -q "does not match" "$TMP/validate-broken.err" || { show_output validate-broken; fail "the schema's digest pattern (reached through \$ref) was not checked"; }
grep -q "bytes, the descriptor says" "$TMP/validate-broken.err" || { show_output validate-broken; fail "a blob size mismatch was not reported"; }

check "the layers are canonical tars (owners 0:0, mtimes <= $EPOCH, byte order, gzip header)"
expect_ok layers-hello python3 "$HERE/check_layers.py" hello 1.0 "$EPOCH"

check "skopeo inspect oci:hello:1.0 shows the recipe's Env, Labels, architecture and our layers"
expect_ok inspect-hello skopeo inspect oci:hello:1.0
expect_ok inspect-hello-config skopeo inspect --config oci:hello:1.0
python3 - "$TMP/inspect-hello.out" "$TMP/inspect-hello-config.out" "hello/blobs/sha256/$m10" <<'PY' || fail "skopeo inspect shows something else than the recipe"
import json, sys
i, c, m = (json.load(open(p)) for p in sys.argv[1:4])
want_env = ["PATH=/usr/local/bin:/usr/bin:/bin", "HELLO_GREETING=hello"]
errs = []
if i.get("Env") != want_env: errs.append(f"Env {i.get('Env')} != {want_env}")
if i.get("Labels") != {"org.example.purpose": "documentation"}: errs.append(f"Labels {i.get('Labels')}")
if i.get("Architecture") != "amd64" or i.get("Os") != "linux": errs.append(f"platform {i.get('Os')}/{i.get('Architecture')}")
if i.get("Created") != "2024-01-01T00:00:00Z": errs.append(f"Created {i.get('Created')}")
if i.get("Layers") != [l["digest"] for l in m["layers"]]: errs.append(f"Layers {i.get('Layers')}")
cc = c.get("config", {})
if cc.get("Entrypoint") != ["/usr/local/bin/hello"]: errs.append(f"Entrypoint {cc.get('Entrypoint')}")
if cc.get("WorkingDir") != "/": errs.append(f"WorkingDir {cc.get('WorkingDir')}")
anno = m.get("annotations", {})
for k, v in {"title": "hello", "version": "1.0", "description": "an example image built from local files"}.items():
    if anno.get("org.opencontainers.image." + k) != v: errs.append(f"annotation {k}: {anno.get('org.opencontainers.image.' + k)!r}")
for e in errs: print("  " + e, file=sys.stderr)
sys.exit(1 if errs else 0)
PY

check "skopeo copy oci:hello:1.0 docker-archive:X.tar:hello:1.0 succeeds and keeps our diff_ids"
expect_ok copy-to-archive skopeo copy oci:hello:1.0 docker-archive:"$TMP/X.tar":hello:1.0
same_lines "diff_ids of skopeo's docker-archive vs our config" "$OURS" "$(archive_diff_ids X.tar)"

check "stackbuild build --format docker-archive: skopeo inspect docker-archive:Y.tar"
expect_ok build-archive sb build "$SB_SOURCE_DIR/examples/hello.yaml" --format docker-archive -o "$TMP/Y.tar" --store "$STORE"
[[ -f Y.tar ]] || fail "no docker-archive at $TMP/Y.tar"
expect_ok inspect-archive skopeo inspect docker-archive:Y.tar
same_lines "layers skopeo reports for Y.tar vs our diff_ids" "$OURS" "$(json "$TMP/inspect-archive.out" '"\n".join(j["Layers"])')"
expect_ok inspect-archive-config skopeo inspect --config docker-archive:Y.tar
same_lines "diff_ids in Y.tar's config vs the OCI build's" "$OURS" "$(json "$TMP/inspect-archive-config.out" '"\n".join(j["rootfs"]["diff_ids"])')"

check "skopeo copy docker-archive:Y.tar oci:Z:copy succeeds; Z's layers have our diff_ids"
expect_ok copy-from-archive skopeo copy docker-archive:"$TMP/Y.tar" oci:"$TMP/Z":copy
same_lines "diff_ids in Z's config" "$OURS" "$(config_diff_ids Z copy)"
same_lines "sha256 of Z's decompressed layers" "$OURS" "$(layout_diff_ids Z copy)"

check "umoci unpack of hello:1.0 gives the tree examples/hello.yaml describes"
expect_ok umoci-hello umoci unpack --rootless --image hello:1.0 "$TMP/hello-bundle"
src="$SB_SOURCE_DIR/examples/hello"
mkdir -p exp-hello/etc exp-hello/usr/share
expected_copy "$src/bin" exp-hello/usr/local/bin               # {src: hello/bin/, dst: /usr/local/bin/}
expected_copy "$src/share" exp-hello/usr/share/hello           # {src: hello/share, dst: /usr/share/hello}
cp -a "$src/etc/hello.conf" exp-hello/etc/hello.conf && chmod 0640 exp-hello/etc/hello.conf   # mode: "0640"
find exp-hello -type d -exec chmod 0755 {} +
expect_ok cmp-hello python3 "$HERE/treecmp.py" exp-hello hello-bundle/rootfs --clamp "$EPOCH"
cat "$TMP/cmp-hello.out"

# --- a richer recipe of our own --------------------------------------------------------------
check "build a recipe of a rich tree (umask 027, mtimes before and after the epoch)"
(umask 027 && make_tree rich/tree)
printf 'not really secret\n' >rich/secret.key && chmod 0644 rich/secret.key
find rich -exec touch -h -d '2025-06-01 12:00:00 UTC' {} +
touch -d '2020-02-02 00:00:00 UTC' rich/tree/README        # older than the epoch: kept as is
cat >rich/rich.yaml <<YAML
stack: rich
source_date_epoch: $EPOCH
layers:
  - name: tree
    copy:
      - {src: tree/, dst: /opt/app/}
  - name: secret
    comment: one file with an explicit mode
    copy:
      - {src: secret.key, dst: /etc/app/secret.key, mode: "0600"}
config:
  env: {PATH: "/usr/bin:/bin", RICH: "yes"}
  labels: {org.example.test: rich}
tags: ["rich:1.0"]
YAML
expect_ok build-rich sb build rich/rich.yaml -o "$TMP/rich-oci" --store "$STORE"
validate rich-oci
expect_ok layers-rich python3 "$HERE/check_layers.py" rich-oci 1.0 "$EPOCH"
cat "$TMP/layers-rich.out"

check "umoci unpack of rich:1.0 gives the tree the recipe describes"
expect_ok umoci-rich umoci unpack --rootless --image rich-oci:1.0 "$TMP/rich-bundle"
mkdir -p exp-rich/opt exp-rich/etc/app
expected_copy rich/tree exp-rich/opt/app
cp -a rich/secret.key exp-rich/etc/app/secret.key && chmod 0600 exp-rich/etc/app/secret.key
find exp-rich -type d -exec chmod 0755 {} +
expect_ok cmp-rich python3 "$HERE/treecmp.py" exp-rich rich-bundle/rootfs --clamp "$EPOCH"
cat "$TMP/cmp-rich.out"
# treecmp compares the whole tree; these are the cases this recipe is here for.
[[ "$(stat -c %a rich-bundle/rootfs/etc/app/secret.key)" == 600 ]] || fail "secret.key is not 0600"
[[ "$(stat -c %a rich-bundle/rootfs/opt/app/bin/tool)" == 755 ]] || fail "bin/tool (0750 on the host) is not 0755"
[[ "$(stat -c %i rich-bundle/rootfs/opt/app/share/data/a.bin)" == "$(stat -c %i rich-bundle/rootfs/opt/app/share/data/a-link.bin)" ]] ||
  fail "the hardlinked pair was unpacked as two files"
[[ "$(readlink rich-bundle/rootfs/opt/app/lib/libfoo.so)" == libfoo.so.1 ]] || fail "lib/libfoo.so is not a symlink to libfoo.so.1"
ls rich-bundle/rootfs/opt/app/long/*/*/*/a-file-with-a-long-name-too.txt >/dev/null || fail "the long path is missing"

check "a zstd build of the rich recipe validates and skopeo reads it with the same diff_ids"
expect_ok build-rich-zstd sb build rich/rich.yaml -o "$TMP/rich-zstd" --compression zstd --store "$STORE"
validate rich-zstd
[[ "$(json "rich-zstd/blobs/sha256/$(manifest_digest rich-zstd 1.0)" 'j["layers"][0]["mediaType"]')" == application/vnd.oci.image.layer.v1.tar+zstd ]] ||
  fail "the zstd build's layer mediaType is not tar+zstd"
RICH=$(config_diff_ids rich-oci 1.0)
same_lines "diff_ids of the zstd build vs the gzip build" "$RICH" "$(config_diff_ids rich-zstd 1.0)"
# docker-archive cannot hold zstd: have skopeo decompress our zstd and recompress as gzip.
expect_ok copy-zstd skopeo copy --dest-compress --dest-compress-format gzip oci:rich-zstd:1.0 oci:"$TMP/rz-copy":rich
same_lines "sha256 of skopeo's recompressed layers of the zstd build" "$RICH" "$(layout_diff_ids rz-copy rich)"

pass
