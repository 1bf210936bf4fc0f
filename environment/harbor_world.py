"""atoll's environment as the ``world`` service of an APEX-Agents v1.1 Harbor task.

``atoll env world`` is the world image's entrypoint (docs/interop.md "The world container"):
it serves the environment on ``$PORT`` (8000; MCP at ``/mcp``), seeds it from the task's world
mounted read-only (``$WORLD_DATA_DIR``: ``filesystem.tar.gz``, ``apps_data.tar.gz``,
``mcp_config.json``) and the task's overlay (``$TASK_FILES_DIR/{filesystem,.apps_data}``),
mounts the world's servers, captures ``initial_snapshot.tar.gz`` in ``$WORLD_LOGS_DIR`` when
``WORLD_CAPTURE_INITIAL_SNAPSHOT=1``, and touches ``.initial_snapshot_done`` (what the task's
compose healthcheck waits for). Every step fails closed: a half-seeded world would grade as a
false zero, so the process exits non-zero instead and Harbor errors the trial.

``atoll env collect-snapshot`` is the ``[[verifier.collect]]`` step: the world's final snapshot
into ``$WORLD_LOGS_DIR/final_snapshot.tar.gz``, published by rename (never half-written).

The control routes (``/data``, ``/apps``) need a token; the agent only reaches ``/mcp``. Unless
``ATOLL_ENV_TOKEN`` is given, one is made at boot and kept in a file only this container's user
reads (``$WORLD_STATE_DIR``), for the collect step.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from atoll.apps import server_for
from atoll.errors import AtollError, ErrorCode
from atoll.settings import EnvironmentTokens, child_environment, secret_text
from atoll.settings import environ as process_environ

SUBSYSTEMS = {"filesystem": "filesystem.tar.gz", ".apps_data": "apps_data.tar.gz"}
READY_MARKER = ".initial_snapshot_done"
INITIAL = "initial_snapshot.tar.gz"
FINAL = "final_snapshot.tar.gz"
WORLD_METADATA_FILES = ("world.json", "metadata.json", "world_description.json")


def _log(message: str) -> None:
    print(f"[atoll world {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _fail(message: str) -> AtollError:
    return AtollError(ErrorCode.world_boot, message)


@dataclass
class WorldSettings:
    """The world container's settings, from the v1.1 compose file's variables."""

    port: int = 8000
    world_dir: Path = Path("/world")
    task_files: Path = Path("/task_files")
    logs: Path = Path("/logs/world")
    capture_initial: bool = False
    state_dir: Path = field(default_factory=lambda: Path.home() / ".atoll-world")
    timeout_s: float = 600.0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WorldSettings:
        env = process_environ() if environ is None else environ
        return cls(
            port=int(env.get("PORT") or 8000),
            world_dir=Path(env.get("WORLD_DATA_DIR") or "/world"),
            task_files=Path(env.get("TASK_FILES_DIR") or "/task_files"),
            logs=Path(env.get("WORLD_LOGS_DIR") or "/logs/world"),
            capture_initial=env.get("WORLD_CAPTURE_INITIAL_SNAPSHOT", "") == "1",
            state_dir=Path(env.get("WORLD_STATE_DIR") or Path.home() / ".atoll-world"),
            timeout_s=float(env.get("WORLD_BOOT_TIMEOUT_SEC") or 600),
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_file(self) -> Path:
        return self.state_dir / "env-token"


def _token(settings: WorldSettings, *, create: bool) -> str:
    given = secret_text(EnvironmentTokens().env_token)
    if given:
        return given
    if create:
        settings.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        handle = os.open(settings.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(handle, "w") as stream:
            stream.write(token)
        return token
    try:
        return settings.token_file.read_text().strip()
    except OSError as exc:
        raise _fail(
            f"no environment token ({settings.token_file}: {exc.strerror}); is the world booted?"
        ) from None


def _client(settings: WorldSettings, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=settings.url, headers={"Authorization": f"Bearer {token}"}, timeout=settings.timeout_s
    )


def _check(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code != 200:
        raise _fail(f"{what} failed: HTTP {response.status_code} {response.text[:500]}")
    return response


def wait_for_health(settings: WorldSettings, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + settings.timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise _fail(
                f"the environment server exited with status {process.returncode} before it was healthy"
            )
        try:
            if httpx.get(f"{settings.url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise _fail(f"the environment server was not healthy within {settings.timeout_s:.0f} s")


def world_servers(world_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """atoll's ``/apps`` body for the world's ``mcp_config.json`` (Archipelago's server names
    mapped to atoll's servers) and the names mapped; a server atoll cannot serve fails closed."""
    path = world_dir / "mcp_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _fail(f"{path}: the world's MCP servers cannot be read ({exc})") from None
    declared = (config or {}).get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(declared, dict) or not declared:
        raise _fail(f"{path}: declares no MCP servers")
    options: dict[str, Any] = {}
    for name in WORLD_METADATA_FILES:
        metadata_path = world_dir / name
        if metadata_path.is_file():
            try:
                metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                metadata = {}
            if isinstance(metadata, dict):
                options = {k: metadata[k] for k in ("user_email", "user_name") if metadata.get(k)}
            break
    servers: dict[str, Any] = {}
    missing = []
    for declared_name in declared:
        server = server_for(declared_name)
        if server is None:
            missing.append(declared_name)
        else:
            servers[server] = {"transport": "inprocess", "server": server, "options": options}
    if missing:
        raise _fail(f"{path}: atoll has no server for {', '.join(sorted(missing))}")
    return {"mcpServers": servers}, sorted(servers)


def seed(settings: WorldSettings, client: httpx.Client) -> None:
    """The world's archives, then the task's overlay (later writes win), populated in place."""
    for subsystem, name in SUBSYSTEMS.items():
        archive = settings.world_dir / name
        if not archive.is_file():
            if subsystem == "filesystem":
                raise _fail(f"missing required world archive {archive}")
            continue
        _log(f"populating {subsystem} from {archive} ({archive.stat().st_size / 1e6:.1f} MB)")
        with archive.open("rb") as stream:
            _check(
                client.post(
                    "/data/populate",
                    params={"subsystem": subsystem, "mode": "merge"},
                    content=stream,
                    headers={"Content-Type": "application/gzip"},
                ),
                f"populate {subsystem}",
            )
    sources = [
        {"url": (settings.task_files / subsystem).resolve().as_uri(), "subsystem": subsystem}
        for subsystem in SUBSYSTEMS
        if (settings.task_files / subsystem).is_dir()
    ]
    if sources:
        _log(f"populating the task overlay: {', '.join(s['subsystem'] for s in sources)}")
        _check(
            client.post("/data/populate", json={"sources": sources, "mode": "merge"}), "populate the overlay"
        )


def save_snapshot(client: httpx.Client, target: Path) -> int:
    """``POST /data/snapshot`` streamed to ``target.partial``, then renamed to ``target``."""
    partial = target.with_name(target.name + ".partial")
    size = 0
    with client.stream("POST", "/data/snapshot") as response:
        if response.status_code != 200:
            response.read()
            raise _fail(f"snapshot failed: HTTP {response.status_code} {response.text[:500]}")
        with partial.open("wb") as stream:
            for chunk in response.iter_bytes(1 << 16):
                stream.write(chunk)
                size += len(chunk)
    partial.replace(target)
    return size


def boot(settings: WorldSettings, token: str) -> None:
    """Seed, mount the servers, capture the initial snapshot when asked, mark ready."""
    with _client(settings, token) as client:
        seed(settings, client)
        body, names = world_servers(settings.world_dir)
        _log(f"mounting {len(names)} MCP server(s): {', '.join(names)}")
        _check(client.post("/apps", json=body), "POST /apps")
        if settings.capture_initial:
            size = save_snapshot(client, settings.logs / INITIAL)
            _log(f"initial snapshot: {size / 1e6:.1f} MB")
    (settings.logs / READY_MARKER).touch()
    _log("world ready")


def clear_stale(logs: Path) -> None:
    """Remove what an earlier container left in a reused log volume: a stale readiness marker
    would let the agent start against an unseeded world."""
    logs.mkdir(parents=True, exist_ok=True)
    for name in (READY_MARKER, INITIAL, FINAL):
        (logs / name).unlink(missing_ok=True)
    for partial in logs.glob("*.partial"):
        partial.unlink(missing_ok=True)


def run_world(settings: WorldSettings, server_command: list[str]) -> int:
    """The entrypoint: start the server, boot the world, then live as long as the server
    (a dead server fails the trial rather than hanging it). Returns the exit status."""
    clear_stale(settings.logs)
    token = _token(settings, create=True)
    env = child_environment(ATOLL_ENV_TOKEN=token)
    env.setdefault("ATOLL_ALLOWED_HOSTS", "world")  # the agent's URL is http://world:8000/mcp
    process = subprocess.Popen(server_command, env=env)

    def stop(signum: int, _frame: Any) -> None:
        process.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    try:
        wait_for_health(settings, process)
        boot(settings, token)
    except (AtollError, httpx.HTTPError) as exc:
        _log(f"ERROR: {getattr(exc, 'message', None) or exc}")
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        return 1
    return process.wait()


def collect(settings: WorldSettings) -> Path:
    """The collect step: the final snapshot into the logs folder; raises AtollError."""
    token = _token(settings, create=False)
    settings.logs.mkdir(parents=True, exist_ok=True)
    with _client(settings, token) as client:
        size = save_snapshot(client, settings.logs / FINAL)
    _log(f"final snapshot: {size / 1e6:.1f} MB")
    return settings.logs / FINAL
