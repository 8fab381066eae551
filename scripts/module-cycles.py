#!/usr/bin/env python3
"""Prints the import graph between the top-level modules of a crate and
fails if it has a cycle. Reads every .rs file under the crate's src/ (test
modules, from `#[cfg(test)]` on, are left out: a test may reach across),
takes each `crate::<module>` it names, and groups files by their top-level
module (src/<module>.rs or src/<module>/...).

    scripts/module-cycles.py crates/aicc-bridge [--graph]
"""
import pathlib
import re
import sys


def top_module(src: pathlib.Path, path: pathlib.Path) -> str:
    part = path.relative_to(src).parts[0]
    return part[:-3] if part.endswith(".rs") else part


def production_text(path: pathlib.Path) -> str:
    text = path.read_text()
    cut = re.search(r"^#\[cfg\(test\)\]", text, re.M)
    return text[: cut.start()] if cut else text


def graph(crate: pathlib.Path) -> dict:
    src = crate / "src"
    edges: dict = {}
    for path in sorted(src.rglob("*.rs")):
        if path.parent == src and path.name in ("lib.rs", "main.rs") or "bin" in path.relative_to(src).parts:
            continue
        here = top_module(src, path)
        names = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", production_text(path)))
        # `use crate::{a, b::c}` groups name their modules after the brace.
        for group in re.findall(r"\bcrate::\{([^}]*)\}", production_text(path)):
            names.update(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
        edges.setdefault(here, set()).update(name for name in names if name != here)
    return edges


def cycles(edges: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    crate = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "crates/aicc-bridge")
    edges = graph(crate)
    if "--graph" in sys.argv:
        for module in sorted(edges):
            print(f"{module} -> {', '.join(sorted(n for n in edges[module] if n in edges)) or '(nothing)'}")
    found = cycles(edges)
    for component in found:
        print(f"cycle among: {', '.join(component)}")
    if found:
        return 1
    print(f"{crate}: {len(edges)} top-level modules, no import cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
