"""No two modules of the package import each other, directly or through others.

Every import counts, including those deferred into a function body and those under ``TYPE_CHECKING``:
a cycle held together by a deferred import breaks as soon as someone moves it to the top of the file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import embodied_r

ROOT = Path(embodied_r.__file__).parent


def module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = ("embodied_r", *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imported(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (``from a.b import c`` names a.b, and a.b.c when c is a
    module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in modules:
                found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
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


def test_cycle_finder_finds_a_deferred_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    names = module_names()
    assert len(names) > 100  # the whole package was read
    graph = {name: imported(path, set(names)) - {name} for name, path in names.items()}
    assert cycles(graph) == []


def package_of(module: str) -> str:
    """``embodied_r.methods.robot_r1.bench`` -> ``embodied_r.sim``; a top-level module is its own package."""
    return ".".join(module.split(".")[:2])


def test_the_subpackages_import_one_way() -> None:
    """No cycle between subpackages either (evaluation -> training -> evaluation, say): a package can be
    read, tested and moved without the ones that depend on it."""
    names = module_names()
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        source = package_of(name)
        graph.setdefault(source, set()).update(package_of(m) for m in imported(path, set(names)))
    for package, targets in graph.items():
        targets.discard(package)
    assert "embodied_r.training" in graph["embodied_r.cli"]  # the graph was built
    assert cycles(graph) == []


# Robot-R1 builds its questions from Meta-World demonstrations it records itself (demos, pipeline) and reads
# the task specs (questions, bench): these are the method's remaining arrows into the simulator. The list
# is exact, so it can only shrink.
ROBOT_R1_SIM_IMPORTS = {
    "embodied_r.methods.robot_r1.bench",
    "embodied_r.methods.robot_r1.demos",
    "embodied_r.methods.robot_r1.pipeline",
    "embodied_r.methods.robot_r1.questions",
}


def test_methods_do_not_import_the_simulator() -> None:
    """The simulator is a data generator: a method runs on any video without it. The oracle perception
    backend reads simulator ground truth, so it lives in ``sim.world`` and the perception factory names it
    by a string path instead of importing it (``embodied-r perceive --backend oracle`` still finds it)."""
    names = module_names()
    into_sim = {name for name, path in names.items() if name.startswith("embodied_r.methods.")
                and any(package_of(m) == "embodied_r.sim" for m in imported(path, set(names)))}
    assert into_sim == ROBOT_R1_SIM_IMPORTS


def test_the_oracle_backend_is_found_by_name() -> None:
    from embodied_r.methods.embodied_r.perception.backends import PerceptionBackend
    from embodied_r.methods.embodied_r.perception.factory import make_backend

    backend = make_backend("oracle", dataset_dir=".")
    assert isinstance(backend, PerceptionBackend) and type(backend).__module__ == "embodied_r.sim.world.oracle_backend"


# ---------------------------------------------------------------------------------------------------------
# Layering: evaluation and training reach a method only through the registry (embodied_r.methods)
# ---------------------------------------------------------------------------------------------------------

# Evaluation's arrows into one method's modules: none. What it needs of a method (its row builder and default
# prompt version for benchmark questions, the system prompt of the official processed files, its perception
# stage and backends, the key frames the VLM-only baseline shows) is a ``Method`` field, reached through the
# row's method or the one that writes the asked prompt version. Kept empty by the test below.
EVALUATION_METHOD_IMPORTS: dict[str, set[str]] = {}


def imports_under(package: str, target: str, itself: bool = False) -> dict[str, set[str]]:
    """Module of ``package`` (itself or below) -> the modules below ``target`` (and ``target`` itself when
    ``itself``) it imports, every import counted, deferred ones included."""
    names = module_names()
    found = {}
    for name, path in names.items():
        if name == package or name.startswith(package + "."):
            hits = {m for m in imported(path, set(names)) if m.startswith(target + ".") or itself and m == target}
            if hits:
                found[name] = hits
    return found


def method_packages() -> set[str]:
    """The methods shipped as packages under ``embodied_r.methods`` (embodied_r, robot_r1)."""
    return {f"embodied_r.methods.{p.name}" for p in (ROOT / "methods").iterdir() if (p / "__init__.py").is_file()}


def test_the_layering_finder_sees_deferred_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from embodied_r.methods.embodied_r.prompts import get_template\n",
                      encoding="utf-8")
    assert imported(source, set(module_names())) == {"embodied_r.methods.embodied_r.prompts"}
    assert {"embodied_r.methods.embodied_r", "embodied_r.methods.robot_r1"} <= method_packages()


def test_evaluation_reaches_a_method_only_through_the_registry() -> None:
    """Evaluation takes each row's ``Method`` (``method_for_row``, or ``method_for_version`` for the prompt
    version it is asked to build) for what is one method's (its scorer, solver, text rules, blind and direct
    prompts, row builder, system prompt, perception stage and key frames) and imports no module of
    ``embodied_r.methods`` but the registry itself."""
    assert imports_under("embodied_r.evaluation", "embodied_r.methods") == EVALUATION_METHOD_IMPORTS == {}


def test_training_imports_no_evaluation_module_and_no_method_package() -> None:
    """Training predicts and scores its held-out rows through ``embodied_r.prediction`` and
    ``core.task_table``, which evaluation uses too; it takes a method's parts through the registry."""
    assert imports_under("embodied_r.training", "embodied_r.evaluation", itself=True) == {}
    into_methods = imports_under("embodied_r.training", "embodied_r.methods")
    assert {name: hits for name, hits in into_methods.items()
            if any(m == p or m.startswith(p + ".") for m in hits for p in method_packages())} == {}
