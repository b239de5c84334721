# Shared by the apt tests (sourced after lib.sh): fixture repositories under
# $www, made with dpkg-deb and (for signed ones) the gpg key in $GNUPGHOME.

# mkdeb REPO NAME VERSION DEPENDS FILE...: a package whose files hold "NAME VERSION",
# for Architecture $DEB_ARCH (default amd64).
mkdeb() {
  local repo=$1 name=$2 ver=$3 deps=$4 f arch=${DEB_ARCH:-amd64}
  shift 4
  local d="$TMP/src/$repo-$name-$ver"
  mkdir -p "$d/DEBIAN" "$www/$repo/pool"
  {
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: T <t@example.invalid>\n' "$name" "$ver" "$arch"
    [[ -n $deps ]] && printf 'Depends: %s\n' "$deps"
    printf 'Description: fixture package\n'
  } >"$d/DEBIAN/control"
  for f in "$@"; do
    mkdir -p "$d/$(dirname "$f")"
    echo "$name $ver" >"$d/$f"
  done
  dpkg-deb --root-owner-group -Zgzip --build "$d" "$www/$repo/pool/${name}_${ver}_${arch}.deb" >/dev/null ||
    fail "dpkg-deb failed for $name $ver"
}

# publish REPO inrelease|detached|unsigned: Packages(.gz) for amd64 (and arm64 when
# the pool has arm64 packages), Release and its signature.
publish() {
  local repo=$1 mode=$2 deb f a
  local dist="$www/$repo/dists/test" archs=amd64
  compgen -G "$www/$repo/pool/*_arm64.deb" >/dev/null && archs="amd64 arm64"
  for a in $archs; do
    mkdir -p "$dist/main/binary-$a"
    (
      cd "$www/$repo" || exit 1
      for deb in pool/*_"$a".deb pool/*_all.deb; do
        [[ -f $deb ]] || continue
        dpkg-deb -f "$deb"
        printf 'Filename: %s\nSize: %s\nSHA256: %s\n\n' "$deb" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)"
      done
    ) >"$dist/main/binary-$a/Packages"
    gzip -kf "$dist/main/binary-$a/Packages"
  done
  {
    printf 'Origin: %s\nSuite: test\nCodename: test\nComponents: main\nArchitectures: %s\nSHA256:\n' "$repo" "$archs"
    for a in $archs; do
      for f in main/binary-$a/Packages main/binary-$a/Packages.gz; do
        printf ' %s %s %s\n' "$(sha256sum "$dist/$f" | cut -d' ' -f1)" "$(stat -c %s "$dist/$f")" "$f"
      done
    done
  } >"$dist/Release"
  rm -f "$dist/InRelease" "$dist/Release.gpg"
  case $mode in
    inrelease) gpg --batch --clearsign -o "$dist/InRelease" "$dist/Release" ;;
    detached) gpg --batch --detach-sign -o "$dist/Release.gpg" "$dist/Release" ;;
  esac
}
