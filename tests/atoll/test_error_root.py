"""Every exception atoll defines is an AtollError (one root, with a stable code)."""

from __future__ import annotations

import ast
import builtins

import pytest

from tests.source_tree import PACKAGES, ROOT

BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
# Must stay a bare OSError: the beneath walk's callers treat it as the failed system call it replaces.
EXEMPT = {"mcp_servers/_core/beneath/_resolve.py:OutsideRoot"}


def _rooted_elsewhere() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases = [base.id if isinstance(base, ast.Name) else ast.unparse(base) for base in node.bases]
                if bases and all(base in BUILTIN_EXCEPTIONS for base in bases):
                    found.append(f"{path.relative_to(ROOT)}:{node.name}")
    return [name for name in found if name not in EXEMPT]


def test_no_exception_class_derives_from_a_builtin_exception_directly():
    assert _rooted_elsewhere() == ["atoll/errors.py:AtollError"]


@pytest.mark.parametrize(
    ("module", "name", "code"),
    [
        ("orchestrator.executors.base", "InfraError", "infra_error"),
        ("agents_runner.gateway", "GatewayUnavailable", "gateway_unavailable"),
        ("grader.verdict", "MalformedOutput", "malformed_verdict"),
    ],
)
def test_the_former_strays_carry_a_code_and_read_as_their_message(module, name, code):
    import importlib

    from atoll.errors import AtollError

    error = getattr(importlib.import_module(module), name)("the thing broke")
    assert isinstance(error, AtollError) and error.code == code and str(error) == "the thing broke"


def test_a_model_error_keeps_its_line_and_the_providers_message():
    from atoll.errors import AtollError
    from atoll.llm.errors import ModelError, ModelErrorKind

    error = ModelError(
        ModelErrorKind.configuration, model="openai/x", api_base="http://h/v1", message="bad key"
    )
    assert (
        isinstance(error, AtollError) and error.code == "model_configuration" and error.message == "bad key"
    )
    assert str(error) == "configuration error from model endpoint openai/x at http://h/v1: bad key"
