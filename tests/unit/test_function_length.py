"""No function of the package is longer than :data:`MAX_LINES` lines (issue 36): a longer one hides its steps, and
the steps of two formats that share a skeleton end up copied. A function's length is ``end_lineno - lineno + 1`` of
its ``def`` (decorators aside, docstring and nested functions included); a nested function or a method is checked
on its own too."""

from __future__ import annotations

import ast
from pathlib import Path

import avro_registry_sink

ROOT = Path(avro_registry_sink.__file__).parent
MAX_LINES = 120


def function_lengths(root: Path) -> list[tuple[str, str, int]]:
    """``(file relative to root's parent, qualified name, lines)`` of every function and method under ``root``."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, prefix: str, path: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                found.append((path, name, (child.end_lineno or child.lineno) - child.lineno + 1))
                visit(child, f"{name}.", path)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", path)
            else:
                visit(child, prefix, path)

    for file in sorted(root.rglob("*.py")):
        path = file.relative_to(root.parent).as_posix()
        visit(ast.parse(file.read_text(encoding="utf-8"), filename=str(file)), "", path)
    return found


def too_long(root: Path, limit: int = MAX_LINES) -> list[str]:
    """``file:function:lines`` of each function longer than ``limit`` lines, longest first."""
    return [f"{path}:{name}:{length}" for path, name, length in
            sorted(function_lengths(root), key=lambda f: (-f[2], f[0], f[1])) if length > limit]


def test_no_function_of_the_package_is_longer_than_120_lines():
    found = too_long(ROOT)
    assert not found, (f"{len(found)} function(s) longer than {MAX_LINES} lines: split each into named steps "
                       "(a format's shared skeleton once): " + ", ".join(found))


def test_the_check_names_each_long_function_with_its_file_class_and_length(tmp_path: Path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(119))
    (package / "short.py").write_text(f"def fits():\n{body}\n", encoding="utf-8")  # 120 lines
    (package / "sub" / "long.py").write_text(
        "class Job:\n"
        "    def run(self):\n" + "\n".join(f"        y{i} = {i}" for i in range(125)) + "\n"
        "\n"
        "async def outer():\n"
        "    def inner():\n" + "\n".join(f"        z{i} = {i}" for i in range(121)) + "\n"
        "    return inner\n", encoding="utf-8")
    assert too_long(package) == ["pkg/sub/long.py:Job.run:126", "pkg/sub/long.py:outer:124",
                                 "pkg/sub/long.py:outer.inner:122"]
    assert ("pkg/short.py", "fits", 120) in function_lengths(package)
