"""The layout's rules, read from the source: no module imports a private name (``_x``) of another, and
imports do not go round in circles.

Module-level imports never form a cycle.  Imports inside functions may, in one place only: the core
language modules above ``nodes`` (the parser, the checker and the predicates call one another);
everywhere else (``normalize``, ``derive`` and ``derive.ad``, ``codegen``, ``proofs``) the import graph,
lazy imports included, is acyclic.  No module reaches up a layer by importing inside a function where
the layers are drawn: ``nodes`` imports nothing above it (the modules that define what a node does
beyond its structure install it, ``tensorlang.hooks``), ``errors`` nothing of ``codegen``, and
``codegen`` nothing of ``derive``.  And a Tensor SSA statement's form is its class: nothing tells the forms
apart by a ``kind`` string.
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


def _lazy_imports(module: str) -> list[str]:
    """``path:line imports target`` for each import of our modules inside a function or class of ``module``."""
    top = set(_imports(module, top_only=True))
    return [f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}"
            for target, name, line in sorted(set(_imports(module, top_only=False)) - top, key=lambda i: i[2])]


def test_the_nodes_import_nothing_above_them():
    """What a node does beyond its structure (printing, equality, evaluation) is installed into
    ``nodes.OPERATIONS`` by the modules that define it, not imported by the node's methods."""
    found = _lazy_imports("tensorlang.nodes")
    assert not found, "\n".join(found)


def _importers(prefix: str, of: str) -> list[str]:
    """``path:line imports target`` for each import, at module level or in a function, by a module whose
    name starts with ``prefix`` of a module whose name starts with ``of``."""
    return [f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}" for m in MODULES if m.startswith(prefix)
            for target, _, line in _imports(m, top_only=False) if target.startswith(of)]


def test_the_errors_import_nothing_from_codegen():
    found = _importers("tensorlang.errors", "tensorlang.codegen")
    assert not found, "\n".join(found)


def test_codegen_imports_nothing_from_derive():
    """A kernel's derivatives are compiled from programs that the derivative layer, above codegen, builds
    and installs (``codegen.kernel.DERIVATIVES``)."""
    found = _importers("tensorlang.codegen", "tensorlang.derive")
    assert not found, "\n".join(found)


def _installers() -> list[str]:
    """The modules that install an operation into a ``Hooks`` table (``TABLE.install(...)`` on a name they
    import)."""
    out = []
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text())
        imported = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
        if any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "install"
               and isinstance(node.func.value, ast.Name) and node.func.value.id in imported
               for node in ast.walk(tree)):
            out.append(m)
    return out


def test_importing_the_package_installs_every_operation():
    """``import tensorlang`` imports, at module level, every module that installs an operation, so a
    program built after ``import tensorlang`` (or ``from tensorlang.nodes import ...``) finds them all."""
    seen, todo = set(), ["tensorlang"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += [t for t, _, _ in _imports(m, top_only=True)]
    installers = _installers()
    assert "tensorlang.printer" in installers
    assert sorted(set(installers) - seen) == []


# the core transform of tensorlang.ad and the one module of the rule library it may import besides the
# interface: forward mode loads its own rules (they build on forward mode's names)
AD_CORE = {"tensorlang.derive.ad." + m for m in ("analysis", "emit", "primal", "adjoint", "straight", "forward")}
AD_CORE_LOADS = {("tensorlang.derive.ad.forward", "tensorlang.derive.ad.rules.jvp")}


def test_the_ad_core_reads_its_rules_through_the_interface_of_the_rule_library():
    found = [f"{MODULES[m].relative_to(ROOT)}:{line} imports {target}" for m in sorted(AD_CORE)
             for target, _, line in _imports(m, top_only=False)
             if target.startswith("tensorlang.derive.ad.rules.") and (m, target) not in AD_CORE_LOADS]
    assert not found, "\n".join(found)


AD = ROOT / "derive" / "ad"


def _slots(path: Path) -> list[str]:
    """What in module ``path`` keeps a current state outside ``derive/ad/context.py``'s one ``ContextVar``: a
    module-level one-element list (``STORE = [Store()]``), a numbered item of a module-level name written
    (``STORE[0] = s``), a ``global`` statement, thread-local state, or a ``ContextVar`` of its own.  Registries
    and caches (dicts and sets written by key, lists of several entries) are none of these."""
    tree = ast.parse(path.read_text())
    names = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    names |= {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    found = []
    for node in tree.body:
        value = getattr(node, "value", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.List) and len(value.elts) == 1:
            found.append(f"{node.lineno}: a one-element list at module level")
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id in names \
                        and isinstance(sub.slice, ast.Constant) and type(sub.slice.value) is int:
                    found.append(f"{node.lineno}: writes {ast.unparse(sub)}, a slot of a module-level list")
        if isinstance(node, ast.Global):
            found.append(f"{node.lineno}: global {', '.join(node.names)}")
        if isinstance(node, ast.Attribute) and node.attr in ("local", "ContextVar") and path.name != "context.py":
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_ad_layer_keeps_the_current_differentiation_in_one_place():
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(AD.rglob("*.py")) for line in _slots(path)]
    assert not found, "\n".join(found)
    assert "ContextVar(" in (AD / "context.py").read_text()


def _isinstance_chains(path: Path) -> list[str]:
    """Functions that pick code by testing a node's class three times or more in one ``if``/``elif`` chain
    or run of ``if``s."""
    found = []
    for f in ast.walk(ast.parse(path.read_text())):
        if not isinstance(f, ast.FunctionDef):
            continue
        tests = 0
        for st in f.body:
            while isinstance(st, ast.If):
                call = st.test
                tests += isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "isinstance"
                st = st.orelse[0] if len(st.orelse) == 1 else None
        if tests >= 3:
            found.append(f"{path.relative_to(ROOT)}:{f.lineno} {f.name}")
    return found


# the modules that handle every kind of node (printers, the cost model, the evaluators): each kind is a method
# found by tensorlang.dispatch
DISPATCHERS = ("tensorlang.printer", "tensorlang.latex", "tensorlang.cost", "tensorlang.evaluate",
               "tensorlang.codegen.scalar", "tensorlang.codegen.loop_ir", "proofs.symbolic")


def test_node_kinds_are_dispatched_one_way():
    """A method is found for a node's class by ``tensorlang.dispatch`` (``_print_<Class>`` along the MRO), never
    by building its name from the class (``getattr(self, "e_" + type(e).__name__)``); the printers and the cost
    model have no ``isinstance`` chains."""
    built = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                    and len(node.args) > 1 and isinstance(node.args[1], (ast.BinOp, ast.JoinedStr)) \
                    and ".__name__" in ast.unparse(node.args[1]) and module != "tensorlang.dispatch":
                built.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not built, "\n".join(built)
    chains = [line for module in DISPATCHERS for line in _isinstance_chains(MODULES[module])]
    assert not chains, "\n".join(chains)


SSA_FORM_READERS = ("tensorlang.normalize.", "tensorlang.derive.", "proofs.")
PYTHON_AD = "tensorlang.derive.ad."


def _kind_tests(path: Path) -> list[str]:
    """Where module ``path`` tells things apart by a ``kind`` string: a comparison with an attribute ``kind``
    (``stmt.kind == "input"``), or a name of the string classifiers (``rhs_kind``, ``parse_statement``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Attribute) and side.attr == "kind" for side in [node.left, *node.comparators]):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        name = node.id if isinstance(node, ast.Name) else node.name if isinstance(node, ast.FunctionDef) else None
        if name in ("rhs_kind", "parse_statement"):
            found.append(f"{node.lineno}: {name}")
    return found


def test_the_tensor_ssa_forms_are_told_apart_by_their_statement_classes():
    """A right-hand side's Fig. 10 form is its class in ``normalize/statements.py`` (``classify``); the
    passes, the derivatives and the proofs dispatch on the class, never on a string kind.  (``derive.ad``,
    the AD layer for Python functions, has instructions of its own, not Tensor SSA statements.)"""
    found = [f"{path.relative_to(ROOT)}:{line}" for module, path in sorted(MODULES.items())
             if (module + ".").startswith(SSA_FORM_READERS) and not (module + ".").startswith(PYTHON_AD)
             for line in _kind_tests(path)]
    assert not found, "\n".join(found)
