"""The one registry mechanism (atoll.registry): names, lazy imports, entry points of packages.

A package is simulated by a real distribution folder (``NAME.dist-info`` with its
``entry_points.txt``) beside its module on ``sys.path``: what ``pip install`` would leave,
without installing anything.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from atoll.errors import AtollError, ErrorCode
from atoll.registry import Registry, Unavailable, UnknownName
from tests.fresh_interpreter import run_fresh


def make_distribution(
    root: Path, name: str, module_source: str, entry_points: dict[str, dict[str, str]]
) -> Path:
    """A distribution ``name`` of one module ``name`` whose entry points are ``{group: {entry:
    reference}}``, laid out in ``root`` as site-packages would hold it; returns ``root``."""
    (root / f"{name}.py").write_text(textwrap.dedent(module_source))
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    sections = [
        f"[{group}]\n" + "".join(f"{entry} = {reference}\n" for entry, reference in entries.items())
        for group, entries in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(sections))
    return root


@pytest.fixture
def colours() -> Registry[str]:
    return Registry(
        "colour",
        group="atoll_test.colours",
        unknown_code=ErrorCode.bad_input,
        unavailable_code=ErrorCode.unavailable,
    )


def test_a_registered_entry_is_found_and_an_unknown_name_is_named_with_the_known_ones(colours):
    colours.add("red", "#f00")

    @colours.register("green", warm=False)
    def green() -> str:
        return "#0f0"

    assert colours.get("red") == "#f00" and colours.get("green") is green
    assert colours.entry("green").metadata == {"warm": False}
    assert colours.names() == ["green", "red"]
    with pytest.raises(UnknownName) as info:
        colours.get("blue")
    assert isinstance(info.value, AtollError) and info.value.code == ErrorCode.bad_input
    assert info.value.message == "unknown colour 'blue' (known: green, red)"


def test_a_name_registered_twice_or_contradicting_its_declaration_is_a_bug(colours):
    colours.add("red", "#f00")
    with pytest.raises(ValueError, match="'red' is registered twice"):
        colours.add("red", "#e00")
    colours.declare("blue", "atoll_test_nowhere", warm=False)
    with pytest.raises(ValueError, match="warm=True contradicts"):
        colours.add("blue", "#00f", warm=True)


def test_a_declaration_is_known_without_importing_it_and_a_missing_module_is_unavailable(colours):
    colours.declare("blue", "atoll_test_nowhere:BLUE", warm=False)
    assert colours.names() == ["blue"]
    assert colours.entry("blue").metadata == {"warm": False}
    assert colours.entry("blue").module == "atoll_test_nowhere"
    assert "atoll_test_nowhere" not in sys.modules
    with pytest.raises(Unavailable) as info:
        colours.get("blue")
    assert info.value.code == ErrorCode.unavailable
    assert info.value.message == "colour 'blue' is not available: atoll_test_nowhere is missing"


def test_an_entry_point_of_an_installed_package_is_found_and_loaded_only_when_asked(
    colours, tmp_path, monkeypatch
):
    make_distribution(
        tmp_path,
        "atoll_test_palette",
        """
        TEAL = "#008080"
        LOADED = True
        """,
        {"atoll_test.colours": {"teal": "atoll_test_palette:TEAL", "red": "atoll_test_palette:TEAL"}},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "atoll_test_palette", raising=False)
    colours.add("red", "#f00")

    assert colours.names() == ["red", "teal"]
    assert "atoll_test_palette" not in sys.modules  # listed, not imported
    assert colours.get("teal") == "#008080"
    assert colours.get("red") == "#f00"  # a built-in name wins over a package's


def test_a_package_adds_an_agent_and_a_check_kind_that_then_work(tmp_path):
    make_distribution(
        tmp_path,
        "atoll_test_plugin",
        """
        from agents_runner.registry import register_agent
        from atoll.trajectory import RunStatus
        from grader.checks import CheckResult


        @register_agent("echo", description="repeats the task", uses_model=False)
        async def echo(run):
            run.final_answer = "echo: " + run.initial_messages[-1]["content"]
            return RunStatus.completed


        def answer_length(check, inputs):  # an evaluator that does not register itself
            return CheckResult(len(inputs.answer) <= check.at_most, f"{len(inputs.answer)} characters")
        """,
        {
            "atoll.agents": {"echo": "atoll_test_plugin:echo"},
            "atoll.checks": {"answer_length": "atoll_test_plugin:answer_length"},
        },
    )
    # A fresh interpreter: the real registries read the entry points once, on first need.
    probe = """
import asyncio, json, sys
from pydantic import BaseModel
from agents_runner import agent_names, run_agent
from agents_runner.registry import agent_entry
from atoll.errors import AtollError
from grader.checks import evaluator_kinds, run_check

class AnswerLength(BaseModel):
    kind: str = "answer_length"
    at_most: int

names = agent_names()
flags = agent_entry("echo").uses_model
trajectory = asyncio.run(run_agent(model="none", gateway_url=None, prompt="hello", agent="echo"))
short = run_check(AnswerLength(at_most=20), trajectory.final_answer, world=None)
long = run_check(AnswerLength(at_most=3), trajectory.final_answer, world=None)
errors = []
for unknown in (lambda: agent_entry("nope"), lambda: run_check(AnswerLength(kind="nope", at_most=1), "", None)):
    try:
        unknown()
    except AtollError as exc:
        errors.append([exc.code, exc.message])
print(json.dumps({
    "echo_listed": "echo" in names, "uses_model": flags,
    "status": trajectory.status.value, "answer": trajectory.final_answer,
    "kind_listed": "answer_length" in evaluator_kinds(), "checks": [short.passed, long.passed],
    "errors": errors,
}))
"""
    report, _ = run_fresh(probe, env={"PYTHONPATH": f"{Path(__file__).resolve().parents[2]}:{tmp_path}"})
    assert report["echo_listed"] and report["uses_model"] is False
    assert (report["status"], report["answer"]) == ("completed", "echo: hello")
    assert report["kind_listed"] and report["checks"] == [True, False]
    (agent_code, agent_message), (check_code, check_message) = report["errors"]
    assert agent_code == "unknown_agent" and "'nope'" in agent_message
    assert "echo" in agent_message and "react_toolbelt" in agent_message
    assert check_code == "unknown_check_kind" and "'nope'" in check_message
    assert "answer_length" in check_message and "answer_number" in check_message
