"""One error→HTTP mapping: every service answers an AtollError with the status its code has in
``atoll.errors.HTTP_STATUS`` (400 for any other code), in the one error body."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from atoll.errors import HTTP_STATUS, AtollError, ErrorCode, code_of_status, http_status


def _services(tmp_path) -> dict[str, FastAPI]:
    from agents_runner.service import create_app as agents_app
    from environment.app import create_app as environment_app
    from environment.settings import EnvironmentSettings
    from grader.service import create_app as grader_app
    from orchestrator.api import ApiSettings
    from orchestrator.api import create_app as orchestrator_app
    from orchestrator.store import TrialStore
    from orchestrator.viewer.app import create_app as viewer_app

    return {
        "orchestrator": orchestrator_app(
            ApiSettings(store=f"sqlite:///{tmp_path / 'api.db'}", api_token="t")
        ),
        "viewer": viewer_app(TrialStore(f"sqlite:///{tmp_path / 'view.db'}")),
        "grader": grader_app(),
        "agents": agents_app(token="t"),
        "environment": environment_app(
            EnvironmentSettings(
                fs_root=tmp_path / "world" / "filesystem",
                apps_data_root=tmp_path / "world" / ".apps_data",
                json_logs=False,
                log_level="WARNING",
                preload_servers=False,
            )
        ),
    }


def test_every_service_maps_each_error_code_to_the_one_tables_status(tmp_path):
    # too_large and not_found: a domain error's (a format reader's, an MCP tool's) is a refused
    # input, 400, whatever status the HTTP layer's own refusal of that name has
    codes = {
        **HTTP_STATUS,
        "bad_input": 400,
        "some_code_of_no_table": 400,
        "too_large": 400,
        "not_found": 400,
    }
    answered: dict[str, dict[str, int]] = {}
    for name, app in _services(tmp_path).items():

        @app.get("/__raise/{code}")
        def _raise(code: str) -> None:
            raise AtollError(code, f"raised {code}")

        # Ahead of the service's own routes (the environment's catch-all MCP mount included).
        app.router.routes.insert(0, app.router.routes.pop())

        with TestClient(app, base_url="http://127.0.0.1") as client:
            for code in codes:
                reply = client.get(f"/__raise/{code}")
                body: dict[str, Any] = reply.json()
                assert body["error"] == {"code": code, "message": f"raised {code}"}, (name, body)
                answered.setdefault(name, {})[code] = reply.status_code
    expected = {code: http_status(code) for code in codes}
    assert all(status == 400 for code, status in expected.items() if code not in HTTP_STATUS)
    assert answered == {name: expected for name in answered}
    assert len(answered) == 5


@pytest.mark.parametrize(
    ("code", "status"), [("unknown_run", 404), ("mcp_unavailable", 503), ("bad_input", 400)]
)
def test_http_status_reads_the_table_with_400_for_any_other_code(code, status):
    assert http_status(code) == status


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("too_large", 413),
        ("not_found", 404),
        ("invalid_request", 422),
        ("unknown_run", 404),
        ("bad_input", 400),
    ],
)
def test_the_http_layers_own_refusals_answer_their_status_and_name_it_back(code, status):
    assert http_status(code, refusal=True) == status


def test_a_status_raised_alone_is_named_by_its_refusal_code():
    assert [code_of_status(status) for status in (401, 404, 405, 413, 422, 503, 418, 500, 502)] == [
        "unauthorized",
        "not_found",
        "method_not_allowed",
        "too_large",
        "invalid_request",
        "unavailable",
        # Any other status: a declared code all the same, the status saying the rest.
        "bad_request",
        "internal",
        "internal",
    ]
    assert all(isinstance(code_of_status(status), ErrorCode) for status in range(400, 600))
