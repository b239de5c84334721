"""Writes a static PEP 503 index with small wheels, for tests/integration/test_pip.sh.

usage: pip_index.py OUT_DIR

OUT_DIR/simple/<project>/index.html lists OUT_DIR/files/*.whl with #sha256=
fragments. Projects: torchy 1.0 and 2.0 (needs helper>=1.1 and, on Linux,
nvidia-fake-cu12==1.2.*; a win32-only dependency that must not be installed),
helper 1.0/1.1 (a console script), nvidia-fake-cu12 1.2.5/1.3.0.
"""
import hashlib
import os
import sys
import zipfile

out = sys.argv[1]
projects = {}


def wheel(name, version, requires=(), files=None, entry_points=None):
    dist = name.replace("-", "_")
    fn = f"{dist}-{version}-py3-none-any.whl"
    di = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    os.makedirs(os.path.join(out, "files"), exist_ok=True)
    path = os.path.join(out, "files", fn)
    with zipfile.ZipFile(path, "w") as z:
        for p, data in (files or {}).items():
            z.writestr(p, data)
        if entry_points:
            z.writestr(f"{di}/entry_points.txt", entry_points)
        z.writestr(f"{di}/METADATA", meta)
        z.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{di}/RECORD", "")
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    projects.setdefault(name, []).append(f'<a href="../../files/{fn}#sha256={sha}">{fn}</a><br/>')


wheel("helper", "1.0", files={"helper/__init__.py": "def main():\n    print('old')\n"})
wheel("helper", "1.1", files={"helper/__init__.py": "def main():\n    print('helper 1.1')\n"},
      entry_points="[console_scripts]\nhelp-me = helper:main\n")
wheel("nvidia-fake-cu12", "1.2.5", files={"nvidia/fake/__init__.py": "", "nvidia/fake/lib/libfake.so.12": "x" * 100})
wheel("nvidia-fake-cu12", "1.3.0", files={"nvidia/fake/__init__.py": ""})
wheel("torchy", "1.0", files={"torchy/__init__.py": "V = 1\n"})
wheel("torchy", "2.0", files={"torchy/__init__.py": "V = 2\n"},
      requires=["helper>=1.1", "nvidia-fake-cu12==1.2.*; platform_system == 'Linux'", "winonly; sys_platform == 'win32'"])
for name, links in projects.items():
    d = os.path.join(out, "simple", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "index.html"), "w") as f:
        f.write("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
