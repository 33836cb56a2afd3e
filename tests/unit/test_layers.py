"""The package's import structure: layers point one way, no import cycles, imports at the top.

Walks every module's imports with ``ast`` (imports inside functions included), so an upward
import or a cycle fails here even when it is written lazily to dodge the ImportError.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rlvr"

# bottom to top: a module may import its own layer or lower ones (docs/architecture.md)
LAYERS = [
    {"types", "problems", "paths", "errors", "log", "console", "metric_names", "machine", "data", "configs",
     "__init__"},
    {"config"},
    {"algo", "model", "tasks", "rewards"},
    {"rollout"},
    {"eval", "analysis", "report"},
    {"train"},
    {"experiments"},
    {"commands"},
    {"cli", "__main__"},
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}
# Layers whose modules import rlvr at the top of the file only. commands/ and cli import lazily on
# purpose: `rlvr --help` must not pay for torch.
TOP_LEVEL_ONLY = 6


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYER_OF[parts[1] if len(parts) > 1 else "__init__"]


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported rlvr module, line, at the top of the file) for every rlvr import in ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    guarded = {id(n) for n in tree.body if isinstance(n, ast.If) for n in ast.walk(n)}  # if TYPE_CHECKING / main
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for n in names:
            if n == "rlvr" or n.startswith("rlvr."):
                out.append((n, node.lineno, id(node) in top or id(node) in guarded))
    return out


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for m, p in modules.items():
        for target, _, _ in imports(p):
            if target in modules and target != m:
                edges[m].add(target)
    return edges


def test_no_module_imports_a_higher_layer() -> None:
    bad = []
    for p in ROOT.rglob("*.py"):
        me = module_name(p)
        for target, line, _ in imports(p):
            if layer(target) > layer(me):
                bad.append(f"{p.relative_to(ROOT.parent)}:{line} ({me}, layer {layer(me)}) imports "
                           f"{target} (layer {layer(target)})")
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_no_import_cycles() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_imports_below_the_commands_are_at_the_top_of_the_file() -> None:
    bad = []
    for p in ROOT.rglob("*.py"):
        if layer(module_name(p)) > TOP_LEVEL_ONLY:
            continue
        lines = sorted({(line, target) for target, line, at_top in imports(p) if not at_top and "." in target[5:]
                        or not at_top and target == "rlvr"})
        seen = set()
        for line, target in lines:
            if line not in seen:
                seen.add(line)
                bad.append(f"{p.relative_to(ROOT.parent)}:{line} imports {target} inside a function")
    assert not bad, "\n".join(sorted(bad))


def test_the_walker_sees_cycles_and_upward_imports(tmp_path, monkeypatch) -> None:
    """The checks above can fail: a planted cycle and a planted upward import are found."""
    pkg = tmp_path / "rlvr"
    (pkg / "algo").mkdir(parents=True)
    (pkg / "train").mkdir()
    (pkg / "algo" / "a.py").write_text("def f():\n    from rlvr.train import b\n")
    (pkg / "train" / "b.py").write_text("from rlvr.algo import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", pkg)
    edges = graph()
    assert edges["rlvr.algo.a"] == {"rlvr.train.b"} and edges["rlvr.train.b"] == {"rlvr.algo.a"}
    (target, _, at_top), = [i for i in imports(pkg / "algo" / "a.py") if i[0] == "rlvr.train.b"]
    assert layer(target) > layer("rlvr.algo.a") and not at_top
