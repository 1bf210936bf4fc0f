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
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode

DOCUMENTS = Path(__file__).resolve().parents[1] / "docs" / "schemas" / "openapi"

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.negative_data_rejection,
]

#: Applied to each property test (``@SETTINGS``): examples per operation and mode, reproducible.
SETTINGS = hypothesis.settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found
    suppress_health_check=list(HealthCheck),
)


def published_schema(service: str) -> Any:
    """The schemathesis schema of ``service``'s committed document: positive and negative
    cases (each test gives its served app's URL as ``base_url``)."""
    document = json.loads((DOCUMENTS / f"{service}.json").read_text(encoding="utf-8"))
    schema = schemathesis.openapi.from_dict(document)
    schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
    return schema


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
