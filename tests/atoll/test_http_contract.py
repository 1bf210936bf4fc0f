"""The services' HTTP contract: every route declares its reply (OpenAPI never shows a bare
"object"), every error comes in one body ``{"error": {"code", "message", ...}}`` (the
environment adds FastAPI's ``detail`` beside it for Archipelago's clients), and one bearer
guard protects every service."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agents_runner.service import create_app as agents_app
from atoll.errors import AtollError
from grader.service import create_app as grader_app
from orchestrator.api import ApiSettings
from orchestrator.api import create_app as orchestrator_app


def _apps(tmp_path) -> dict[str, FastAPI]:
    return {
        "orchestrator": orchestrator_app(
            ApiSettings(store=f"sqlite:///{tmp_path / 'api.db'}", api_token="secret")
        ),
        "grader": grader_app(),
        "agents": agents_app(token="secret"),
    }


def _bare(schema: dict[str, Any]) -> bool:
    """A schema that says nothing of its fields: ``{}`` or ``{"type": "object"}`` alone."""
    return "$ref" not in schema and not schema.get("properties") and not schema.get("anyOf")


@pytest.mark.parametrize("service", ["orchestrator", "grader", "agents"])
def test_every_route_declares_its_reply_and_the_error_body(tmp_path, service):
    spec = _apps(tmp_path)[service].openapi()
    routes = [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]
    assert routes
    for path, method, operation in routes:
        replies = operation["responses"]
        success = next(code for code in replies if code.startswith("2"))
        schema = replies[success]["content"]["application/json"]["schema"]
        assert not _bare(schema), f"{method.upper()} {path} answers a bare object: {schema}"
        for errors in ("4XX", "5XX"):
            error_schema = replies[errors]["content"]["application/json"]["schema"]
            assert error_schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)
        assert "422" not in replies, f"{method.upper()} {path} documents FastAPI's own 422 body"


def _error(reply) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["code"], str) and isinstance(body["error"]["message"], str), body
    return body["error"]


def test_errors_of_every_kind_come_in_the_one_body(tmp_path):
    apps = _apps(tmp_path)
    auth = {"Authorization": "Bearer secret"}
    with TestClient(apps["orchestrator"]) as orchestrator, TestClient(apps["agents"]) as agents:
        for client, path in ((orchestrator, "/runs"), (agents, "/agents")):
            refused = client.get(path, headers={"Authorization": "Bearer wrong"})
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == "Bearer"
            assert _error(refused) == {"code": "unauthorized", "message": "missing or wrong bearer token"}

        missing = orchestrator.get("/runs/nope", headers=auth)
        assert missing.status_code == 404 and _error(missing)["code"] == "unknown_run"
        no_route = agents.get("/no/such/route", headers=auth)
        assert no_route.status_code == 404 and _error(no_route)["code"] == "not_found"

        invalid = agents.post("/runs", json={"agent": "react_toolbelt"}, headers=auth)
        assert invalid.status_code == 422
        error = _error(invalid)
        assert error["code"] == "invalid_request"
        assert "model: Field required" in error["message"]  # names the missing field
        assert {tuple(item["loc"]) for item in error["errors"]} >= {("body", "model")}

    with TestClient(apps["grader"]) as grader:
        # The Host guard (a middleware, before any route) answers in the same body.
        foreign = grader.get("/health", headers={"Host": "evil.example"})
        assert foreign.status_code == 421 and _error(foreign)["code"] == "host_not_allowed"
        cross_site = grader.post("/grade", headers={"Origin": "https://evil.example"})
        assert cross_site.status_code == 403 and _error(cross_site)["code"] == "cross_site"

        no_files = grader.post("/grade", data={"task": "{}"})
        assert no_files.status_code == 422
        assert "before: Field required" in _error(no_files)["message"]


def _environment(tmp_path, **settings: Any) -> FastAPI:
    from environment.app import create_app as environment_app
    from environment.settings import EnvironmentSettings

    return environment_app(
        EnvironmentSettings(
            fs_root=tmp_path / "world" / "filesystem",
            apps_data_root=tmp_path / "world" / ".apps_data",
            json_logs=False,
            log_level="WARNING",
            preload_servers=False,
            **settings,
        )
    )


def test_every_environment_route_declares_its_reply(tmp_path):
    """The environment's replies are typed too, and its errors declared (with ``detail``)."""
    spec = _environment(tmp_path).openapi()
    routes = [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]
    assert {path for path, _, _ in routes} >= {"/apps", "/health", "/data/populate", "/data/snapshot/s3"}
    for path, method, operation in routes:
        replies = operation["responses"]
        success = next(code for code in replies if code.startswith("2"))
        content = replies[success]["content"]
        if "application/json" in content:
            schema = content["application/json"]["schema"]
            assert not _bare(schema), f"{method.upper()} {path} answers a bare object: {schema}"
        else:  # the snapshot archive, the Prometheus text
            assert content and all(media["schema"]["type"] == "string" for media in content.values())
        for errors in ("4XX", "5XX"):
            error_schema = replies[errors]["content"]["application/json"]["schema"]
            assert error_schema == {"$ref": "#/components/schemas/DetailedErrorBody"}, (method, path)
        assert "422" not in replies, f"{method.upper()} {path} documents FastAPI's own 422 body"
    body = spec["components"]["schemas"]["DetailedErrorBody"]
    assert set(body["properties"]) == {"error", "detail"}


def _detailed_error(reply) -> tuple[dict[str, Any], Any]:
    """The environment's body: the one ``error`` plus FastAPI's ``detail`` for Archipelago."""
    body = reply.json()
    assert set(body) == {"error", "detail"}, body
    error = body["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str), body
    return error, body["detail"]


def test_environment_errors_come_in_the_one_body_with_fastapis_detail_beside_it(tmp_path):
    app = _environment(tmp_path, env_token="secret", mcp_token="mcp-secret", max_archive_bytes=1024)

    @app.get("/refuse")
    async def refuse() -> None:
        raise AtollError("bad_world", "the world 'w' is not one of this benchmark's")

    app.router.routes.insert(0, app.router.routes.pop())  # before the /mcp mount, which takes "/"
    auth = {"Authorization": "Bearer secret"}
    with TestClient(app) as client:
        refused = client.get("/apps", headers={"Authorization": "Bearer wrong"})
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        message = "missing or wrong bearer token"
        assert _detailed_error(refused) == ({"code": "unauthorized", "message": message}, message)

        # /mcp has its own token, refused below FastAPI (an ASGI guard) in the same body.
        mcp = client.post("/mcp", json={})
        assert mcp.status_code == 401 and mcp.headers["www-authenticate"] == "Bearer"
        error, detail = _detailed_error(mcp)
        assert error["code"] == "unauthorized" and detail == error["message"] and "/mcp" in detail

        # Every path outside the routes belongs to the /mcp mount, which answers 404 (so a
        # wrong method on a route is a 404 too, as it was).
        for path in ("/no/such/route", "/data/populate"):
            missing = client.get(path, headers=auth)
            assert missing.status_code == 404, path
            assert _detailed_error(missing) == ({"code": "not_found", "message": "Not Found"}, "Not Found")

        invalid = client.post("/apps", json={"mcpServers": 5}, headers=auth)
        assert invalid.status_code == 422
        error, detail = _detailed_error(invalid)
        assert error["code"] == "invalid_request" and "mcpServers" in error["message"]
        assert detail == error["errors"] and detail[0]["loc"] == ["body", "mcpServers"]  # FastAPI's list

        atoll_error = client.get("/refuse")
        assert atoll_error.status_code == 400
        message = "the world 'w' is not one of this benchmark's"
        assert _detailed_error(atoll_error) == ({"code": "bad_world", "message": message}, message)

        # A route's HTTPException with Archipelago's {"error", "code", ...}: its details join
        # the error, and detail is what FastAPI answered before.
        bad_subsystem = client.post(
            "/data/populate?subsystem=../x",
            content=b"x",
            headers={**auth, "content-type": "application/gzip"},
        )
        assert bad_subsystem.status_code == 400
        error, detail = _detailed_error(bad_subsystem)
        assert error["code"] == detail["code"] and error["message"] == detail["error"] and "member" in error

        big = client.post(
            "/data/populate",
            content=b"0" * (2 * 1024**2),
            headers={**auth, "content-type": "multipart/form-data; boundary=x"},
        )
        assert big.status_code == 413
        error, detail = _detailed_error(big)
        assert error["code"] == "archive_too_large" == detail["code"] and "larger than" in error["message"]

        unsupported = client.post(
            "/data/populate", content=b"x", headers={**auth, "content-type": "text/plain"}
        )
        assert unsupported.status_code == 415
        error, detail = _detailed_error(unsupported)
        assert error["code"] == "unsupported_media_type" == detail["code"] and "multipart" in error["message"]

        no_destination = client.post("/data/snapshot/s3", json={"storage_options": {}}, headers=auth)
        assert no_destination.status_code == 400, no_destination.text
        error, _ = _detailed_error(no_destination)
        assert error["code"] == "no_snapshot_destination" and "ATOLL_SNAPSHOT_URL_PREFIX" in error["message"]

        # The Host guard (a middleware, before any route) too.
        foreign = client.get("/health", headers={"Host": "evil.example"})
        assert foreign.status_code == 421
        error, detail = _detailed_error(foreign)
        assert error["code"] == "host_not_allowed" and detail == error["message"]


def test_a_body_accepted_only_by_coercion_is_refused_as_its_document_forbids(tmp_path):
    """Found by the property tests: pydantic's lax mode took ``0`` for false and ``"5"`` for 5,
    bodies the OpenAPI documents forbid; the services validate JSON bodies strictly."""
    auth = {"Authorization": "Bearer secret"}
    environment = _environment(tmp_path, env_token="secret", snapshot_url_prefix=(tmp_path / "s").as_uri())
    with TestClient(environment, base_url="http://127.0.0.1") as client:
        for path in ("/data/snapshot/s3/start", "/data/snapshot/s3"):
            coerced = client.post(path, json={"snapshot_zip_enabled": 0}, headers=auth)
            assert coerced.status_code == 422, (path, coerced.text)
            assert coerced.json()["error"]["errors"][0]["loc"] == ["body", "snapshot_zip_enabled"]
        started = client.post("/data/snapshot/s3/start", json={"snapshot_zip_enabled": False}, headers=auth)
        assert started.status_code == 200, started.text
    with TestClient(_apps(tmp_path)["agents"]) as agents:
        run = {"model": "replay", "gateway_url": "http://127.0.0.1:9/mcp", "agent": "replay"}
        for coerced in ({"max_steps": "5"}, {"config": {"stream": 0}}):
            refused = agents.post("/runs", json={**run, **coerced}, headers=auth)
            assert refused.status_code == 422, (coerced, refused.text)
            assert refused.json()["error"]["code"] == "invalid_request"


def test_the_orchestrators_json_bodies_are_strict_too(tmp_path):
    """PATCH /runs/{name} took ``"4"`` for a concurrency of 4, cancel and webhooks the like:
    refused as the document says, before the run is looked up."""
    auth = {"Authorization": "Bearer secret"}
    with TestClient(_apps(tmp_path)["orchestrator"]) as orchestrator:
        for method, path, body in (
            ("PATCH", "/runs/any", {"concurrency": "4"}),
            ("PATCH", "/runs/any", {"concurrency": 4.0}),
            ("POST", "/runs/any/cancel", {"in_flight": 1}),
            ("POST", "/runs/any/webhooks", {"url": 5}),
        ):
            refused = orchestrator.request(method, path, json=body, headers=auth)
            assert refused.status_code == 422, (path, body, refused.text)
            assert refused.json()["error"]["code"] == "invalid_request"
        # A well-typed body goes on to the route, which does not know the run.
        assert orchestrator.patch("/runs/any", json={"concurrency": 4}, headers=auth).status_code == 404
