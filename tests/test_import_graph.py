"""The package's import graph has no circle, and the model packages import nothing of the engine.

The graph is read from the source with ``ast``: each ``import``/``from ... import`` of a module of
``windowed_operator``, ``triggers`` or ``accumulations`` is an edge, of one of three kinds: at
module level, *lazy* (inside a function or class body: it runs when called, and closes a circle as
surely, only later), or *type-only* (under ``if TYPE_CHECKING:``).  No circle may run through any
of them, except through the edges of ``ALLOWED``: the operators' ``run_local``/``apply`` reach the
runners through ``windowed_operator.facade``, lazily, and those edges are the only model-to-runner
ones.  The checks are shown to fail on a planted circle.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("windowed_operator", "triggers", "accumulations")
KINDS = ("module", "lazy", "type")

#: The facade's edges to the runners: the one way up from the model (``windowed_operator.facade``).
FACADE = "windowed_operator.facade"
ALLOWED = frozenset({
    (FACADE, "windowed_operator.runners.chain"),
    (FACADE, "windowed_operator.runners.local"),
    (FACADE, "windowed_operator.runners.merge"),
    (FACADE, "windowed_operator.spark.driver.apply"),
    (FACADE, "windowed_operator.spark.driver.merge"),
    (FACADE, "windowed_operator.spark.driver.chain"),
})

#: What ``triggers`` and ``accumulations`` may import of ``windowed_operator``: model modules that
#: import nothing of the engine, the state or the runners (the package itself: its ``__init__``
#: imports nothing eagerly).
MODEL_FOR_TRIGGERS = frozenset({"windowed_operator", "windowed_operator.config", "windowed_operator.time_rules",
                                "windowed_operator.windows.base", "windowed_operator.time"})

Graph = dict[str, dict[str, set[str]]]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The known modules one import statement names (``from pkg import sub`` names ``pkg.sub`` when
    it is a module, else ``pkg``)."""
    def nearest(name: str) -> str:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    if isinstance(node, ast.Import):
        return [found for alias in node.names if (found := nearest(alias.name))]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        found = sub if sub in known else nearest(target)
        if found:
            out.append(found)
    return out


def build_graph(root: Path, packages: Iterable[str] = PACKAGES) -> Graph:
    """Each module's imported modules, by kind (``KINDS``)."""
    paths = {_module_name(root, path): path for package in packages for path in sorted((root / package).rglob("*.py"))}
    known = set(paths)
    graph: Graph = {}
    for module, path in paths.items():
        edges: dict[str, set[str]] = {kind: set() for kind in KINDS}
        is_package = path.name == "__init__.py"

        def walk(node: ast.AST, kind: str, edges: dict[str, set[str]] = edges, module: str = module,
                 is_package: bool = is_package) -> None:
            for child in ast.iter_child_nodes(node):
                child_kind = kind
                if kind == "module" and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                           ast.ClassDef)):
                    child_kind = "lazy" if not isinstance(child, ast.ClassDef) else kind
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    for stmt in child.body:
                        walk_one(stmt, "type")
                    for stmt in child.orelse:
                        walk_one(stmt, kind)
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    edges[child_kind].update(t for t in _targets(module, is_package, child, known) if t != module)
                    continue
                walk(child, child_kind)

        def walk_one(stmt: ast.stmt, kind: str, edges: dict[str, set[str]] = edges, module: str = module,
                     is_package: bool = is_package) -> None:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                edges[kind].update(t for t in _targets(module, is_package, stmt, known) if t != module)
            else:
                walk(stmt, kind)

        walk(ast.parse(path.read_text(), str(path)), "module")
        graph[module] = edges
    return graph


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    nodes = set(edges) | {t for targets in edges.values() for t in targets}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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


def edges_of(graph: Graph, kinds: Iterable[str], allowed: frozenset[tuple[str, str]] = ALLOWED) -> dict[str, set[str]]:
    kinds = tuple(kinds)
    return {module: {t for kind in kinds for t in by_kind[kind] if (module, t) not in allowed}
            for module, by_kind in graph.items()}


GRAPH = build_graph(ROOT)


def test_no_import_circle_at_module_level_or_lazily():
    assert circles(edges_of(GRAPH, ("module", "lazy"))) == []


def test_no_import_circle_through_type_only_imports_either():
    """Reported apart: a type-only circle breaks no import, but it is a circle of meaning all the same."""
    assert circles(edges_of(GRAPH, KINDS)) == []


def test_the_allowed_edges_are_the_facade_s_and_all_exist():
    lazy_from_facade = {(FACADE, t) for t in GRAPH[FACADE]["lazy"]}
    assert lazy_from_facade == ALLOWED
    assert not GRAPH[FACADE]["module"]


def test_only_the_facade_reaches_the_runners_from_the_operators():
    runners = {t for _, t in ALLOWED}
    model = ("windowed_operator.operator", "windowed_operator.merge_operator", "windowed_operator.chain")
    reached = {(m, t) for m in model for kind in KINDS for t in GRAPH[m][kind] if t in runners}
    assert reached == set()


def test_triggers_and_accumulations_import_only_the_model_of_windowed_operator():
    for module, by_kind in GRAPH.items():
        if module.split(".")[0] not in ("triggers", "accumulations"):
            continue
        used = {t for kind in KINDS for t in by_kind[kind] if t.split(".")[0] == "windowed_operator"}
        assert used <= MODEL_FOR_TRIGGERS, (module, sorted(used - MODEL_FOR_TRIGGERS))
    # (and those model modules import nothing beyond themselves and the package's small modules)
    for module in MODEL_FOR_TRIGGERS - {"windowed_operator"}:
        used = {t for kind in ("module", "lazy") for t in GRAPH[module][kind] if t.split(".")[0] == "windowed_operator"}
        assert used <= MODEL_FOR_TRIGGERS | {"windowed_operator._version"}, (module, used)


# -- the checks can fail -----------------------------------------------------------------------------

def test_a_planted_circle_is_found_and_an_allowed_edge_cuts_it():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]
    graph: Graph = {m: {"module": set(), "lazy": set(t), "type": set()} for m, t in edges.items()}
    assert circles(edges_of(graph, ("module", "lazy"), frozenset())) == [["a", "b", "c"]]
    assert circles(edges_of(graph, ("module", "lazy"), frozenset({("c", "a")}))) == []


def test_a_lazy_and_a_type_only_circle_in_a_package_on_disk_are_found(tmp_path):
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from .two import f\n")
    (package / "two.py").write_text("def f():\n    from . import one\n    return one\n")
    (package / "three.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .four import X\n")
    (package / "four.py").write_text("from .three import Y\n")
    graph = build_graph(tmp_path, ["planted"])
    assert graph["planted.two"]["lazy"] == {"planted.one"}
    assert graph["planted.three"]["type"] == {"planted.four"}
    assert circles(edges_of(graph, ("module", "lazy"), frozenset())) == [["planted.one", "planted.two"]]
    assert sorted(circles(edges_of(graph, KINDS, frozenset()))) == [["planted.four", "planted.three"],
                                                                   ["planted.one", "planted.two"]]


# -- the wings: imports run one way --------------------------------------------------------------------

#: The wings, lowest first: a module may import its own wing and lower ones, never a higher one (at
#: module level, lazily or for types).  ``spark/`` is split by where its code runs, one sub-package
#: per wing: the support every part uses (``spark.base``), the scan stage's folds, the plan the
#: driver builds and the worker reads, the worker, the driver; its top level holds only the Spark
#: entry points (the ``spark`` package, the pipeline run, the demo, the inspector, the checkpoint
#: tools).  ``sinks`` and ``pipeline`` sit above the Spark runner's parts they use (a table sink
#: reads a Spark batch) and below the entry points that run a pipeline.
WINGS = ("model", "engine", "state", "runners", "spark.base", "spark.scan", "spark.plan", "spark.worker",
         "spark.driver", "sinks", "pipeline", "spark.entry", "cli")
#: (``error_summary`` is a pure function of an exception's text, which the CLI and the Spark runner's
#: errors both use: a top-level module of the model wing.)
CLI = frozenset({"windowed_operator.cli"})


def wing_of(module: str) -> str:
    """The wing a module belongs to (``triggers``, ``accumulations`` and the top-level modules of
    ``windowed_operator`` are the model)."""
    parts = module.split(".")
    if parts[0] != "windowed_operator" or len(parts) == 1:
        return "model"
    if module in CLI:
        return "cli"
    if parts[1] in ("engine", "state", "runners", "sinks", "pipeline"):
        return parts[1]
    if parts[1] != "spark":
        return "model"
    sub = parts[2] if len(parts) > 3 or (len(parts) == 3 and parts[2] in SPARK_WINGS) else ""
    return f"spark.{sub}" if sub else "spark.entry"


#: The sub-packages of ``spark/``, one per wing.
SPARK_WINGS = ("base", "scan", "plan", "worker", "driver")


def test_the_top_of_spark_holds_only_entry_points_and_one_package_per_wing():
    spark = ROOT / "windowed_operator" / "spark"
    packages = sorted(p.name for p in spark.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert packages == sorted(SPARK_WINGS)


def against_the_order(graph: Graph, allowed: frozenset[tuple[str, str]] = ALLOWED) -> list[tuple[str, str, str]]:
    """Every import of a higher wing (module, imported, kind), but the facade's allowed edges."""
    rank = {wing: i for i, wing in enumerate(WINGS)}
    return sorted((module, target, kind) for module, by_kind in graph.items() for kind in KINDS
                  for target in by_kind[kind]
                  if rank[wing_of(target)] > rank[wing_of(module)] and (module, target) not in allowed)


def test_every_import_runs_down_the_wings():
    assert against_the_order(GRAPH) == []


def test_every_wing_has_modules_and_the_model_imports_no_engine():
    wings = {wing_of(module) for module in GRAPH}
    assert wings == set(WINGS)
    model_imports = {t for m in GRAPH if wing_of(m) == "model" and m != FACADE for kind in KINDS for t in GRAPH[m][kind]}
    assert sorted(t for t in model_imports if wing_of(t) != "model") == []


def test_an_import_against_the_order_is_found():
    graph: Graph = {"windowed_operator.engine.core": {"module": set(), "lazy": {"windowed_operator.state.codec"},
                                                      "type": set()},
                    "windowed_operator.state.codec": {"module": {"windowed_operator.engine.core"}, "lazy": set(),
                                                      "type": set()}}
    assert against_the_order(graph) == [("windowed_operator.engine.core", "windowed_operator.state.codec", "lazy")]
