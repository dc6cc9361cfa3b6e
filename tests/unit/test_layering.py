"""The package's import graph keeps the layering docs/architecture.md draws: no circle, no upward import.

Every import in the package counts, wherever it stands (module level, inside a function, under
``TYPE_CHECKING``): a lazy import is still a dependency, and one that points up would let a lower
stage learn of a higher one.  Each module has a layer (its package's, or its own for the faces and
leaves at the top); a module may import modules of a lower layer, and modules of its own package.
Two packages on one layer (hosts, checks) know nothing of each other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_atlante"
ROOT = "pytest_atlante"

# Lowest first.  A key is a module or a package (its modules, unless a longer key names one).
LAYERS: dict[str, int] = {
    ROOT: 0, f"{ROOT}.diagnostics": 0, f"{ROOT}.fsutil": 0, f"{ROOT}.models": 0, f"{ROOT}.records": 0,
    f"{ROOT}.pathnames": 0, f"{ROOT}.projectroot": 0, f"{ROOT}.hosts.names": 0,
    f"{ROOT}.atlas": 1, f"{ROOT}.sandbox": 1,
    f"{ROOT}.hosts": 2, f"{ROOT}.checks": 2,
    f"{ROOT}.suite": 3,
    f"{ROOT}.provider": 4,
    f"{ROOT}.trial": 5,
    f"{ROOT}.report": 6,
    f"{ROOT}.run": 7,
    f"{ROOT}.plugin": 8, f"{ROOT}.cli": 8,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports (``from pkg import mod`` names ``pkg.mod``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == ROOT)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != ROOT:
                continue
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known)
    return {module for module in found if module in known and module != name}


def layer_key(name: str) -> str:
    keys = [key for key in LAYERS if name == key or name.startswith(key + ".")]
    assert keys, f"{name} has no layer: add it to LAYERS here and to docs/architecture.md"
    return max(keys, key=len)


def package_of(name: str) -> str:
    """The package a module belongs to for the same-package rule (a top-level module is its own)."""
    key = layer_key(name)
    return key if key != ROOT else name


GRAPH = {name: imports_of(name, path, set(modules())) for name, path in modules().items()}


def test_every_module_has_a_layer() -> None:
    for name in GRAPH:
        layer_key(name)


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_no_upward_or_sideways_import(name: str) -> None:
    bad = []
    for target in sorted(GRAPH[name]):
        if target == ROOT or (package_of(target) == package_of(name) and layer_key(name) != ROOT):
            continue
        if LAYERS[layer_key(target)] >= LAYERS[layer_key(name)]:
            bad.append(f"{target} (layer {LAYERS[layer_key(target)]})")
    assert not bad, f"{name} (layer {LAYERS[layer_key(name)]}) imports " + ", ".join(bad)


def test_no_import_circle() -> None:
    state: dict[str, str] = {}
    circles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(GRAPH[node]):
            if state.get(target) == "open":
                circles.append([*trail[trail.index(target):], target] if target in trail else [node, target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert not circles, "\n".join(" -> ".join(circle) for circle in circles)


def test_the_rule_sees_a_planted_upward_import(tmp_path: Path) -> None:
    """The walker finds an import that only a function body makes (so the rules above can fail)."""
    planted = tmp_path / "planted.py"
    planted.write_text("def late():\n    from pytest_atlante.run import roles\n")
    assert imports_of(f"{ROOT}.sandbox.planted", planted, set(modules())) == {f"{ROOT}.run", f"{ROOT}.run.roles"}


MAX_PARAMETERS = 8


def test_no_function_takes_more_than_eight_parameters() -> None:
    """A function that needs more takes one state object (``RunState``, ``SessionInputs``, ``Bounds``)."""
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")]
                if len(names) > MAX_PARAMETERS:
                    found.append(f"{name}.{node.name} ({len(names)})")
    assert not found, found


def test_the_report_side_imports_no_document_layer() -> None:
    """``atlante view``, ``compare`` and ``report merge`` read reports only: they load no document parser."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import pytest_atlante.report.view, pytest_atlante.report.merge, pytest_atlante.report.compare\n"
            "assert 'pytest_atlante.suite.documents' not in sys.modules\n"
            "assert 'pytest_atlante.suite.jsonc' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr


def documented_modules() -> set[str]:
    """The modules docs/architecture.md's module table names, as paths under the package.

    A row may name further modules of the same folder by file name alone (``view.py`` (+
    ``view_assets.py``)): those resolve to the folder of the path before them in the row.
    """
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index("## Modules (one job each)"):text.index("## One run")]
    named: set[str] = set()
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        folder = ""
        for path in re.findall(r"`([\w/]+\.py)`", row.split(" | ")[0]):
            if "/" in path:
                folder = path.rpartition("/")[0]
                named.add(path)
            else:
                named.add(f"{folder}/{path}" if folder else path)
    return named


def test_the_module_table_lists_every_module() -> None:
    """Every module of the package has a place in docs/architecture.md's table, and every module the
    table names exists (a package's ``__init__.py`` needs a row only where it holds a table)."""
    on_disk = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}
    needed = {name for name in on_disk if not name.endswith("__init__.py")}
    documented = documented_modules()
    assert not sorted(needed - documented), "add these to docs/architecture.md's module table"
    assert not sorted(documented - on_disk), "docs/architecture.md names modules that do not exist"


HOST_FOLDERS = sorted(p.name for p in (PACKAGE / "hosts").iterdir() if (p / "__init__.py").is_file())


def host_folder(name: str) -> str | None:
    """The host folder (``hosts/<host>/``) a module is in; None for the shared ``hosts/`` modules."""
    parts = name.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "hosts" and parts[2] in HOST_FOLDERS else None


def test_a_host_is_one_folder_that_no_other_host_and_no_shared_module_imports() -> None:
    """A host folder knows the shared ``hosts/`` modules and nothing of another host; the shared
    modules know no host (the registry finds an adapter by the ``module:Class`` in ``hosts/names.py``;
    what a host gives the model side, such as Codex's shell tools, it hands over through ``Host``),
    so removing a folder and its ``HOSTS`` line leaves every other module as it was.  No exception."""
    assert len(HOST_FOLDERS) >= 4, HOST_FOLDERS
    bad = []
    for name, targets in GRAPH.items():
        for target in targets:
            folder = host_folder(target)
            if folder is not None and host_folder(name) != folder:
                bad.append(f"{name} imports {target}")
    assert not bad, bad
