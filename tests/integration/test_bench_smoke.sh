#!/usr/bin/env bash
# Every benchmark's smoke mode: each bench/*.sh runs with --smoke (bench/lib.sh: its own
# code path on a tiny input, one round, 127.0.0.1 servers only, no bar enforced), one
# after the other, its output printed. A bench passes when it exits 0 and printed its
# table or ratio line and the closing --smoke note; no timing is judged. The test fails
# naming every bench that failed; with none failed it is skipped (77) when a bench was
# skipped for a missing tool or root, so that a bench that did not run never reads as
# passed; else it passes. A bench/*.sh without a --smoke mode fails it: run without one,
# a full benchmark would start (the network, gigabytes, minutes).
#
# One test for all, not one per bench: the benches share one contract, the list is
# read from bench/ so a new bench is held to it without a test file of its own, and
# one after the other they take well under 3 minutes on 2 cores.
source "$(dirname "$0")/lib.sh"
require_tool timeout

# What each bench's table prints (an extended regex); a bench not named here is held
# to the closing note alone.
declare -A table=(
  [bench_arm64]='^bench_arm64: ratio arm64 / amd64 build time +[0-9.]+'
  [bench_apt]='^minimal layer: stackbuild [0-9.]+ s, mmdebstrap --variant=[a-z]+ [0-9.]+ s, ratio'
  [bench_cluster]='^bench_cluster: [0-9]+ points, [0-9]+ slots: one build [0-9.]+ s, fan-out [0-9.]+ s, ratio fan-out/one build [0-9.]+'
  [bench_cores]='^bench_cores: unpack of the [0-9]+-layer image: [0-9.]+ s, [0-9]+ MB/s'
  [bench_buildah]='^  warm \(no change\), stackbuild with --locked +[0-9.]+s +[0-9.]+s'
  [bench_partial_pull]='^bench_partial_pull: (zstd:chunked|estargz) +pull B after A: +[0-9]+ bytes served'
  [bench_layer]='^stackbuild zstd:chunked / zstd throughput +[0-9.]+'
  [bench_pip]='^ratio pip/stackbuild: [0-9.]+x'
  [bench_pull]='^bench_pull: ratio skopeo / stackbuild +[0-9.]+'
  [bench_push]='^bench_push: ratio skopeo / stackbuild +[0-9.]+'
  [bench_push_faults]='^bench_push_faults: completed pushes through the proxy .*: skopeo [01]/1, stackbuild [01]/1$'
  [bench_rebuild]='^  no-change rebuild: best [0-9.]+ s, median [0-9.]+ s'
  [bench_unpack]='^bench_unpack: ratio umoci raw unpack / stackbuild +[0-9.]+'
)
# The settings the full runs read: none may reach a smoke run from the environment.
# No proxy either: every request goes to 127.0.0.1.
clean_env=(-u WORK -u ROUNDS -u N -u JOBS_LIST -u OUT_DIR -u SRC -u SIZE_MB -u SLOTS -u STRICT -u STORE -u KEEP -u JOBS -u STORAGE_DRIVER
  -u COMPRESSION -u CHANGE -u MOUNT_PROGRAM -u SKIP_UMOCI -u SKIP_GZIP6 -u SKIP_UMOCI_BUNDLE -u STACKBUILD_APT_SOURCES
  -u http_proxy -u https_proxy -u all_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY)

passed=() skipped=() failed=()
for script in "$SB_SOURCE_DIR"/bench/*.sh; do
  name=$(basename "$script" .sh)
  [[ $name == lib ]] && continue
  check "$name --smoke"
  if ! grep -q -- '--smoke' "$script"; then
    say "$name has no --smoke mode"
    failed+=("$name (no --smoke)")
    continue
  fi
  t0=$(date +%s.%N)
  rc=0
  # 180 s: each takes seconds; a hang must not eat the test's whole timeout.
  (cd "$SB_SOURCE_DIR" && timeout 180 env "${clean_env[@]}" SB="$SB" bash "$script" --smoke) \
    >"$TMP/$name.log" 2>&1 </dev/null || rc=$?
  secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  sed "s/^/  [$name] /" "$TMP/$name.log"
  if [[ $rc == 77 ]]; then
    say "$name: skipped after $secs s: $(grep -m1 'SKIP:' "$TMP/$name.log" || echo 'exit 77')"
    skipped+=("$name")
  elif [[ $rc != 0 ]]; then
    say "$name: exited $rc after $secs s$( ((rc == 124)) && echo ' (timed out)')"
    failed+=("$name (exit $rc)")
  elif [[ -n ${table[$name]:-} ]] && ! grep -Eq "${table[$name]}" "$TMP/$name.log"; then
    say "$name: exit 0 after $secs s, but its table line is missing: /${table[$name]}/"
    failed+=("$name (no table)")
  elif ! grep -q "^$name: --smoke: " "$TMP/$name.log"; then
    say "$name: exit 0 after $secs s, but no closing '$name: --smoke: ...' note"
    failed+=("$name (no --smoke note)")
  else
    say "$name: ok in $secs s"
    passed+=("$name")
  fi
done

say "ran: ${passed[*]:-none}; skipped: ${skipped[*]:-none}"
((${#failed[@]} == 0)) || fail "bench smoke runs failed: ${failed[*]} (their output is above)"
((${#skipped[@]} == 0)) || skip "not every bench ran: ${skipped[*]} (see each one's SKIP line above)"
((${#passed[@]} > 0)) || fail "no bench/*.sh found under $SB_SOURCE_DIR/bench"
pass
