"""The import direction of the package (docs/architecture.md).

Walks every module's imports -- top-level and inside functions, absolute and relative -- and checks
that each points at the same layer or below, and that no two modules import each other through any
path (no cycle).  Engines referenced by ``"module:function"`` strings (``Family.methods``) are
resolved at call time by the layer above and are not imports.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import dpposterior

PACKAGE = pathlib.Path(dpposterior.__file__).parent

#: the rooms, lowest first; a module may import its own layer and those below.  Listed prefixes
#: match a module and its submodules; the longest matching prefix decides.
LAYERS = [
    ("foundation", ["dpposterior._version", "dpposterior.errors", "dpposterior.files", "dpposterior.memory",
                    # Rubin's rules for analyses of m synthetic data sets (numpy, scipy, errors only)
                    "dpposterior.combine",
                    "dpposterior.progress",
                    # credible intervals from draws (numpy only)
                    "dpposterior.intervals"]),
    ("mechanisms and plumbing", ["dpposterior.mechanisms", "dpposterior.options", "dpposterior.posterior",
                                 "dpposterior.convergence",
                                 # convergence's rank normalisation compiled (numba), imported by it for large posteriors
                                 "dpposterior.convergence_kernels", "dpposterior.units", "dpposterior.cliques", "dpposterior.geotables", "dpposterior.netcdf",
                                 # every ArviZ call (0.x and 1.x), beside the file writer; imports no package module
                                 "dpposterior.arviz_compat",
                                 "dpposterior.execution", "dpposterior.checkpoint", "dpposterior.long_lived",
                                 # the family registry only (names -> module strings, Family, EngineSpec)
                                 "dpposterior.families="]),
    ("schemas and models", ["dpposterior.release", "dpposterior.model", "dpposterior.checks", "dpposterior.observation",
                            # the simulator models of the SBI families (not the engines)
                            "dpposterior.sbi=", "dpposterior.sbi.model", "dpposterior.sbi.sir_simulator"]),
    ("families", ["dpposterior.families"]),
    ("engines", ["dpposterior.inference", "dpposterior.sbi",
                 # the noise laws as PyMC / NumPyro distributions, read from a release
                 "dpposterior.ppl"]),
    ("orchestrator", ["dpposterior.api"]),
    ("diagnostics", ["dpposterior.diagnostics"]),
    ("commands", ["dpposterior=", "dpposterior.__main__", "dpposterior.cli", "dpposterior.curator",
                  "dpposterior.curator_api", "dpposterior.marginals_io",
                  "dpposterior.privacy", "dpposterior.report", "dpposterior.geometry", "dpposterior.console",
                  "dpposterior.gallery",
                  "dpposterior.demo", "dpposterior.analysis", "dpposterior.model_commands",
                  "dpposterior.synthetic", "dpposterior.marginals_commands", "dpposterior.marginals_io", "dpposterior.census",
                  "dpposterior.worker_preload"]),
]


def modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["dpposterior", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix.endswith("=")
            name = prefix.rstrip("=")
            hit = module == name if exact else (module == name or module.startswith(name + "."))
            if hit and len(name) + exact > best_len:
                best, best_len = index, len(name) + exact
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_architecture.py")
    return best


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from pkg import submodule`` imports the submodule; ``from module import name`` the module
            candidates = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target
                          for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in MODULES and c != module)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    own = layer_of(module)
    upward = sorted(t for t in GRAPH[module] if layer_of(t) > own)
    assert not upward, (f"{module} ({LAYERS[own][0]}) imports "
                        + ", ".join(f"{t} ({LAYERS[layer_of(t)][0]})" for t in upward))


def test_families_never_import_engines():
    for module, targets in GRAPH.items():
        if module.startswith("dpposterior.families."):
            engines = sorted(t for t in targets if layer_of(t) >= layer_of("dpposterior.inference"))
            assert not engines, f"{module} imports {engines}"


def test_no_import_cycle():
    # Tarjan's strongly connected components over the module graph
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_walker_sees_function_level_and_relative_imports():
    # a check that can fail: the orchestrator's lazy import of the user-model engine is found
    assert "dpposterior.inference.user_model" in GRAPH["dpposterior.api"]
    assert "dpposterior.errors" in GRAPH["dpposterior.families.gaussian"]
    assert layer_of("dpposterior.families.gaussian") > layer_of("dpposterior.families")


def test_nothing_outside_mechanisms_dispatches_on_a_mechanism_or_family_name():
    """Families, engines, curators and the audit ask a mechanism its capabilities and a release its own methods
    (docs/adding-a-mechanism.md); only ``mechanisms/`` and the release-file parser read names."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _name_dispatch import name_dispatches

    found = name_dispatches()
    assert not found, "\n".join(f"{rel}:{line}: {text}" for rel, line, text in found)
