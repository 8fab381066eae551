#!/usr/bin/env python3
"""Counts a crate's public surface: the `pub` items (fn, struct, enum,
trait, const, static, type, mod, use) declared in the modules its users can
reach (every module on the way declared `pub mod`), against all the `pub`
items it declares. `pub(crate)` and items inside private modules are not
reachable; fields and methods count as items when declared `pub`; a `pub
use` counts each name it re-exports (a glob counts one).
    scripts/public-items.py crates/aicc-bridge
"""
import re
import sys
from pathlib import Path

ITEM = re.compile(r"^\s*pub\s+(?:async\s+|unsafe\s+|const\s+(?=fn))*(fn|struct|enum|trait|const|static|type|mod|use)\b")
INLINE_PUB_MOD = re.compile(r"^\s*pub\s+mod\s+[a-z_0-9]+\s*\{", re.M)
MOD = re.compile(r"^\s*(pub\s+|pub\([a-z:]+\)\s+)?mod\s+([a-z_0-9]+)\s*;", re.M)


def module_files(src: Path):
    """(file, reachable) for every module file, walking from lib.rs."""
    out = []

    def walk(path: Path, reachable: bool, children_dir: Path):
        out.append((path, reachable))
        text = path.read_text()
        # Modules under #[cfg(test)] are not part of the surface.
        for m in MOD.finditer(text):
            before = text[: m.start()].rstrip().splitlines()[-1:] or [""]
            if "cfg(test)" in before[0]:
                continue
            name = m.group(2)
            child = children_dir / f"{name}.rs"
            if not child.exists():
                child = children_dir / name / "mod.rs"
            if child.exists():
                public = (m.group(1) or "").strip() == "pub"
                walk(child, reachable and public, children_dir / name)

    walk(src / "lib.rs", True, src)
    return out


def count_items(text: str) -> int:
    """The pub items of one file; a `pub use` statement counts its names."""
    count = 0
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = ITEM.match(lines[i])
        if match and match.group(1) == "use":
            statement = lines[i]
            while ";" not in statement and i + 1 < len(lines):
                i += 1
                statement += lines[i]
            names = re.sub(r"\s+", "", statement.split("use", 1)[1].split(";")[0])
            names = names.replace(",}", "}")
            count += names.count(",") + 1
        elif match:
            count += 1
        i += 1
    return count


def main():
    crate = Path(sys.argv[1] if len(sys.argv) > 1 else "crates/aicc-bridge")
    files = module_files(crate / "src")
    total = reachable_items = 0
    for path, reachable in files:
        text = path.read_text().split("#[cfg(test)]\nmod tests")[0]
        count = count_items(text)
        total += count
        reachable_items += count if reachable else 0
    # Module files on a public path, and modules written inline (facades).
    public_mods = sum(1 for _, r in files if r) - 1
    public_mods += sum(len(INLINE_PUB_MOD.findall(p.read_text())) for p, r in files if r)
    print(f"{crate.name}: {reachable_items} pub items reachable by its users "
          f"(in {public_mods} public modules), {total} declared pub in all")


if __name__ == "__main__":
    main()
