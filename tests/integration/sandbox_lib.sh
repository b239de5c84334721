# Shared by tests/integration/test_sandbox*.sh (sourced after lib.sh): what the
# build sandbox needs, and a base root filesystem made of the host's static busybox.

# require_sandbox: skips (77, saying why) unless this runs as root on a kernel that
# gives us mount/PID/IPC/UTS/network namespaces and overlayfs, with a static busybox.
require_sandbox() {
  [[ $(id -u) -eq 0 ]] || skip "the sandbox tests run as root (this is uid $(id -u))"
  [[ -x /bin/busybox ]] || skip "/bin/busybox is missing (apt-get install busybox-static)"
  file_out=$(LC_ALL=C od -An -c -N4 /bin/busybox | tr -d ' ')
  [[ $file_out == *ELF* ]] || skip "/bin/busybox is not an ELF binary"
  if ldd /bin/busybox >/dev/null 2>&1; then skip "/bin/busybox is dynamically linked (want busybox-static)"; fi
  local why
  why=$(unshare --mount --pid --ipc --uts --net --fork true 2>&1) ||
    skip "the kernel refuses new namespaces: $why"
  mkdir -p "$TMP/ovl/l" "$TMP/ovl/u" "$TMP/ovl/w" "$TMP/ovl/m"
  why=$(unshare --mount sh -c "mount -t overlay overlay -o lowerdir=$TMP/ovl/l,upperdir=$TMP/ovl/u,workdir=$TMP/ovl/w $TMP/ovl/m" 2>&1) ||
    skip "the kernel refuses overlayfs: $why"
  rm -rf "$TMP/ovl"
}

# make_busybox_root DIR: DIR/bin/busybox and a symlink per applet, /etc/passwd, /root.
make_busybox_root() {
  local d=$1 a
  mkdir -p "$d/bin" "$d/etc" "$d/root" "$d/usr/bin" "$d/sbin"
  cp /bin/busybox "$d/bin/busybox"
  for a in $(/bin/busybox --list); do
    [[ $a == busybox ]] || ln -sf busybox "$d/bin/$a"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$d/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
}

# no_process_matching WORD: fails if a process whose command line holds WORD is alive,
# saying its state and its parent's command line (for a failure seen once in CI).
no_process_matching() {
  local p c stat state ppid parent
  for p in /proc/[0-9]*; do
    c=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    [[ $c == *"$1"* ]] || continue
    stat=$(cat "$p/stat" 2>/dev/null) || continue  # gone meanwhile
    read -r state ppid _ <<<"${stat##*) }"
    parent=$(tr '\0' ' ' <"/proc/$ppid/cmdline" 2>/dev/null || true)
    fail "a process survived: pid ${p#/proc/} (state $state, parent $ppid: $parent): $c"
  done
  return 0
}
