# Shared by the apt tests (sourced after lib.sh): fixture repositories under
# $www, made with dpkg-deb and (for signed ones) the gpg key in $GNUPGHOME.

# mkdeb REPO NAME VERSION DEPENDS FILE...: a package whose files hold "NAME VERSION".
mkdeb() {
  local repo=$1 name=$2 ver=$3 deps=$4 f
  shift 4
  local d="$TMP/src/$repo-$name-$ver"
  mkdir -p "$d/DEBIAN" "$www/$repo/pool"
  {
    printf 'Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: T <t@example.invalid>\n' "$name" "$ver"
    [[ -n $deps ]] && printf 'Depends: %s\n' "$deps"
    printf 'Description: fixture package\n'
  } >"$d/DEBIAN/control"
  for f in "$@"; do
    mkdir -p "$d/$(dirname "$f")"
    echo "$name $ver" >"$d/$f"
  done
  dpkg-deb --root-owner-group -Zgzip --build "$d" "$www/$repo/pool/${name}_${ver}_amd64.deb" >/dev/null ||
    fail "dpkg-deb failed for $name $ver"
}

# publish REPO inrelease|detached|unsigned: Packages(.gz), Release and its signature.
publish() {
  local repo=$1 mode=$2 deb f
  local dist="$www/$repo/dists/test"
  mkdir -p "$dist/main/binary-amd64"
  (
    cd "$www/$repo" || exit 1
    for deb in pool/*.deb; do
      dpkg-deb -f "$deb"
      printf 'Filename: %s\nSize: %s\nSHA256: %s\n\n' "$deb" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)"
    done
  ) >"$dist/main/binary-amd64/Packages"
  gzip -kf "$dist/main/binary-amd64/Packages"
  {
    printf 'Origin: %s\nSuite: test\nCodename: test\nComponents: main\nArchitectures: amd64\nSHA256:\n' "$repo"
    for f in main/binary-amd64/Packages main/binary-amd64/Packages.gz; do
      printf ' %s %s %s\n' "$(sha256sum "$dist/$f" | cut -d' ' -f1)" "$(stat -c %s "$dist/$f")" "$f"
    done
  } >"$dist/Release"
  rm -f "$dist/InRelease" "$dist/Release.gpg"
  case $mode in
    inrelease) gpg --batch --clearsign -o "$dist/InRelease" "$dist/Release" ;;
    detached) gpg --batch --detach-sign -o "$dist/Release.gpg" "$dist/Release" ;;
  esac
}
