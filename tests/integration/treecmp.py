#!/usr/bin/env python3
"""Compares two directory trees entry by entry.

usage: treecmp.py EXPECTED ACTUAL [--clamp EPOCH] [--mtimes] [--owners] [--ignore PATH]...

For every path (relative, found with os.lstat, symlinks never followed) it compares:
the file type, mode & 0o7777 (not for symlinks), the size and sha256 of regular
files, the target of symlinks, and which regular files are hardlinked together
(paths sharing an inode). --clamp checks that every non-directory entry in ACTUAL
has the mtime of its EXPECTED twin clamped to EPOCH: min(expected, EPOCH) (directory
mtimes are not compared: the tools that fill a directory touch them). --mtimes
checks that every non-directory entry has the same mtime in both trees (whole seconds),
--owners that every entry has the same uid and gid.
--ignore skips a path and everything under it in both trees.
Prints each difference and exits 1 if there are any; prints a summary and exits 0
if the trees are the same.
"""
import hashlib
import os
import stat
import sys


def kind(st):
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "chardev"), (stat.S_ISBLK, "blockdev"),
                       (stat.S_ISSOCK, "socket")):
        if test(st.st_mode):
            return name
    return "unknown"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def scan(root, ignore):
    entries, inodes = {}, {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if any(rel == i or rel.startswith(i.rstrip("/") + "/") for i in ignore):
                continue
            st = os.lstat(full)
            e = {"type": kind(st), "mtime": int(st.st_mtime), "owner": f"{st.st_uid}:{st.st_gid}"}
            if e["type"] != "symlink":
                e["mode"] = oct(stat.S_IMODE(st.st_mode))
            if e["type"] == "file":
                e["size"] = st.st_size
                e["sha256"] = sha256(full)
                inodes.setdefault((st.st_dev, st.st_ino), []).append(rel)
            if e["type"] == "symlink":
                e["target"] = os.readlink(full)
            entries[rel] = e
    for paths in inodes.values():
        for p in paths:
            entries[p]["hardlinked_with"] = sorted(set(paths) - {p})
    return entries


def main():
    args = sys.argv[1:]
    clamp, ignore = None, []
    mtimes, owners = "--mtimes" in args, "--owners" in args
    args = [a for a in args if a not in ("--mtimes", "--owners")]
    while "--clamp" in args:
        i = args.index("--clamp")
        clamp = int(args[i + 1])
        del args[i:i + 2]
    while "--ignore" in args:
        i = args.index("--ignore")
        ignore.append(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    exp_root, act_root = args
    exp, act = scan(exp_root, ignore), scan(act_root, ignore)
    problems = []
    for p in sorted(set(exp) - set(act)):
        problems.append(f"missing in {act_root}: {p!r} ({exp[p]['type']})")
    for p in sorted(set(act) - set(exp)):
        problems.append(f"unexpected in {act_root}: {p!r} ({act[p]['type']})")
    for p in sorted(set(exp) & set(act)):
        for key in ("type", "mode", "size", "sha256", "target", "hardlinked_with"):
            if exp[p].get(key) != act[p].get(key):
                problems.append(f"{p!r}: {key} expected {exp[p].get(key)!r}, got {act[p].get(key)!r}")
    if clamp is not None:
        for p in sorted(set(exp) & set(act)):
            want = min(exp[p]["mtime"], clamp)
            if act[p]["type"] != "dir" and act[p]["mtime"] != want:
                problems.append(f"{p!r}: mtime expected {want} (clamped to {clamp}), got {act[p]['mtime']}")
    for p in sorted(set(exp) & set(act)):
        if mtimes and act[p]["type"] != "dir" and act[p]["mtime"] != exp[p]["mtime"]:
            problems.append(f"{p!r}: mtime expected {exp[p]['mtime']}, got {act[p]['mtime']}")
        if owners and act[p]["owner"] != exp[p]["owner"]:
            problems.append(f"{p!r}: owner expected {exp[p]['owner']}, got {act[p]['owner']}")
    for line in problems:
        print("treecmp: " + line, file=sys.stderr)
    if problems:
        print(f"treecmp: {len(problems)} difference(s) between {exp_root} and {act_root}", file=sys.stderr)
        sys.exit(1)
    kinds = {}
    for e in act.values():
        kinds[e["type"]] = kinds.get(e["type"], 0) + 1
    print(f"treecmp: same: {len(act)} entries ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))})")


if __name__ == "__main__":
    main()
