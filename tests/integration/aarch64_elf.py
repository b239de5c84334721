#!/usr/bin/env python3
# Writes a minimal static aarch64 Linux program that prints MESSAGE and exits 0:
# one ELF header, one PT_LOAD segment, eight instructions (write, exit) and the
# text. A fixture for running code of another platform with nothing downloaded.
#   usage: aarch64_elf.py OUT MESSAGE
import os
import struct
import sys

out, message = sys.argv[1], sys.argv[2].encode() + b"\n"
if len(message) > 0xFFFF:
    sys.exit("aarch64_elf.py: the message is too long")
BASE, HEADERS = 0x400000, 64 + 56
code = [
    0xD2800020,                         # mov x0, #1          (stdout)
    0x100000E1,                         # adr x1, message     (7 words on)
    0xD2800002 | (len(message) << 5),   # mov x2, #length
    0xD2800808,                         # mov x8, #64         (write)
    0xD4000001,                         # svc #0
    0xD2800000,                         # mov x0, #0
    0xD2800BA8,                         # mov x8, #93         (exit)
    0xD4000001,                         # svc #0
]
body = b"".join(struct.pack("<I", c) for c in code) + message
size = HEADERS + len(body)
ident = b"\x7fELF\x02\x01\x01" + bytes(9)  # 64-bit, little-endian, version 1, System V
# e_type EXEC, e_machine AArch64 (183), e_version, e_entry, e_phoff, e_shoff,
# e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx
header = ident + struct.pack("<HHIQQQIHHHHHH", 2, 183, 1, BASE + HEADERS, 64, 0, 0, 64, 56, 1, 0, 0, 0)
# PT_LOAD, R+X, the whole file at BASE
segment = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, size, size, 0x10000)
with open(out, "wb") as f:
    f.write(header + segment + body)
os.chmod(out, 0o755)
