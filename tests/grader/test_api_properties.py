"""The grader's HTTP API against its published OpenAPI document, by schemathesis
(tests/api_properties.py): no 5xx, replies as declared, forbidden requests refused. No judge:
programmatic checks only, so nothing leaves the machine."""

from __future__ import annotations

import pytest

from grader.service import create_app
from tests.api_properties import bearer, exercise, operations, published_schema
from tests.served_app import ServedApp

TOKEN = "grader-property-token"


@pytest.fixture(scope="module")
def served_grader():
    with ServedApp(create_app(token=TOKEN, max_body_bytes=4 * 1024**2)) as served:
        yield served


schema = published_schema("grader")


@pytest.mark.parametrize("operation", operations(schema))
def test_the_grader_keeps_its_published_contract(operation, served_grader):
    exercise(operation, served_grader.url, bearer(TOKEN))
