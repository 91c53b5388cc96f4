"""The package's shape, checked from the source: no import cycles, dependencies point down;
no import cycle among the scripts of ``e2e/`` or the modules of ``benchmarks/gpucheck/``
either; and no module over 400 lines, in ``mmcli/`` or under ``benchmarks/``.

The import graph is computed with ``ast`` from every ``import`` in ``mmcli/`` — module level
and inside functions alike (a lazy import is still a dependency) — except those under
``if TYPE_CHECKING:``, which never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import mmcli

PACKAGE = Path(mmcli.__file__).resolve().parent
MAX_LINES = 400

#: Room → rooms (prefixes) it must never import, directly or through another module.
FORBIDDEN = {
    "mmcli.embeddings": ("mmcli.cli", "mmcli.check_embeddings", "mmcli.dump", "mmcli.bench"),
    "mmcli.dump": ("mmcli.cli", "mmcli.check_embeddings", "mmcli.embeddings.diagnosis"),
    "mmcli.kv": ("mmcli.cli", "mmcli.embeddings", "mmcli.dump", "mmcli.bench"),
    "mmcli.bench": ("mmcli.cli", "mmcli.check_embeddings", "mmcli.kv"),
    "mmcli.check_embeddings": ("mmcli.cli",),
    # Inside kv/: reading configs sits under the engine's arithmetic, which sits under the
    # explanations and what-ifs built on it (those two may import engine/, and plan).
    "mmcli.kv.hf": ("mmcli.cli", "mmcli.kv.engine", "mmcli.kv.explain", "mmcli.kv.whatif"),
    "mmcli.kv.inputs": ("mmcli.cli", "mmcli.kv.engine", "mmcli.kv.explain", "mmcli.kv.whatif"),
    "mmcli.kv.engine": (
        "mmcli.cli",
        "mmcli.kv.hf",
        "mmcli.kv.inputs",
        "mmcli.kv.explain",
        "mmcli.kv.whatif",
        "mmcli.kv.plan",
    ),
    "mmcli.kv.explain": ("mmcli.cli", "mmcli.kv.whatif"),
    "mmcli.kv.whatif": ("mmcli.cli", "mmcli.kv.explain"),
    # Other engines' pools take a model's layers and return figures: they read no files and
    # know nothing of vLLM's arithmetic, of explanations, or of each other.
    "mmcli.kv.sglang": (
        "mmcli.cli",
        "mmcli.kv.hf",
        "mmcli.kv.inputs",
        "mmcli.kv.engine",
        "mmcli.kv.explain",
        "mmcli.kv.whatif",
        "mmcli.kv.plan",
        "mmcli.kv.trtllm",
    ),
    "mmcli.kv.trtllm": (
        "mmcli.cli",
        "mmcli.kv.hf",
        "mmcli.kv.inputs",
        "mmcli.kv.engine",
        "mmcli.kv.explain",
        "mmcli.kv.whatif",
        "mmcli.kv.plan",
        "mmcli.kv.sglang",
    ),
    # The shared vocabulary sits under every room.
    "mmcli.errors": ("mmcli.",),
    "mmcli.findings": ("mmcli.",),
    "mmcli.dtypes": ("mmcli.cli", "mmcli.embeddings", "mmcli.dump", "mmcli.kv", "mmcli.bench"),
    "mmcli.text": ("mmcli.",),
    "mmcli.files": ("mmcli.",),  # opening inputs safely: used by both dump and kv
    "mmcli.lazy": ("mmcli.",),  # the packages' names imported on first use
    "mmcli.atomic": ("mmcli.cli", "mmcli.embeddings", "mmcli.dump", "mmcli.kv", "mmcli.bench"),
}
#: Imports a base module may make in spite of a ``"mmcli."`` ban above.
BASE_ALLOWED = {"mmcli.errors"}
#: Single imports across a ban, each with its reason; the rooms behind them stay banned.
CROSSINGS = {
    # A checkpoint's .safetensors header is read by the one strict reader of the format
    # (lazily, for --weights FILE), not by a second parser in kv.
    ("mmcli.kv.inputs.weights", "mmcli.dump.safetensors"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def imports_of(name: str) -> set[str]:
    """The mmcli modules that module ``name`` imports when it runs."""
    path = MODULES[name]
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:
                    found.add(sub)
                elif base in MODULES:
                    found.add(base)
    found.discard(name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def reachable(start: str, crossings: frozenset[tuple[str, str]] = frozenset()) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        node = todo.pop()
        for nxt in GRAPH[node]:
            if nxt not in seen and (node, nxt) not in crossings:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def find_cycle(graph: dict[str, set[str]] | None = None) -> list[str] | None:
    """One import cycle of ``graph`` (mmcli's by default) as a list of modules, or None
    (iterative three-colour DFS)."""
    graph = GRAPH if graph is None else graph
    colour = dict.fromkeys(graph, 0)
    for root in graph:
        if colour[root]:
            continue
        stack: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        colour[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = 2
                stack.pop()
            elif colour[child] == 1:
                path = [n for n, _ in stack]
                return [*path[path.index(child) :], child]
            elif colour[child] == 0:
                colour[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
    return None


def test_graph_sees_the_rooms() -> None:
    # The walk itself must work, or every check below passes vacuously.
    assert "mmcli.embeddings.ops" in MODULES
    assert "mmcli.errors" in GRAPH["mmcli.embeddings.ops"]
    assert "mmcli.cli.kv_share" in GRAPH["mmcli.cli.main"]
    # ... and the sub-rooms of kv/ (a dependency that must hold, so the rules above bite).
    assert "mmcli.kv.engine.layout" in GRAPH["mmcli.kv.plan"]
    assert "mmcli.kv.hf.config" in GRAPH["mmcli.kv.inputs.layer_config"]


def test_no_import_cycle() -> None:
    assert find_cycle() is None, " → ".join(find_cycle() or [])


def test_cycle_finder_finds_a_cycle() -> None:
    saved = dict(GRAPH)
    try:
        GRAPH["mmcli.errors"] = {"mmcli.dtypes"}
        cycle = find_cycle()
        assert cycle is not None and cycle[0] == cycle[-1]
        assert set(cycle) == {"mmcli.dtypes", "mmcli.errors"}
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


# -- the scripts outside the package: e2e/, e2e/engine/ and benchmarks/gpucheck/ ----------
#: Folders of scripts that import their sibling modules by bare name (the folder on
#: sys.path), as run_engine.py imports the case tables; or, in a package, relatively.
SCRIPT_FOLDERS = ("e2e", "e2e/engine", "benchmarks/gpucheck")
REPO = Path(__file__).resolve().parents[2]


def sibling_graph(folder: Path) -> dict[str, set[str]]:
    """Module → the sibling modules it imports when it runs (lazy imports included)."""
    names = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in sorted(names):
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in names)
            elif isinstance(node, ast.ImportFrom) and node.level <= 1:
                if node.module in names:  # import x / from .x import y
                    found.add(node.module)
                elif node.level and node.module is None:  # from . import x
                    found.update(a.name for a in node.names if a.name in names)
        graph[name] = found - {name}
    return graph


def test_the_script_graph_sees_the_case_tables() -> None:
    # The engine differential's driver imports the tables, and they import their builders.
    graph = sibling_graph(REPO / "e2e" / "engine")
    assert "cases" in graph["run_engine"]
    assert "cases_hybrid" in graph["cases"] and "cases_more" in graph["cases"]
    assert graph["cases_hybrid"] and graph["cases_more"]
    # The GPU check's package imports relatively: its entry module reaches the steps.
    graph = sibling_graph(REPO / "benchmarks" / "gpucheck")
    assert {"steps", "targets", "plumbing"} <= graph["cli"]
    assert "process" in graph["harness"]


@pytest.mark.parametrize("folder", SCRIPT_FOLDERS)
def test_no_import_cycle_among_scripts(folder: str) -> None:
    cycle = find_cycle(sibling_graph(REPO / folder))
    assert cycle is None, f"{folder}: " + " → ".join(cycle or [])


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_dependencies_point_down(room: str) -> None:
    members = [m for m in MODULES if m == room or m.startswith(room + ".")]
    assert members, room
    bad = []
    for member in members:
        for target in sorted(reachable(member, frozenset(CROSSINGS))):
            if target in BASE_ALLOWED and FORBIDDEN[room] == ("mmcli.",):
                continue
            if any(target == b or target.startswith(b) for b in FORBIDDEN[room]):
                bad.append(f"{member} → {target}")
    assert not bad, bad


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines: what second job did it take on?"


#: Every Python file under benchmarks/ (scripts and the GPU check's package) is held to the
#: package's limit as well.
BENCHMARK_FILES = sorted((REPO / "benchmarks").rglob("*.py"))


def test_benchmark_files_are_seen() -> None:
    # The walk must find the scripts and the package, or the size check passes vacuously.
    names = {p.relative_to(REPO).as_posix() for p in BENCHMARK_FILES}
    assert {"benchmarks/gpu_check.py", "benchmarks/gpucheck/cli.py"} <= names


@pytest.mark.parametrize("path", BENCHMARK_FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_benchmark_module_size(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    name = path.relative_to(REPO).as_posix()
    assert lines <= MAX_LINES, f"{name} has {lines} lines: what second job did it take on?"


def test_docstrings_cite_no_outside_documents() -> None:
    cited = [
        f"{name}: {line.strip()}"
        for name, path in MODULES.items()
        for line in path.read_text(encoding="utf-8").splitlines()
        if "SPEC §" in line or "REFERENCE §" in line
    ]
    assert not cited, cited


def test_public_names_resolve() -> None:
    for name in mmcli.__all__:
        assert getattr(mmcli, name) is not None, name


def test_the_cli_reaches_the_planner_through_its_facade() -> None:
    """``mmcli.cli`` imports ``mmcli.kv`` itself, never one of its modules (TYPE_CHECKING
    imports included): the planner's rooms can move without touching the command line."""
    bad = []
    for name, path in MODULES.items():
        if not name.startswith("mmcli.cli"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mmcli.kv."):
                bad.append(f"{name}: from {node.module} import …")
            elif isinstance(node, ast.Import):
                bad += [
                    f"{name}: import {a.name}" for a in node.names if a.name.startswith("mmcli.kv.")
                ]
    assert not bad, bad


def test_the_facade_names_resolve() -> None:
    import mmcli.kv

    for name in mmcli.kv.__all__:
        assert getattr(mmcli.kv, name) is not None, name
