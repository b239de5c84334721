#!/usr/bin/env python3
"""Creates the "rich" input tree the integration tests build layers from.

usage: make_tree.py DIR [--reverse] [--big MIB]

The tree holds nested directories, an empty directory, an executable, a symlink
(relative) and a dangling one, a hardlinked pair, an empty file, names with spaces
and unicode, and a path longer than 100 bytes (the ustar name limit). With
--reverse the entries are created in the opposite order (so directory order on
disk differs); the content is the same. Modes come from the process umask.
With --big N, big/data.bin holds N MiB of fixed pseudo-random letters (random.Random(1)).
"""
import os
import random
import sys

LONG_DIR = "long/" + "/".join(["d" * 40, "e" * 40, "f" * 40])   # > 100 bytes in all

# (kind, path, payload); directories are made as needed, hardlinks after their target.
ENTRIES = [
    ("file", "README", b"a rich tree for stackbuild's integration tests\n"),
    ("exec", "bin/tool", b"#!/bin/sh\necho tool\n"),
    ("exec", "bin/other tool", b"#!/bin/sh\necho other\n"),
    ("file", "lib/libfoo.so.1", b"\x7fELF not really\x00\x01\x02"),
    ("symlink", "lib/libfoo.so", "libfoo.so.1"),
    ("symlink", "lib/dangling", "does/not/exist"),
    ("file", "lib/py/mod.py", b"x = 1\n"),        # "lib/py-config" sorts between "lib/py" and
    ("exec", "lib/py-config", b"#!/bin/sh\n"),    # "lib/py/mod.py" in byte order of the path
    ("file", "share/deep/nested/dir/leaf.txt", b"leaf\n"),
    ("file", "share/data/a.bin", bytes(range(256)) * 4),
    ("hardlink", "share/data/a-link.bin", "share/data/a.bin"),
    ("file", "share/empty", b""),
    ("dir", "share/emptydir", None),
    ("file", "share/with space/\u00fcn\u00efc\u00f6d\u00e9 \u2713.txt", "caf\u00e9\n".encode()),
    ("file", LONG_DIR + "/a-file-with-a-long-name-too.txt", b"long\n"),
]


def create(root, kind, rel, payload):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "dir":
        os.makedirs(path, exist_ok=True)
    elif kind in ("file", "exec"):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777 if kind == "exec" else 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
    elif kind == "symlink":
        os.symlink(payload, path)
    elif kind == "hardlink":
        os.link(os.path.join(root, payload), path)


def main():
    args = sys.argv[1:]
    reverse = "--reverse" in args
    big = 0
    if "--big" in args:
        big = int(args[args.index("--big") + 1])
        del args[args.index("--big"):args.index("--big") + 2]
    args = [a for a in args if a != "--reverse"]
    if len(args) != 1:
        sys.exit(__doc__)
    root = args[0]
    os.makedirs(root, exist_ok=True)
    entries = list(reversed(ENTRIES)) if reverse else list(ENTRIES)
    pending = []
    for kind, rel, payload in entries:
        if kind == "hardlink" and not os.path.exists(os.path.join(root, payload)):
            pending.append((kind, rel, payload))
            continue
        create(root, kind, rel, payload)
        for p in [p for p in pending if os.path.exists(os.path.join(root, p[2]))]:
            create(root, *p)
            pending.remove(p)
    assert not pending, pending
    if big:
        # Random-ish but fixed: random.Random(1) bytes mapped onto 16 letters, so the
        # data compresses (about 2:1) without being trivial for the compressor.
        rng = random.Random(1)
        table = bytes(b"abcdefghijklmnop"[i % 16] for i in range(256))
        os.makedirs(os.path.join(root, "big"), exist_ok=True)
        with open(os.path.join(root, "big", "data.bin"), "wb") as f:
            for _ in range(big):
                f.write(rng.randbytes(1 << 20).translate(table))


if __name__ == "__main__":
    main()
