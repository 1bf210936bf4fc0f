"""Every error code is declared once, in atoll.errors.ErrorCode, and raised by its member.

A literal code at a raise site (``AtollError("bad_mode", …)``) is how near-synonyms crept in
(``bad_option`` beside the documented ``invalid_option``): the scan below refuses it, and refuses a
member that ErrorCode does not declare, so a new code is added to ErrorCode where its neighbours
show whether one already says the same thing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from atoll.errors import HTTP_STATUS, REFUSAL_STATUS, ErrorCode
from tests.source_tree import PACKAGES, ROOT

#: Keyword arguments and parameters that carry an error code wherever they appear.
CODE_NAMES = {"code", "unknown_code", "unavailable_code"}
DECLARED = {member.value for member in ErrorCode}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _modules(root: Path) -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(root)), ast.parse(path.read_text(), str(path)))
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
    ]


def _classes(modules: list[tuple[str, ast.Module]]) -> tuple[set[str], set[str]]:
    """The AtollError classes by name, and those among them constructed with a code first
    (``AtollError(code, message)``, ``ToolError``, a subclass that keeps their ``__init__``)."""
    bases: dict[str, set[str]] = {}
    code_first_init: dict[str, bool] = {}
    for _, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {name for base in node.bases if (name := _name(base))}
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        params = item.args.posonlyargs + item.args.args
                        code_first_init[node.name] = len(params) > 1 and params[1].arg == "code"
    family, code_first = {"AtollError", "CodedError"}, {"AtollError"}
    changed = True
    while changed:
        changed = False
        for name, of in bases.items():
            if name not in family and of & family:
                family.add(name)
                changed = True
            first = code_first_init.get(name, bool(of & code_first))
            if name in family and first and name not in code_first:
                code_first.add(name)
                changed = True
    return family, code_first


def _code_problem(node: ast.expr | None) -> str | None:
    """Why the expression given as an error code is refused, or None."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return f"the literal code {node.value!r} (use ErrorCode.{node.value})"
    if isinstance(node, ast.IfExp):
        return _code_problem(node.body) or _code_problem(node.orelse)
    if isinstance(node, ast.BoolOp):
        return next(filter(None, map(_code_problem, node.values)), None)
    return None


def _undeclared(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _name(node.value) == "ErrorCode"
            and node.attr not in ErrorCode.__members__
            and not node.attr.startswith("_")
        ):
            yield node.lineno, f"ErrorCode.{node.attr}, which ErrorCode does not declare"
        if isinstance(node, ast.Call) and _name(node.func) == "ErrorCode" and node.args:
            value = node.args[0]
            if isinstance(value, ast.Constant) and value.value not in DECLARED:
                yield node.lineno, f"ErrorCode({value.value!r}), which ErrorCode does not declare"


def _literal_codes(tree: ast.Module, family: set[str], code_first: set[str]) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            of = {name for base in node.bases if (name := _name(base))}
            for item in node.body:
                assigned = item.targets if isinstance(item, ast.Assign) else []
                if of & family and any(_name(target) == "code" for target in assigned):
                    yield item.lineno, _code_problem(item.value) or ""
            if of & code_first:
                for call in ast.walk(node):
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "__init__"
                        and isinstance(call.func.value, ast.Call)
                        and _name(call.func.value.func) == "super"
                        and call.args
                    ):
                        yield call.lineno, _code_problem(call.args[0]) or ""
        elif isinstance(node, ast.Call):
            if _name(node.func) in code_first and node.args:
                yield node.lineno, _code_problem(node.args[0]) or ""
            for keyword in node.keywords:
                if keyword.arg in CODE_NAMES:
                    yield node.lineno, _code_problem(keyword.value) or ""
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            positional = arguments.posonlyargs + arguments.args
            defaulted = positional[len(positional) - len(arguments.defaults) :]
            defaults = [*zip(defaulted, arguments.defaults, strict=True)]
            defaults += zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
            for arg, default in defaults:
                if arg.arg in CODE_NAMES:
                    yield node.lineno, _code_problem(default) or ""


def code_problems(root: Path = ROOT) -> list[str]:
    """Every place under ``root`` that raises with a literal or undeclared code."""
    modules = _modules(root)
    family, code_first = _classes(modules)
    found = []
    for path, tree in modules:
        for line, problem in [*_literal_codes(tree, family, code_first), *_undeclared(tree)]:
            if problem:
                found.append(f"{path}:{line}: {problem}")
    return sorted(set(found))


def test_every_error_is_raised_with_a_declared_member_of_error_code():
    assert code_problems() == []


def test_the_scan_finds_what_it_refuses(tmp_path):
    package = tmp_path / "atoll"
    package.mkdir()
    (package / "stray.py").write_text(
        "from atoll.errors import AtollError, CodedError, ErrorCode\n"
        "class Stray(CodedError):\n"
        "    code = 'stray'\n"
        "class Relayed(AtollError):\n"
        "    def __init__(self, message):\n"
        "        super().__init__('relayed', message)\n"
        "def fail(kind):\n"
        "    raise AtollError('bad_option' if kind else ErrorCode.bad_input, 'no')\n"
        "def check(code='bad_yaml'):\n"
        "    raise Relayed(ErrorCode.bad_optoin)\n"
    )
    assert [problem.split(": ", 1)[0] for problem in code_problems(tmp_path)] == [
        "atoll/stray.py:10",
        "atoll/stray.py:3",
        "atoll/stray.py:6",
        "atoll/stray.py:8",
        "atoll/stray.py:9",
    ]


def test_members_read_and_serialise_as_the_codes_they_replace():
    import json

    assert ErrorCode.bad_input == "bad_input" and f"{ErrorCode.bad_input}" == "bad_input"
    assert json.dumps({"code": ErrorCode.unknown_run}) == '{"code": "unknown_run"}'
    assert all(member.name == member.value for member in ErrorCode)


def test_the_status_tables_name_declared_codes_only():
    assert all(isinstance(code, ErrorCode) for code in [*HTTP_STATUS, *REFUSAL_STATUS])
    from mcp_servers._core.errors import ERROR_CODES

    assert all(isinstance(code, ErrorCode) for code in ERROR_CODES)
