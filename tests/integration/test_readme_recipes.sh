#!/usr/bin/env bash
# The README's table of recipes and examples ("Every recipe and example, and
# whether these machines build it") names every recipes/*.yaml and
# examples/*.yaml, once, and no file that does not exist; each row says
# whether these machines build it (yes/no). tests/e2e/test_every_recipe.sh
# builds the rows that say yes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
src=${SB_SOURCE_DIR:?}

check "every recipe and example has one row; every row names files that exist and says yes or no"
python3 - "$src" <<'PY' || fail "the README's recipe table is out of date"
import pathlib, re, sys
src = pathlib.Path(sys.argv[1])
text = (src / "README.md").read_text()
section = text.split("## Every recipe and example, and whether these machines build it", 1)
if len(section) != 2:
    sys.exit("README.md has no section 'Every recipe and example, and whether these machines build it'")
rows = [l for l in section[1].split("\n## ", 1)[0].splitlines() if l.startswith("| `")]
named = {}
for row in rows:
    cells = [c.strip() for c in row.strip("|").split("|")]
    if not re.match(r"(yes|no)\b", cells[-1]):
        sys.exit(f"row {cells[0]}: the last column says neither yes nor no: {cells[-1]!r}")
    for f in re.findall(r"`((?:recipes|examples)/[^`]+\.yaml)`", cells[0]):
        if f in named:
            sys.exit(f"{f} has two rows")
        if not (src / f).is_file():
            sys.exit(f"{f} is in the table but not in the repository")
        named[f] = cells[-1].split()[0]
files = sorted(str(p.relative_to(src)) for d in ("recipes", "examples") for p in (src / d).glob("*.yaml"))
missing = [f for f in files if f not in named]
if missing:
    sys.exit(f"not in the README's table: {', '.join(missing)}")
print(f"{len(named)} files, {sum(v == 'yes' for v in named.values())} built here")
PY
pass
