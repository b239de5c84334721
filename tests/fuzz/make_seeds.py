#!/usr/bin/env python3
"""Writes the hand-made seeds that attack the canaries (tests/fuzz/canary.hpp).

    python3 tests/fuzz/make_seeds.py   # from the repository root

Each archive tries to reach /tmp/stackbuild-fuzz-host/ (and the canary beside
the target) by absolute and '..' paths, absolute and '..' symlinks, then a
write, a hardlink or a chmod through them. The output is deterministic (fixed
times, owners and compression settings), so running it again changes no seed.
"""
import gzip
import io
import json
import lzma
import os
import tarfile
import warnings
import zipfile

warnings.filterwarnings("ignore", "Duplicate name")  # some seeds name an entry twice on purpose

HOST = "/tmp/stackbuild-fuzz-host"
UP = "../" * 12  # from any scratch directory up to /
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def tar_bytes(entries):
    """entries: (kind, name, arg, mode); kind f (arg: content), d, l (symlink to arg), h (hardlink to arg)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as t:
        for kind, name, arg, mode in entries:
            i = tarfile.TarInfo(name)
            i.mtime, i.uid, i.gid, i.uname, i.gname = 1700000000, 0, 0, "root", "root"
            i.mode = mode
            data = None
            if kind == "f":
                data = arg.encode()
                i.size = len(data)
            elif kind == "d":
                i.type = tarfile.DIRTYPE
            elif kind == "l":
                i.type, i.linkname = tarfile.SYMTYPE, arg
            elif kind == "h":
                i.type, i.linkname = tarfile.LNKTYPE, arg
            t.addfile(i, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def xz(data):
    return lzma.compress(data, preset=0)


def gz(data):
    return gzip.compress(data, mtime=0)


def zip_bytes(entries):
    """entries: (kind, name, arg, mode); kind f (arg: content), d or l (symlink to arg)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for kind, name, arg, mode in entries:
            i = zipfile.ZipInfo(name, date_time=(2023, 11, 14, 22, 13, 20))
            i.create_system = 3
            kind_bits = {"f": 0o100000, "d": 0o040000, "l": 0o120000}[kind]
            i.external_attr = (kind_bits | mode) << 16
            z.writestr(i, "" if kind == "d" else arg)
    return out.getvalue()


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# What every archive target gets: writes, hardlinks and chmods through links
# out of the tree, and paths that leave it. `top` is the archive's top directory.
def hostile(top):
    return {
        "seed-abs-symlink": [
            ("d", top, None, 0o755),
            ("l", top + "/lib", HOST + "/dir", 0o777),
            ("f", top + "/lib/new", "through an absolute link\n", 0o644),
            ("l", top + "/c", HOST + "/canary", 0o777),
            ("f", top + "/c", "overwritten\n", 0o777),
            ("l", top + "/n", HOST + "/new", 0o777),
            ("f", top + "/n", "a new host file\n", 0o644),
        ],
        "seed-hardlink": [
            ("d", top, None, 0o755),
            ("h", top + "/abs", HOST + "/canary", 0o644),
            ("h", top + "/up", top + "/" + UP + HOST[1:] + "/canary", 0o644),
            ("l", top + "/l", HOST, 0o777),
            ("h", top + "/via", top + "/l/canary", 0o644),
            ("h", top + "/beside", top + "/" + UP[:9] + "outside/canary", 0o644),
        ],
        "seed-dotdot": [
            ("d", top, None, 0o755),
            ("f", top + "/" + UP + HOST[1:] + "/dotdot", "up and out\n", 0o644),
            ("f", HOST + "/absolute", "an absolute name\n", 0o644),
            ("f", "../outside/new", "beside the target\n", 0o644),
            ("l", top + "/up", UP + HOST[1:], 0o777),
            ("f", top + "/up/canary", "through a '..' link\n", 0o644),
        ],
        "seed-chmod": [
            ("d", top, None, 0o755),
            ("l", top + "/d", UP + HOST[1:] + "/dir", 0o777),
            ("d", top + "/d", None, 0o777),
            ("l", top + "/f", HOST + "/canary", 0o777),
            ("f", top + "/f", "", 0o4777),
            ("l", top + "/o", "../" + UP[:9] + "outside", 0o777),
            ("d", top + "/o", None, 0o777),
        ],
        # A link that resolves inside when made, through names that do not
        # exist yet: "y" then becomes a link to ".", and it leads out.
        "seed-late-link": [
            ("d", top, None, 0o755),
            ("l", top + "/x", "y/" * 20 + "z/" + "../" * 21 + HOST[1:], 0o777),
            ("d", top + "/z", None, 0o755),
            ("l", top + "/y", ".", 0o777),
            ("h", top + "/h", top + "/x/canary", 0o644),
        ],
    }


def plain(top):
    return [
        ("d", top, None, 0o755),
        ("d", top + "/bin", None, 0o755),
        ("f", top + "/bin/nvcc", "#!/bin/sh\n", 0o755),
        ("d", top + "/include", None, 0o755),
        ("f", top + "/include/fuzz.h", "#define FUZZ 1\n", 0o644),
        ("d", top + "/lib", None, 0o755),
        ("f", top + "/lib/libfuzz.so.12", "ELF\n", 0o755),
        ("l", top + "/lib/libfuzz.so", "libfuzz.so.12", 0o777),
        ("l", top + "/lib/up", "../include/fuzz.h", 0o777),
        ("f", top + "/LICENSE", "license\n", 0o644),
    ]


def archives():
    top = "cuda_fuzz-linux-x86_64-12.6.77-archive"
    write("redist_install", "seed-plain", xz(tar_bytes(plain(top))))
    for name, entries in hostile(top).items():
        write("redist_install", name, xz(tar_bytes(entries)))
    write("redist_install", "seed-zip-links", zip_bytes([e for e in hostile(top)["seed-abs-symlink"] if e[0] != "h"]))

    top = "framework-1.0"
    write("source_archive", "seed-plain", gz(tar_bytes(plain(top))))
    for name, entries in hostile(top).items():
        write("source_archive", name, gz(tar_bytes(entries)))
    write("source_archive", "seed-zip-slip",
          zip_bytes([("f", top + "/ok", "ok\n", 0o644), ("f", UP + HOST[1:] + "/zip-slip", "out\n", 0o644),
                     ("l", top + "/l", HOST + "/dir", 0o777), ("f", top + "/l/inner", "through\n", 0o644)]))

    # Layers: absolute links resolve inside the root; '..' ones are clamped at it.
    layer = hostile("")["seed-abs-symlink"][1:] + hostile("")["seed-chmod"][1:]
    layer = [(k, n.lstrip("/"), a, m) for k, n, a, m in layer]
    write("extract", "seed-host-links", tar_bytes(layer))
    first = [("l", "l", HOST, 0o777), ("l", "u", UP + HOST[1:] + "/dir", 0o777)]
    second = [("f", "l/canary", "through a link of the layer below\n", 0o644), ("d", "u", None, 0o777),
              ("f", "u/inner", "through\n", 0o600), ("h", "h", HOST + "/canary", 0o644)]
    write("extract", "seed-host-two-layers", tar_bytes(first) + b"\n----\n" + tar_bytes(second))

    # A wheel: its own members, then links and names that lead to the host.
    wheel = [("f", "fuzz/__init__.py", "", 0o644),
             ("l", "fuzz/host", HOST + "/canary", 0o777),
             ("f", "fuzz/host", "through\n", 0o777),
             ("f", HOST + "/wheel-absolute", "out\n", 0o644),
             ("f", "fuzz-1.0.data/data/" + UP + HOST[1:] + "/wheel-up", "out\n", 0o644),
             ("f", "fuzz-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fuzz\nVersion: 1.0\n", 0o644),
             ("f", "fuzz-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n", 0o644),
             ("f", "fuzz-1.0.dist-info/RECORD", "", 0o644)]
    write("wheel", "seed-host-links", zip_bytes(wheel))


def credentials():
    def b64(s):
        import base64
        return base64.b64encode(s.encode()).decode()

    logins = {
        "example.com": {"auth": b64("user:example-secret")},
        "example.com/team": {"username": "team", "password": "team-secret"},
        "example.com/tea": {"username": "tea", "password": "tea-secret-not-a-prefix"},
        "evil.example.com": {"auth": b64("evil:evil-secret")},
        "example.com.evil.io": {"auth": b64("evil2:evil2-secret")},
        "https://index.docker.io/v1/": {"auth": b64("hub:hub-secret"), "email": "a@b.c"},
        "example.com:5000/team/app": {"identitytoken": "refresh-token-secret"},
        "ghcr.io/o": {"username": "o", "password": "ghcr-secret"},
    }
    write("auth_file", "seed-containers", "\x00" + json.dumps({"auths": logins}, indent=1))
    write("auth_file", "seed-docker-helpers", "\x01" + json.dumps(
        {"auths": logins, "credsStore": "nothing-here", "credHelpers": {"ghcr.io": "none", "x/../..": "y"}}))
    write("auth_file", "seed-dockercfg", "\x02" + json.dumps(logins))
    # Broken files whose error must not show the secret next to the fault.
    write("auth_file", "seed-truncated-secret", '\x00{"auths": {"example.com": {"auth": "dXNlcjpsZWFrZWQtc2VjcmV0')
    write("auth_file", "seed-control-in-secret", '\x01{"auths": {"example.com": {"password": "leaked-secret\x01", "username": "u"}}}')
    write("auth_file", "seed-wrong-types", '\x00{"auths": {"example.com": {"auth": 5}, "b": [], "c": {"auth": "!!!not-base64"}, "d": {"auth": "' + b64("nocolon-secret") + '"}}}')

    write("credential_helper", "seed-login", json.dumps({"ServerURL": "example.com", "Username": "u", "Secret": "helper-secret"}))
    write("credential_helper", "seed-token", json.dumps({"Username": "<token>", "Secret": "refresh-token-secret"}))
    write("credential_helper", "seed-wrong-types", json.dumps({"Username": 5, "Secret": ["helper-secret"]}))
    write("credential_helper", "seed-truncated", '{"Username": "u", "Secret": "truncated-helper-secret')
    write("credential_helper", "seed-not-found", "credentials not found in native keychain\n")


# The changeset target's operations (fuzz_changeset.cpp): which tree, kind,
# parent (an index among the directories that tree has so far), name, argument.
NAMES = ["a", "b", "c", "lib", ".wh.a", "x y", "inner", "canary", "dir"]
TARGETS = ["/tmp/stackbuild-fuzz-host", "/tmp/stackbuild-fuzz-host/canary", "/tmp/stackbuild-fuzz-host/dir",
           "../outside", "../../outside/canary", "../../../../../../../../../../tmp/stackbuild-fuzz-host/dir",
           "../lower", "../../lower/a", "..", ".", "a", "/", "lib/../a"]
KINDS = ["mkdir", "file", "symlink", "whiteout", "opaque", "chmod", "remove", "xattr", "hardlink"]


def ops(overlay, program):
    dirs = {"lower": [""], "upper": [""]}
    out = bytearray([1 if overlay else 0])
    copied = False
    for tree, kind, parent, name, arg in program:
        if tree == "upper" and not overlay and not copied:  # the copy holds the lower tree's directories
            dirs["upper"], copied = list(dirs["lower"]), True
        k = KINDS.index(kind)
        p = dirs[tree].index(parent)
        if kind == "symlink":
            arg = TARGETS.index(arg)
        out += bytes([k | (0x80 if tree == "upper" else 0), p, NAMES.index(name), arg])
        if kind == "mkdir":
            dirs[tree].append(name if not parent else parent + "/" + name)
    return bytes(out)


def changesets():
    lower = [("lower", "mkdir", "", "a", 0), ("lower", "file", "a", "b", 3), ("lower", "mkdir", "", "dir", 0),
             ("lower", "file", "dir", "inner", 1), ("lower", "symlink", "", "lib", "/tmp/stackbuild-fuzz-host/dir"),
             ("lower", "symlink", "", "c", "../outside"), ("lower", "symlink", "", "canary", "/tmp/stackbuild-fuzz-host/canary")]
    # Upper directories over lower links, whiteouts of the names the links' targets hold.
    write("changeset", "seed-overlay-links", ops(True, lower + [
        ("upper", "symlink", "", "a", "/tmp/stackbuild-fuzz-host/dir"),
        ("upper", "mkdir", "", "lib", 0), ("upper", "whiteout", "lib", "inner", 0),
        ("upper", "mkdir", "", "c", 0), ("upper", "whiteout", "c", "canary", 0), ("upper", "whiteout", "c", "dir", 0),
        ("upper", "file", "", "canary", 3), ("upper", "chmod", "", "canary", 2),
        ("upper", "mkdir", "", "dir", 0), ("upper", "opaque", "", "dir", 0), ("upper", "whiteout", "dir", "inner", 0),
        ("upper", "symlink", "dir", "b", "../../outside/canary"), ("upper", "whiteout", "", "b", 0),
    ]))
    write("changeset", "seed-overlay-opaque", ops(True, lower + [
        ("upper", "mkdir", "", "lib", 0), ("upper", "opaque", "", "lib", 1), ("upper", "file", "lib", "inner", 0),
        ("upper", "mkdir", "", "a", 0), ("upper", "opaque", "", "a", 0), ("upper", "file", "a", "b", 3),
        ("upper", "xattr", "a", "b", 7), ("upper", "symlink", "a", "c", "../../lower/a"),
        ("upper", "hardlink", "a", "x y", 0),
    ]))
    # A copy that steps changed: links put where directories were, and the other way round.
    write("changeset", "seed-copy-links", ops(False, lower + [
        ("upper", "remove", "", "a", 0), ("upper", "symlink", "", "a", "/tmp/stackbuild-fuzz-host/dir"),
        ("upper", "remove", "", "lib", 0), ("upper", "mkdir", "", "lib", 0), ("upper", "file", "lib", "inner", 1),
        ("upper", "remove", "", "c", 0), ("upper", "mkdir", "", "c", 0), ("upper", "chmod", "", "c", 2),
        ("upper", "remove", "", "dir", 0), ("upper", "symlink", "", "dir", "../../../../../../../../../../tmp/stackbuild-fuzz-host/dir"),
        ("upper", "file", "", "b", 2), ("upper", "chmod", "", "b", 4),
    ]))
    write("changeset", "seed-copy-same", ops(False, lower + [
        ("upper", "xattr", "a", "b", 1), ("upper", "chmod", "", "dir", 3), ("upper", "remove", "a", "b", 0),
        ("upper", "file", "a", "b", 3),
    ]))


if __name__ == "__main__":
    archives()
    credentials()
    changesets()
