"""The OpenAPI documents of atoll's four HTTP services, exactly as each app serves them at
``GET /openapi.json``, published in ``docs/schemas/openapi/<service>.json``.

Regenerate them (with the contract schemas) with ``python -m atoll_cli.commands.openapi docs/schemas``;
``tests/atoll/test_openapi.py`` fails, naming that command, when a committed document differs
from what the app serves. The documents do not depend on the settings: each app is built here
on a scratch folder (store, roots) that is deleted afterwards.

The environment's ``/mcp`` is not in its document: it is the MCP Streamable HTTP endpoint (a
JSON-RPC protocol over one path, mounted beside the FastAPI routes), not a REST resource, and
is described and tested by the MCP specification's clients (docs/environment.md).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from atoll.settings import set_default

# The agents runner and grader import litellm: its price map is the packaged one, never fetched.
set_default("LITELLM_LOCAL_MODEL_COST_MAP", "True")

#: The services with a published document, in the order docs/api.md lists them.
SERVICES = ("orchestrator", "environment", "agents_runner", "grader")


def _orchestrator(scratch: Path) -> Any:
    from orchestrator.api import ApiSettings, create_app

    return create_app(
        ApiSettings(
            store=f"sqlite:///{scratch / 'store.db'}",
            artifacts=(scratch / "artifacts").as_uri(),
            output_dir=str(scratch / "output"),
        )
    )


def _environment(scratch: Path) -> Any:
    from environment.app import create_app
    from environment.settings import EnvironmentSettings

    return create_app(
        EnvironmentSettings(
            fs_root=scratch / "filesystem", apps_data_root=scratch / ".apps_data", preload_servers=False
        )
    )


def _agents_runner(_scratch: Path) -> Any:
    from agents_runner.service import create_app
    from agents_runner.settings import AgentRunnerSettings

    return create_app(AgentRunnerSettings())


def _grader(_scratch: Path) -> Any:
    from grader.service import create_app

    return create_app()


_BUILDERS: dict[str, Callable[[Path], Any]] = {
    "orchestrator": _orchestrator,
    "environment": _environment,
    "agents_runner": _agents_runner,
    "grader": _grader,
}


@contextmanager
def service_app(service: str) -> Iterator[Any]:
    """The FastAPI app of ``service`` (one of :data:`SERVICES`) on a scratch folder, which is
    deleted on exit. Raises KeyError naming an unknown service."""
    if service not in _BUILDERS:
        raise KeyError(f"unknown service {service!r}; one of {', '.join(SERVICES)}")
    with tempfile.TemporaryDirectory(prefix=f"atoll-openapi-{service}-") as scratch:
        yield _BUILDERS[service](Path(scratch))


def openapi_document(service: str) -> dict[str, Any]:
    """The OpenAPI document ``service`` serves at ``/openapi.json``."""
    with service_app(service) as app:
        return app.openapi()


def openapi_text(document: dict[str, Any]) -> str:
    """The committed form of a document: sorted keys, two-space indent, one final newline."""
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def render_openapi() -> dict[str, str]:
    """``openapi/<service>.json`` -> its text, for every service."""
    return {f"openapi/{service}.json": openapi_text(openapi_document(service)) for service in SERVICES}


def write_openapi(directory: Path) -> list[Path]:
    """Write every service's document under ``directory/openapi/``; returns the paths."""
    written = []
    for name, text in render_openapi().items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    from atoll.schemas import write_schemas

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")
    for path in [*write_schemas(target), *write_openapi(target)]:
        print(path)
