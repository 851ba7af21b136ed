"""Rules of the package's shape that a change could break without a failing behaviour test."""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "globalpointer"
LONGEST_FUNCTION = 70  # lines: a function longer than a screen is two steps, each of which wants a name


def test_no_function_is_longer_than_a_screen():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these: " + ", ".join(long)
