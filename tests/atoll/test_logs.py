"""Logs of every command and service: readable lines on a terminal, JSON lines with
--json-logs or when stderr is not a terminal (atoll.logs, wired into serving.serve_app)."""

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from atoll.logs import HANDLER_NAME, configure_logging


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch):
    monkeypatch.delenv("ATOLL_JSON_LOGS", raising=False)
    levels = {name: logging.getLogger(name).level for name in ("", "orchestrator", "uvicorn")}
    yield
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if h.get_name() != HANDLER_NAME]
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_a_terminal_gets_readable_lines_and_anything_else_json():
    terminal = _Terminal()
    assert configure_logging("INFO", stream=terminal) is False
    logging.getLogger("orchestrator.scheduler").warning("run %s: stopping", "exp")
    line = terminal.getvalue().rstrip()
    assert line.endswith(" WARNING orchestrator.scheduler: run exp: stopping") and not line.startswith("{")

    pipe = io.StringIO()
    assert configure_logging("INFO", stream=pipe) is True
    logging.getLogger("grader.judge").info("judged", extra={"criterion": "c1"})
    entry = json.loads(pipe.getvalue())
    assert entry["message"] == "judged" and entry["level"] == "info" and entry["criterion"] == "c1"
    assert terminal.getvalue().count("\n") == 1  # the handler was replaced, not added


def test_json_logs_and_the_environment_variable_force_json_on_a_terminal(monkeypatch):
    terminal = _Terminal()
    assert configure_logging("INFO", json_logs=True, stream=terminal) is True
    monkeypatch.setenv("ATOLL_JSON_LOGS", "1")
    assert configure_logging("INFO", stream=terminal) is True
    assert configure_logging("INFO", json_logs=False, stream=io.StringIO()) is False


def test_other_libraries_log_warnings_only_atolls_own_loggers_follow_the_level():
    pipe = io.StringIO()
    configure_logging("INFO", stream=pipe)
    logging.getLogger("httpx").info("HTTP Request: POST …")
    logging.getLogger("httpx").warning("retrying")
    logging.getLogger("orchestrator").info("leased 3")
    assert [json.loads(line)["message"] for line in pipe.getvalue().splitlines()] == ["retrying", "leased 3"]


SERVICE = textwrap.dedent("""
    import logging
    from fastapi import FastAPI
    from atoll.serving import serve_app

    app = FastAPI()

    @app.get("/work")
    def work():
        logging.getLogger("orchestrator.demo").warning("worked", extra={"items": 3})
        return {}

    serve_app(app, service="demo", host="127.0.0.1", port=0, log_level="info", json_logs={json_logs})
""")


def _serve(json_logs, stderr):
    return subprocess.Popen(
        [sys.executable, "-c", SERVICE.replace("{json_logs}", json_logs)],
        stderr=stderr,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _work_then_stop(server, read_line):
    listening = read_line()
    while "listening on" not in listening:  # uvicorn's own startup lines come first
        listening = read_line()
    url = listening.split("listening on ", 1)[1].strip()
    assert httpx.get(f"{url}/work", timeout=30).status_code == 200
    lines = []
    deadline = time.monotonic() + 60
    while not any("/work" in line for line in lines) and time.monotonic() < deadline:
        lines.append(read_line())
    server.terminate()
    server.wait(30)
    return listening, lines


def test_a_service_logs_json_lines_to_a_pipe_uvicorns_too():
    server = _serve("None", subprocess.PIPE)
    try:
        listening, lines = _work_then_stop(server, server.stderr.readline)
    finally:
        server.kill()
    assert listening.startswith("demo listening on http://127.0.0.1:")
    entries = [json.loads(line) for line in lines if line.strip()]
    assert {"logger": "orchestrator.demo", "message": "worked", "items": 3}.items() <= next(
        e for e in entries if e["logger"] == "orchestrator.demo"
    ).items()
    assert any(e["logger"] == "uvicorn.access" and "/work" in e["message"] for e in entries)


def test_a_service_logs_readable_lines_on_a_terminal():
    primary, secondary = os.openpty()
    server = _serve("None", secondary)
    os.close(secondary)
    reader = os.fdopen(primary, "r", encoding="utf-8", errors="replace")
    try:
        listening, lines = _work_then_stop(server, reader.readline)
    finally:
        server.kill()
        reader.close()
    assert "demo listening on http://127.0.0.1:" in listening
    worked = next(line for line in lines if "worked" in line)
    assert " WARNING orchestrator.demo: worked" in worked and not worked.lstrip().startswith("{")
