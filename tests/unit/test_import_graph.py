"""The package's imports form no cycle: each module's imports of the package's own modules (at the top or in a
function, ``TYPE_CHECKING`` blocks aside) make a graph without a loop, so data flows one way. And none runs
upward across the layers of docs/architecture.md: no module below the Spark wing (``spark/``) imports from it
or from the command line (``cli``, ``cli_options``, ``history/commands``), type-only imports included, and
the Spark wing imports from the command line only where :data:`DESIGNED_UPWARD` says. Inside the Spark wing, its
rooms import only from the rooms before them in :data:`SPARK_ROOMS`; and no folder of the package (its top folder
included) holds more than :data:`ROOM_SHARE` of its lines."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import avro_registry_sink

ROOT = Path(avro_registry_sink.__file__).parent
PACKAGE = "avro_registry_sink"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str], *, type_checking: bool = False) -> set[str]:
    """The package's modules ``path`` imports, outside ``if TYPE_CHECKING:`` blocks unless ``type_checking``."""
    return _imports_of(path.read_text(encoding="utf-8"), path, frozenset(modules), type_checking=type_checking)


@functools.cache  # each module read once for the tests of this file
def _imports_of(text: str, path: Path, modules: frozenset[str], *, type_checking: bool = False) -> set[str]:
    tree = ast.parse(text)
    name = _module_name(path)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in modules:  # a name imported from a module: the module
                target = target.rpartition(".")[0]
            if target and target != name and target != PACKAGE:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_the_package_has_no_import_cycle():
    paths = sorted(ROOT.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph = {_module_name(p): _imports(p, modules) for p in paths}
    assert sum(len(v) for v in graph.values()) > 150  # the graph was read
    assert "avro_registry_sink.formats.json_text" in graph["avro_registry_sink.formats.changelog_arrow"]
    assert _cycles(graph) == []


def test_a_cycle_is_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: The command line: the top layer.
CLI = frozenset({f"{PACKAGE}.cli", f"{PACKAGE}.cli_options", f"{PACKAGE}.history.commands"})
SPARK = f"{PACKAGE}.spark"
#: Imports that run upward by design, each with its reason.
DESIGNED_UPWARD = {
    # spark-submit's entry point on a cluster runs the command line itself
    (f"{PACKAGE}.spark.runtime.submit", f"{PACKAGE}.cli"),
}


def _layer(module: str) -> int:
    """0: below the Spark wing (table definition to encoder), 1: the Spark wing, 2: the command line."""
    if module in CLI:
        return 2
    return 1 if module == SPARK or module.startswith(SPARK + ".") else 0


def _upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if _layer(b) > _layer(a) and (a, b) not in DESIGNED_UPWARD)


def _graph(replace: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Every module's imports, ``TYPE_CHECKING`` blocks included; ``replace``: a module's text to read instead."""
    paths = sorted(ROOT.rglob("*.py"))
    modules = frozenset(_module_name(p) for p in paths)
    texts = {_module_name(p): (replace or {}).get(_module_name(p)) or p.read_text(encoding="utf-8") for p in paths}
    return {_module_name(p): _imports_of(texts[_module_name(p)], p, modules, type_checking=True) for p in paths}


def test_no_import_runs_upward_across_the_layers():
    graph = _graph()
    assert f"{PACKAGE}.spark.driver.job" in graph[f"{PACKAGE}.cli"]  # the graph was read
    assert f"{PACKAGE}.cli" in graph[f"{PACKAGE}.spark.runtime.submit"]  # the designed one is there, and allowed
    assert _upward(graph) == []


def test_an_upward_import_put_back_is_found():
    owners = (ROOT / "routing" / "owners.py").read_text(encoding="utf-8")
    graph = _graph({
        f"{PACKAGE}.routing.owners": owners + "\nif TYPE_CHECKING:\n    from avro_registry_sink.spark.driver.job import JobOptions\n",
        f"{PACKAGE}.routing.rules": (ROOT / "routing" / "rules.py").read_text(encoding="utf-8")
        + "\n\ndef _late():\n    from avro_registry_sink.cli_options import load_config\n",
    })
    assert _upward(graph) == [(f"{PACKAGE}.routing.owners", f"{PACKAGE}.spark.driver.job"),
                              (f"{PACKAGE}.routing.rules", f"{PACKAGE}.cli_options")]


#: The Spark wing's rooms, each importing only from the rooms before it (``spark/functions.py``, the notebook API
#: at the wing's top, may import from all of them).
SPARK_ROOMS = ("runtime", "stages", "sources", "sinks", "driver", "audit")


def _room(module: str) -> int:
    """The position of a module's room in :data:`SPARK_ROOMS` (after them all: the wing's own modules)."""
    parts = module.split(".")
    return SPARK_ROOMS.index(parts[2]) if len(parts) > 2 and parts[2] in SPARK_ROOMS else len(SPARK_ROOMS)


def _room_upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    def spark(module: str) -> bool:
        return module.startswith(SPARK + ".")

    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if spark(a) and spark(b) and _room(b) > _room(a))


def test_the_spark_rooms_import_only_from_the_rooms_before_them():
    graph = _graph()
    assert {_room(m) for m in graph if m.startswith(SPARK + ".")} == set(range(len(SPARK_ROOMS) + 1))
    assert f"{SPARK}.stages.plan" in graph[f"{SPARK}.sources.changelog_stage"]  # the graph was read
    assert _room_upward(graph) == []


def test_a_room_importing_from_a_later_room_is_found():
    stage = (ROOT / "spark" / "stages" / "stage.py").read_text(encoding="utf-8")
    graph = _graph({f"{SPARK}.stages.stage": stage + "\n\ndef _late():\n    from avro_registry_sink.spark.sinks.sinks import Sink\n"})
    assert _room_upward(graph) == [(f"{SPARK}.stages.stage", f"{SPARK}.sinks.sinks")]


#: The most of the package's lines (its ``.py`` files) that one folder may hold, its sub-folders not counted.
ROOM_SHARE = 0.15

def _lines_per_folder() -> dict[Path, int]:
    out: dict[Path, int] = {}
    for path in ROOT.rglob("*.py"):
        out[path.parent] = out.get(path.parent, 0) + len(path.read_text(encoding="utf-8").splitlines())
    return out


def test_no_folder_holds_more_than_its_share_of_the_package():
    lines = _lines_per_folder()
    total = sum(lines.values())
    assert total > 30_000  # the package was read
    # the Spark wing as a whole is over the share: it is its rooms that must each stay under it
    assert sum(n for folder, n in lines.items() if folder.is_relative_to(ROOT / "spark")) > ROOM_SHARE * total
    over = {str(folder.relative_to(ROOT.parent)): f"{n / total:.1%}" for folder, n in lines.items()
            if n > ROOM_SHARE * total}
    assert over == {}, f"folders over {ROOM_SHARE:.0%} of the package's {total} lines: {over}; split them by role"
    assert lines[ROOT] > 0.05 * total  # the top folder is counted too: the command line, the manager, the shared shapes


#: How a module says why it imports the package's own modules inside functions (a comment near its imports).
_WHY = re.compile(r"^# (Imported inside functions, for (start-up|a cycle)|Each command imports|The `history` commands "
                  r"import)", re.MULTILINE)


def _deferred_without_reason(text: str) -> list[int]:
    """Lines of own-module imports inside functions with no reason given: no comment on the line or the one before,
    and no module comment (:data:`_WHY`)."""
    if _WHY.search(text):
        return []
    lines = text.splitlines()
    out: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                name = inner.module if isinstance(inner, ast.ImportFrom) else (
                    inner.names[0].name if isinstance(inner, ast.Import) else None)
                if name and name.startswith(PACKAGE) and "#" not in lines[inner.lineno - 1] \
                        and not lines[inner.lineno - 2].lstrip().startswith("#"):
                    out.add(inner.lineno)
    return sorted(out)


def test_imports_inside_functions_say_why():
    """The package's own modules are imported at the top of a module unless start-up or a cycle says otherwise,
    and then a comment says which."""
    found = {str(path.relative_to(ROOT.parent)): lines for path in sorted(ROOT.rglob("*.py"))
             if (lines := _deferred_without_reason(path.read_text(encoding="utf-8")))}
    assert found == {}, f"imports inside functions with no comment saying why (start-up or a cycle): {found}"
    unexplained = "def f():\n    from avro_registry_sink.model import Op\n    return Op\n"
    assert _deferred_without_reason(unexplained) == [2]
    assert _deferred_without_reason(unexplained.replace("Op\n", "Op  # a cycle: model imports this module\n", 1)) == []


def test_the_storage_sources_planning_process_imports_no_format_and_no_table_model():
    """Spark starts a Python process for each streaming query on a storage tree to plan its batches, and the first
    batch waits for it: importing the source there must not pull in the formats, the table model, the catalog or
    the demo generator (0.75-0.95 s; with them left out, 0.06 s)."""
    import subprocess
    import sys

    probe = ("import sys, avro_registry_sink.spark.sources.storage_source as s; "
             "layout = s.StorageLayout; "  # what the planning process uses
             "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('avro_registry_sink'))))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                                cwd=Path(avro_registry_sink.__file__).parents[1]).stdout.split())
    assert "avro_registry_sink.sources.storage" in loaded
    heavy = sorted(m for m in loaded if m.startswith(("avro_registry_sink.formats", "avro_registry_sink.tabledef",
                                                      "avro_registry_sink.table", "avro_registry_sink.changes",
                                                      "avro_registry_sink.sources.demo", "avro_registry_sink.settings")))
    assert not heavy, f"the storage source's planning process imports {heavy}"
