"""The layout's rules, read from the source: no module imports a private name (``_x``) of another, and
imports do not go round in circles.

Module-level imports never form a cycle.  Imports inside functions may, in one place only: the core
language modules (an ``Expr`` prints, evaluates and renders itself through the modules above ``nodes``);
everywhere else (``normalize``, ``derive`` and ``derive.ad``, ``codegen``, ``proofs``) the import graph,
lazy imports included, is acyclic.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"tensorlang": "tensorlang", "normalize": "tensorlang.normalize", "derive": "tensorlang.derive",
            "codegen": "tensorlang.codegen", "proofs": "proofs"}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package,) + parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, top_only: bool):
    """``(imported module, name or None, line)`` for each import of ``module`` from our packages."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_only else ast.walk(tree)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:
                    yield full, None, node.lineno
                elif base in MODULES:
                    yield base, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, None, node.lineno


def _core(module: str) -> bool:
    return module.count(".") == 1 and module.startswith("tensorlang.")


def _cycles(top_only: bool) -> list[list[str]]:
    graph = {m: sorted({t for t, _, _ in _imports(m, top_only)
                        if t != m and MODULES[t].name != "__init__.py"}) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return out


def test_no_module_imports_a_private_name_of_another():
    found = [f"{MODULES[m].relative_to(ROOT)}:{line} imports {name} from {target}"
             for m in MODULES for target, name, line in _imports(m, top_only=False)
             if name is not None and name.startswith("_") and not name.startswith("__") and target != m]
    assert not found, "\n".join(found)


def test_module_level_imports_form_no_cycle():
    assert _cycles(top_only=True) == []


def test_lazy_imports_form_cycles_only_in_the_core():
    bad = [c for c in _cycles(top_only=False) if not all(_core(m) for m in c)]
    assert not bad, bad


# the core transform of tensorlang.ad and the one module of the rule library it may import besides the
# interface: forward mode loads its own rules (they build on forward mode's names)
AD_CORE = {"tensorlang.derive.ad." + m for m in ("analysis", "emit", "primal", "adjoint", "straight", "forward")}
AD_CORE_LOADS = {("tensorlang.derive.ad.forward", "tensorlang.derive.ad.rules.jvp")}


def test_the_ad_core_reads_its_rules_through_the_interface_of_the_rule_library():
    found = [f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}" for m in sorted(AD_CORE)
             for target, _, line in _imports(m, top_only=False)
             if target.startswith("tensorlang.derive.ad.rules.") and (m, target) not in AD_CORE_LOADS]
    assert not found, "\n".join(found)
