"""How a refused input names its problem: the first error of a validation, ``where: message``
(atoll.errors.first_problem, the one home of that wording)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from atoll.errors import first_problem


class Inner(BaseModel):
    size: int


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inner: Inner
    name: str = ""

    @model_validator(mode="after")
    def _named(self) -> Outer:
        if self.name == "bad":
            raise ValueError("the name 'bad' is refused")
        return self


def _refusal(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return caught.value


def test_the_first_error_is_named_by_its_dotted_location():
    problem = first_problem(_refusal({"inner": {"size": "many"}}))
    assert problem.where == "inner.size" and problem.kind == "int_parsing"
    assert str(problem) == f"inner.size: {problem.message}" and "integer" in problem.message


def test_an_error_about_the_whole_input_is_named_by_the_callers_word_for_it():
    refused = _refusal({"inner": {"size": 1}, "name": "bad"})
    assert first_problem(refused).where == "(top level)"
    assert first_problem(refused, top="reply").where == "reply"
    bare = first_problem(refused, top="")
    assert str(bare) == bare.message and "the name 'bad' is refused" in bare.message


def test_an_unknown_field_says_so_in_its_kind():
    problem = first_problem(_refusal({"inner": {"size": 1}, "colour": "red"}))
    assert (problem.where, problem.kind) == ("colour", "extra_forbidden")
