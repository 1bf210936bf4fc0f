"""The check registry: every kind a benchmark may declare has exactly one evaluator."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import BaseModel

from atoll.benchmark import Check
from grader import checks
from grader.checks import UnknownCheckKind, check, evaluator_kinds, run_check


def _declared_kinds() -> set[str]:
    union = get_args(Check)[0]  # Annotated[A | B | ..., Field(discriminator="kind")]
    return {member.model_fields["kind"].default for member in get_args(union)}


def test_every_check_kind_has_an_evaluator_and_every_evaluator_a_kind():
    declared = _declared_kinds()
    assert len(declared) >= 7
    assert declared - evaluator_kinds() == set(), "add a @check(kind) evaluator in grader/checks.py"
    assert evaluator_kinds() - declared == set(), (
        "add the check model to the Check union in atoll/benchmark.py"
    )


def test_a_kind_without_an_evaluator_is_an_error_not_an_ungradeable_result():
    class FutureCheck(BaseModel):
        kind: str = "pixel_colour"

    with pytest.raises(UnknownCheckKind) as info:
        run_check(FutureCheck(), "answer", world=None)  # type: ignore[arg-type]
    assert info.value.code == "unknown_check_kind"
    assert "pixel_colour" in info.value.message and "answer_number" in info.value.message


def test_a_kind_cannot_have_two_evaluators():
    with pytest.raises(ValueError, match="answer_regex"):
        check("answer_regex")(lambda spec, inputs: None)
    assert checks.CHECKS.get("answer_regex") is checks.answer_regex
