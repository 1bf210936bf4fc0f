"""Property-based API tests of a service against its published OpenAPI document
(docs/schemas/openapi/<service>.json), with schemathesis, over real HTTP on loopback.

What each generated request must satisfy (the checks below): no 5xx; a status code, content type
and body the document declares for that operation; and a request the document forbids (a
negative case: wrong type, missing field, value out of range) is refused with a 4xx, never
accepted. Bounded and deterministic so it fits the unit suite: few examples per operation, the
same ones every run (derandomized), no shrinking storms, no deadline (a busy CI machine).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from schemathesis import GenerationMode

DOCUMENTS = Path(__file__).resolve().parents[1] / "docs" / "schemas" / "openapi"

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.negative_data_rejection,
]

#: Each operation's property test: examples per operation, reproducible, no shrinking storms.
SETTINGS = hypothesis.settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found
    suppress_health_check=list(HealthCheck),
)


def published_schema(service: str) -> Any:
    """The schemathesis schema of ``service``'s committed document (each test gives its served
    app's URL as ``base_url``); hooks registered on it (``@schema.hook``) shape the cases."""
    document = json.loads((DOCUMENTS / f"{service}.json").read_text(encoding="utf-8"))
    return schemathesis.openapi.from_dict(document)


def operations(schema: Any) -> list[Any]:
    """Every operation of ``schema``, for ``pytest.mark.parametrize`` (ids: ``METHOD /path``).

    One plain pytest test per operation, not ``schema.parametrize()``: that reports operations
    as subtests, whose failures pytest-xdist (the suite runs with ``-n 2``) drops unseen."""
    return [pytest.param(result.ok(), id=result.ok().label) for result in schema.get_all_operations()]


def exercise(operation: Any, base_url: str, headers: dict[str, str]) -> None:
    """Send ``operation``'s generated cases, valid and invalid, to ``base_url``; raise on the
    first reply that fails a check of :data:`CHECKS`."""

    @SETTINGS
    @hypothesis.given(
        case=st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE)
        )
    )
    def each(case: Any) -> None:
        case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS, timeout=60)

    each()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
