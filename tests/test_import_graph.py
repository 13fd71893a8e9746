"""Data flows one way: no module of the product imports, however indirectly, a module that imports it back.

The graph is read from the source (nothing is imported), counting imports inside functions too (a lazy import
is still a dependency) and leaving out `if TYPE_CHECKING:` blocks (annotations only).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "lerobot_policy_remote": ROOT / "src" / "lerobot_policy_remote",
    "lerobot_fleet": ROOT / "console" / "lerobot_fleet",
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package_dir in PACKAGES.values():
        for path in package_dir.rglob("*.py"):
            parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: set[str], annotations: bool = False) -> set[str]:
    """Project modules `name` imports: `from a import b` counts `a` and, when it is a module, `a.b`.
    `annotations`: count `if TYPE_CHECKING:` imports too."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in _walk(ast.parse(path.read_text()).body, annotations):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in out if m in known and m != name}


def _walk(body: list[ast.stmt], annotations: bool = False):
    for node in body:
        if not annotations and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _walk(node.orelse)
            continue
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _walk([child], annotations)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_and_nothing_else():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    modules = _modules()
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    assert sum(map(len, graph.values())) > 200, "the import graph came out nearly empty: the reader is broken"
    assert _cycles(graph) == []


# lerobot-fleet's rooms, lowest first: a module imports its own room and rooms of a lower rank only, so the
# router never needs the console, the data path never needs Textual, and the console and the verbs stay apart.
FLEET_ROOMS = {"router": 0, "data": 1, "console": 2, "verbs": 2, "rollout": 2, "sim": 3, "cli": 4}


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "lerobot_fleet" or len(parts) == 1:
        return None
    return "cli" if parts[1] == "cli_parser" else parts[1]


def test_the_fleet_package_is_all_rooms():
    modules = [m for m in _modules() if m.startswith("lerobot_fleet.")]
    assert len(modules) > 40
    assert {_room(m) for m in modules} <= set(FLEET_ROOMS), "a module outside the rooms: place it in one"


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports that break the rooms' rule: into a room of the same or a higher rank than the importer's own."""
    wrong = []
    for name, targets in graph.items():
        mine = _room(name)
        for target in sorted(targets):
            theirs = _room(target)
            if mine is not None and theirs is not None and theirs != mine and FLEET_ROOMS[theirs] >= FLEET_ROOMS[mine]:
                wrong.append(f"{name} -> {target}")
    return wrong


def test_the_fleet_rooms_import_downward_only():
    modules = _modules()
    known = set(modules)
    graph = {n: _imports(n, p, known, annotations=True) for n, p in modules.items() if n.startswith("lerobot_fleet")}
    assert _upward(graph) == []


def test_the_rule_catches_an_upward_import():
    assert _upward({"lerobot_fleet.data.store": {"lerobot_fleet.console.app"}}) == [
        "lerobot_fleet.data.store -> lerobot_fleet.console.app"
    ]
    assert _upward({"lerobot_fleet.verbs.doctor": {"lerobot_fleet.console.view"}})  # siblings stay apart
    assert _upward({"lerobot_fleet.cli": {"lerobot_fleet.sim.demo", "lerobot_fleet.data.model"}}) == []
    assert _room("lerobot_fleet.cli_parser") == "cli" and _room("lerobot_fleet") is None


def test_no_import_cycle_in_the_fleet_package_even_in_annotations():
    modules = _modules()
    known = set(modules)
    graph = {
        n: _imports(n, p, known, annotations=True) & known for n, p in modules.items() if n.startswith("lerobot_fleet")
    }
    graph = {n: {t for t in ts if t in graph} for n, ts in graph.items()}
    assert _cycles(graph) == []


def test_each_fleet_subpackage_says_its_job_in_its_first_line():
    package = PACKAGES["lerobot_fleet"]
    for init in package.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        first = doc.splitlines()[0] if doc else ""
        assert first.endswith(".") and len(first) > 30, f"{init}: start with a one-line docstring saying its job"


def test_no_fleet_module_is_over_four_hundred_lines():
    package = PACKAGES["lerobot_fleet"]
    long = [f"{p} ({n})" for p in package.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400]
    assert long == []
