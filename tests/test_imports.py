"""The house's rules, checked on the source: no import cycle, and no arrow back up the layers.

The import graph is read from the source with :mod:`ast` (nothing is imported): an edge
``a -> b`` for every ``import b`` / ``from b import x`` in module ``a`` — at the top level and
inside functions (a lazy import is still a dependency) but not under ``if TYPE_CHECKING``.
``from pkg import name`` is an edge to the module ``pkg.name`` when there is one, else to
``pkg`` itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# The stages, left to right: a module may import only from its own stage or stages to its left.
LAYERS = (
    "dpgauss._validation",
    "dpgauss._optional",
    "dpgauss.errors",
    "dpgauss.privacy",
    "dpgauss.noise",
    "dpgauss.denoise",
    "dpgauss.datasets",
    "dpgauss.plotting",
    "dpgauss.heatmap",  # plotting's old name, a shim
    "dpgauss.release",
    "dpgauss.experiments",
    "dpgauss.audit",
    "dpgauss.demo",
    "dpgauss.cli",
)


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for path in (SRC / "dpgauss").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


def import_graph() -> dict[str, set[str]]:
    """``{module: {modules it imports}}`` over the package ``dpgauss``."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, is_pkg) in mods.items():
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                head = base[: len(base) - node.level + 1] if node.level else []
                mod = ".".join(head + ([node.module] if node.module else []))
                subs = [f"{mod}.{a.name}" for a in node.names]
                targets = [s if s in mods else mod for s in subs]
            edges[name].update(t for t in targets if t in mods and t != name)
    return edges


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(module: str) -> int | None:
    hits = [i for i, p in enumerate(LAYERS) if module == p or module.startswith(p + ".")]
    return hits[-1] if hits else None


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    edges = import_graph()
    assert "dpgauss.privacy.calibration" in edges["dpgauss.privacy"]
    assert any(m.startswith("dpgauss.release") for m in edges["dpgauss.cli.release"])


def test_no_import_cycle_between_modules() -> None:
    assert cycles(import_graph()) == []


def test_no_arrow_back_up_the_layers() -> None:
    up = [
        f"{a} -> {b}"
        for a, bs in import_graph().items()
        for b in bs
        if (la := _layer(a)) is not None and (lb := _layer(b)) is not None and lb > la
    ]
    assert sorted(up) == []
