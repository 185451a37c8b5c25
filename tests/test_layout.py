"""The house rules of the package's layout, read from the source: no import cycles (an import inside a
function counts: it is the same dependency, only later), no module over 450 lines, a host package that is not
one flat room, nothing below the CLI that climbs back into it, no two packages importing each other (issue 72:
each package stands on floors below it, so a package can be read, tested and moved without the ones above it),
and no test generator shipped."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "rocmkit"
MAX_LINES = 450
MAX_HOST_MODULES = 12


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The module a dotted name lives in: `rocmkit.host.model.Finding` -> `rocmkit.host.model`."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                # `from pkg import name`: name is a submodule or something defined in pkg
                targets = [f"{full}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                owner = _owner(target, mods)
                if owner and owner != mod:
                    graph[mod].add(owner)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def _is_package_parent(graph_from: str, graph_to: str) -> bool:
    return graph_from.startswith(graph_to + ".")


def test_no_import_cycles():
    # A package's __init__ importing its own submodules is the package, not a cycle between modules.
    graph = {m: {t for t in ts if not _is_package_parent(m, t)} for m, ts in import_graph().items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def package_of(module: str) -> str:
    """The package a module belongs to: rocmkit's direct subpackage, or a top-level module on its own
    (`rocmkit.certify.engines.verl` -> `rocmkit.certify`, `rocmkit.archs` -> `rocmkit.archs`)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {package_of(m): set() for m in graph}
    for mod, targets in graph.items():
        packages[package_of(mod)] |= {package_of(t) for t in targets} - {package_of(mod)}
    return packages


def back_edges(packages: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of packages that import each other: the floor each one stands on is the other."""
    return sorted((a, b) for a, ts in packages.items() for b in ts if a < b and a in packages.get(b, ()))


def test_no_two_packages_import_each_other():
    # `rocmkit` itself (its __init__) is the house, not a floor: nothing counts as importing it back.
    packages = {p: ts - {"rocmkit"} for p, ts in package_graph(import_graph()).items() if p != "rocmkit"}
    assert back_edges(packages) == []
    assert cycles(packages) == []


def test_the_package_graph_finds_a_back_edge():
    graph = {"rocmkit.a.x": {"rocmkit.b.y"}, "rocmkit.b.y": {"rocmkit.a.z"}, "rocmkit.a.z": set(),
             "rocmkit.c": {"rocmkit.a.x"}}
    packages = package_graph(graph)
    assert packages == {"rocmkit.a": {"rocmkit.b"}, "rocmkit.b": {"rocmkit.a"}, "rocmkit.c": {"rocmkit.a"}}
    assert back_edges(packages) == [("rocmkit.a", "rocmkit.b")]
    assert cycles(packages) == [["rocmkit.a", "rocmkit.b"]]


def test_no_module_is_over_the_limit():
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_host_package_is_not_one_flat_room():
    direct = sorted(p.name for p in (PACKAGE / "host").glob("*.py"))
    assert len(direct) <= MAX_HOST_MODULES, direct


def test_nothing_below_the_cli_imports_it():
    graph = import_graph()
    climbs = {m: sorted(t for t in ts if t.startswith("rocmkit.cli"))
              for m, ts in graph.items() if not m.startswith("rocmkit.cli") and m != "rocmkit.__main__"}
    assert {m: ts for m, ts in climbs.items() if ts} == {}


def test_no_test_generator_ships():
    assert sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*treegen*")) == []


ENGINES = PACKAGE / "certify" / "engines"


def engine_name_uses(path: Path, names: set[str]) -> list[str]:
    """Where a module says an engine's name as a decision: a comparison about an engine with a name in it, or a
    table keyed by two engines' names (`{"verl": ..., "trl": ...}`: each engine's attribute, read from the registry,
    says it instead)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            said = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant)} & names
            if said and "engine" in ast.unparse(node).lower():
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)} & names
            if len(keys) > 1:
                found.append(f"{node.lineno}: a table keyed by {sorted(keys)}")
    return found


def test_no_engine_name_is_compared_outside_its_engine():
    # the engines are the folders of certify/engines/ (read from the tree: this test imports nothing); each may say
    # its own name, nothing else says any
    names = {p.parent.name for p in ENGINES.glob("*/engine.py")}
    assert names >= {"trl", "verl", "miles"}
    found = {}
    for path in PACKAGE.rglob("*.py"):
        own = path.relative_to(ENGINES).parts[0] if ENGINES in path.parents else None
        uses = engine_name_uses(path, names - {own})
        if uses:
            found[str(path.relative_to(REPO))] = uses
    assert found == {}


def test_the_engine_name_finder_finds_a_comparison_and_a_table(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("T = {'verl': 1, 'trl': 2}\nU = {'verl': 1}\ndef f(s, k):\n    return s.engine == 'trl', k == 'verl'\n")
    assert engine_name_uses(f, {"verl", "trl"}) == ["1: a table keyed by ['trl', 'verl']", "4: s.engine == 'trl'"]
