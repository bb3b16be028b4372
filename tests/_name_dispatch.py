"""Find code that dispatches on a mechanism's or a family's name: comparisons (==, !=, in, not in) of a
registered mechanism name with anything, or of a registered family name with an expression that mentions
``family``.  Outside ``mechanisms/`` and the release-file parser there must be none (tests/test_architecture.py):
engines and families ask a mechanism for its capabilities (``noise_shape``, ``integer_valued``, ...) and a
release for its own methods."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "dpposterior"
#: where names are read: the mechanisms themselves and the release file's parser
ALLOWED = ("mechanisms/", "release.py")


def _strings(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out = set()
        for e in node.elts:
            s = _strings(e)
            if s is None:
                return None
            out |= s
        return out
    return None


def name_dispatches(root: pathlib.Path = ROOT) -> list[tuple[str, int, str]]:
    from dpposterior.families import available_families
    from dpposterior.mechanisms.registry import MECHANISMS

    mech, fam = set(MECHANISMS), set(available_families())
    hits = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(ALLOWED):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            parts = [node.left, *node.comparators]
            text = ast.unparse(node)
            for part in parts:
                s = _strings(part)
                if not s:
                    continue
                others = " ".join(ast.unparse(p) for p in parts if p is not part)
                if (s & mech) or ((s & fam) and "family" in others):
                    hits.append((rel, node.lineno, text))
                    break
    return hits


if __name__ == "__main__":  # pragma: no cover
    found = name_dispatches()
    for rel, line, text in found:
        print(f"{rel}:{line}: {text}")
    print(len(found))
