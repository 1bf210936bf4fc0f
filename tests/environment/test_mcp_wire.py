"""The lean path's remembered request verdicts (environment.mcp_wire.request_is_valid) are the
SDK validator's own, for every protocol version it knows."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import methods as mcp_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from environment.mcp_wire import HOT_METHODS, request_is_valid

VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL_VERSIONS[0],
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_every_version_types_arguments_as_an_object_or_null() -> None:
    """What remembering a verdict relies on: only whether ``arguments`` is absent, null or an
    object can change it, never what the object holds."""
    typed = 0
    for method in HOT_METHODS:
        for version in VERSIONS:
            params_model = mcp_methods.CLIENT_REQUESTS[(method, version)].model_fields["params"].annotation
            params_model = next(
                (arg for arg in getattr(params_model, "__args__", (params_model,)) if arg is not type(None)),
                params_model,
            )
            field = params_model.model_fields.get("arguments")
            if field is not None:
                assert field.annotation == dict[str, Any] | None, (method, version, field.annotation)
                typed += 1
    assert typed == len(VERSIONS)  # tools/call declares it on every version


def _sdk_accepts(method: str, version: str, params: dict[str, Any]) -> bool:
    try:
        mcp_methods.validate_client_request(method, version, params)
    except Exception:
        return False
    return True


def _params(version: str) -> list[tuple[str, dict[str, Any]]]:
    meta = {"_meta": _ENVELOPE} if version in MODERN_PROTOCOL_VERSIONS else {}
    call = {"name": "filesystem_list_files", **meta}
    return [
        ("tools/call", {**call, "arguments": {"path": "/Reports"}}),
        ("tools/call", {**call, "arguments": {"path": "/Other", "limit": 3, "deep": {"x": [1, None]}}}),
        ("tools/call", {**call, "arguments": None}),
        ("tools/call", dict(call)),
        ("tools/call", {**call, "arguments": ["not", "an", "object"]}),
        ("tools/call", {**call, "arguments": "text"}),
        ("tools/call", {**meta, "name": 7, "arguments": {"path": "/"}}),
        ("tools/call", {**meta, "arguments": {"path": "/"}}),
        ("tools/call", {**call, "_meta": {"progressToken": {"bad": "token"}}, "arguments": {}}),
        ("tools/call", {**call, "_meta": {"progressToken": "p1"}, "arguments": {}}),
        ("tools/list", dict(meta)),
        ("tools/list", {**meta, "arguments": {"ignored": True}}),
        ("tools/list", {}),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_remembered_verdicts_are_the_sdk_validators(version: str) -> None:
    for _ in range(2):  # the second pass answers from what the first remembered
        for method, params in _params(version):
            assert request_is_valid(method, version, params) == _sdk_accepts(method, version, params), (
                method,
                params,
            )
