"""OpenTelemetry traces (atoll.telemetry, docs/interop.md "OpenTelemetry"): a real trial with an
OTLP endpoint set exports one trace to a real OTLP/HTTP receiver started here, which decodes the
protobuf it is sent; with no endpoint set, nothing of the SDK is imported and no span is made.

The trial runs in a fresh interpreter (the variables are read at start, as an operator sets them)
against an environment served by ``atoll env serve`` in another process, with the agents runner
and the grader as HTTP services, so the trace crosses processes and every HTTP hop: the ReAct
agent's model and the judge are the scripted OpenAI-compatible server, reached through litellm's
real OpenAI provider."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from atoll.testing.loopback import LoopbackHandler, serve_on_loopback
from atoll.testing.scripted_llm import ScriptedLLM
from tests.fresh_interpreter import run_fresh
from tests.shared_sample import fresh_sample_benchmark

ATOLL = str(Path(sys.executable).parent / "atoll")
TASK = "keystone-01-packaging-baseline"
AGENT_USAGE = {"prompt_tokens": 1200, "completion_tokens": 30}
MET = {
    "content": json.dumps({"rationale": "the answer states the figures", "verdict": "met"}),
    "usage": {"prompt_tokens": 700, "completion_tokens": 12},
}


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: decodes every ExportTraceServiceRequest posted
    to ``/v1/traces`` into plain span records (with the sender's ``service.name``)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(LoopbackHandler):
            def do_POST(self) -> None:
                body = self.read_body()
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_bytes(404, b"", "text/plain", {})
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(request)
                self.send_bytes(
                    200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf", {}
                )

        self.server, self.thread = serve_on_loopback(Handler, "otlp-receiver")
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    record = {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_id": span.parent_span_id.hex() or None,
                        "kind": span.kind,
                        "service": resource.get("service.name"),
                        "attributes": {item.key: _value(item.value) for item in span.attributes},
                    }
                    with self.lock:
                        self.spans.append(record)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve_environment(root: Path, environ: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    process = subprocess.Popen(
        [ATOLL, "env", "serve", "--port", str(port), "--fs-root", str(root / "fs")]
        + ["--apps-data-root", str(root / "apps")],
        env={**environ, "ATOLL_PRELOAD_SERVERS": "false", "ATOLL_LOG_LEVEL": "WARNING"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return process, f"http://127.0.0.1:{port}"


#: Runs the experiment given as JSON in argv[1] (its judge's endpoint in argv[2]) with the local
#: executor in this fresh interpreter, so the OTEL_* variables it was started with decide: the
#: agents runner and the grader are services served here over HTTP (the executor reaches them as
#: it reaches deployed ones), the environment is another process, waited for (it starts
#: meanwhile). Reports the outcomes.
RUN_PROBE = """
import asyncio, json, os, sys
import httpx
from agents_runner.service import create_app as agents_runner_app
from atoll.experiment import ExperimentSpec
from atoll.judge import JudgeConfig
from grader.service import create_app as grader_app
from orchestrator.executors.steps import wait_until_healthy
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.served_app import ServedApp

async def main():
    async with httpx.AsyncClient() as http:
        await wait_until_healthy(http, os.environ["ATOLL_ENVIRONMENT_URLS"], timeout_s=120)
    await run_experiment(spec, quiet=True)

spec = ExperimentSpec.model_validate(json.loads(sys.argv[1]))
judge = JudgeConfig(model="openai/judge", api_base=sys.argv[2])
with ServedApp(agents_runner_app()) as runner, ServedApp(grader_app(judge)) as grader:
    os.environ.update(ATOLL_AGENTS_RUNNER_URL=runner.url, ATOLL_GRADER_URL=grader.url)
    asyncio.run(main())
results = TrialStore(spec.store).results(spec.name)
print(json.dumps({"outcomes": [result.outcome.value for _s, result, _state, _a in results], "errors": [result.error for _s, result, _state, _a in results]}))
"""


@pytest.fixture(scope="module")
def traced_trial(tmp_path_factory) -> dict[str, Any]:
    """One trial of the sample benchmark run with OTLP on: the spans the receiver decoded."""
    root = tmp_path_factory.mktemp("traced")
    benchmark = fresh_sample_benchmark(root / "bench")
    task = next(
        t for t in json.loads((benchmark / "tasks_and_rubrics.json").read_text()) if t["task_id"] == TASK
    )
    receiver = OtlpReceiver()
    environ = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # milliseconds: spans leave promptly
    }
    environ.pop("OTEL_SDK_DISABLED", None)
    environment, environment_url = _serve_environment(root / "env", environ)

    moves = [
        {"name": "toolbelt_add_tool", "arguments": {"tool_name": "filesystem_list_files"}},
        {"name": "filesystem_list_files", "arguments": {"path": "/"}},
        {"name": "final_answer", "arguments": {"answer": task["gold_response"], "status": "completed"}},
    ]

    def agent_model(request: dict[str, Any]) -> dict[str, Any]:
        step = sum(1 for message in request["messages"] if message["role"] == "assistant")
        return {"tool_calls": [moves[step]], "usage": AGENT_USAGE}

    try:
        with ScriptedLLM(agent_model) as model, ScriptedLLM(lambda request: MET) as judge:
            spec = {
                "name": "traced",
                "benchmark": str(benchmark),
                "tasks": {"ids": [TASK]},
                "agents": [
                    {
                        "name": "react",
                        "agent": "react_toolbelt",
                        "model": "openai/scripted",
                        "api_base": model.api_base,
                        "config": {"max_steps": 5},
                    }
                ],
                "judge": {"model": "openai/judge", "api_base": judge.api_base},
                "store": str(root / "store.db"),
                "artifacts": (root / "artifacts").as_uri(),
                "output_dir": str(root / "out"),
            }
            probe_environ = {
                **environ,
                "ATOLL_ENVIRONMENT_URLS": environment_url,
                "OTEL_SERVICE_NAME": "atoll",  # one process serves the runner and the grader too
                # the runner's and the grader's operator trusts the scripted models (no key sent)
                "ATOLL_KEY_ENDPOINTS": f"openai={model.api_base},openai={judge.api_base}",
            }
            report, _ = run_fresh(RUN_PROBE, json.dumps(spec), judge.api_base, env=probe_environ)
            judged = len(judge.requests)
    finally:
        environment.terminate()  # uvicorn shuts down, exporting what it buffered, then exits
        _, stderr = environment.communicate(timeout=30)
        receiver.close()
    assert environment.returncode in (0, -15), stderr.decode()[-3000:]
    return {
        "outcomes": report["outcomes"],
        "errors": report["errors"],
        "judged": judged,
        "spans": list(receiver.spans),
    }


def _one(spans: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [span for span in spans if all(span.get(key) == value for key, value in match.items())]
    assert len(found) == 1, (match, [(s["name"], s["service"]) for s in spans])
    return found[0]


def _ancestors(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[str]:
    names = []
    while span["parent_id"] is not None:
        span = by_id[span["parent_id"]]  # a missing parent fails the test: the chain is broken
        names.append(span["name"])
    return names


def test_a_trial_is_one_trace_with_genai_spans_from_the_orchestrator_and_the_environment(traced_trial):
    assert traced_trial["outcomes"] == ["pass"], traced_trial["errors"]
    assert traced_trial["judged"] >= 1
    spans = traced_trial["spans"]
    by_id = {span["span_id"]: span for span in spans}
    trial = _one(spans, name="trial")
    assert trial["parent_id"] is None and trial["service"] == "atoll"
    assert trial["attributes"]["atoll.task.id"] == TASK and trial["attributes"]["atoll.outcome"] == "pass"
    ours = [span for span in spans if span["service"] in ("atoll", "atoll-environment")]
    # one trace per trial: every span of both processes (MCP's own spans included) is in it
    others = [
        (s["name"], s["service"], s["parent_id"], s["attributes"])
        for s in spans
        if s["trace_id"] != trial["trace_id"]
    ]
    assert others == [], others

    agent = _one(spans, name="invoke_agent react_toolbelt")
    # the executor's POST /runs to the agents runner carried the trace to the runner's server span
    assert _ancestors(agent, by_id) == ["POST /runs", "trial"]
    assert by_id[agent["parent_id"]]["kind"] == 2  # SPAN_KIND_SERVER
    assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert agent["attributes"]["gen_ai.agent.name"] == "react_toolbelt"
    assert agent["attributes"]["gen_ai.request.model"] == "scripted"
    assert agent["attributes"]["gen_ai.usage.input_tokens"] == 3 * AGENT_USAGE["prompt_tokens"]

    chats = [span for span in ours if span["name"].startswith("chat ")]
    agent_chats = [span for span in chats if span["attributes"]["atoll.role"] == "agent"]
    assert [span["name"] for span in agent_chats] == ["chat scripted"] * 3
    for span in agent_chats:
        assert span["parent_id"] == agent["span_id"] and span["kind"] == 3  # SPAN_KIND_CLIENT
        attributes = span["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == "scripted"
        assert attributes["gen_ai.response.model"].endswith("scripted")
        assert attributes["gen_ai.usage.input_tokens"] == AGENT_USAGE["prompt_tokens"]
        assert attributes["gen_ai.usage.output_tokens"] == AGENT_USAGE["completion_tokens"]
        assert attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
        assert attributes["server.address"] == "127.0.0.1"
    judge_chats = [span for span in chats if span["name"] == "chat judge"]
    assert len(judge_chats) == traced_trial["judged"]  # one span per judge call
    for judge in judge_chats:
        assert judge["attributes"]["atoll.role"] == "judge"
        assert judge["attributes"]["gen_ai.usage.output_tokens"] == MET["usage"]["completion_tokens"]
        assert judge["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
        assert _ancestors(judge, by_id)[-2:] == ["POST /grade", "trial"]  # in the grading service

    # the tool call: the agent's execute_tool span, and the environment's gateway span under it
    caller = _one(ours, name="execute_tool filesystem_list_files", service="atoll")
    assert caller["parent_id"] == agent["span_id"]
    assert caller["attributes"]["gen_ai.tool.name"] == "filesystem_list_files"
    assert caller["attributes"]["gen_ai.tool.call.id"]
    assert caller["attributes"]["mcp.method.name"] == "tools/call"
    gateway = _one(ours, name="execute_tool filesystem_list_files", service="atoll-environment")
    assert gateway["attributes"]["gen_ai.tool.name"] == "filesystem_list_files"
    assert gateway["attributes"]["atoll.mcp.server"] == "filesystem"
    chain = _ancestors(gateway, by_id)
    assert chain[-4:] == [
        "execute_tool filesystem_list_files",
        "invoke_agent react_toolbelt",
        "POST /runs",
        "trial",
    ]

    # the executor's HTTP calls to the environment carried the trace: its server spans are there
    served = {span["name"] for span in spans if span["service"] == "atoll-environment" and span["kind"] == 2}
    assert {"POST /data/populate", "POST /apps"} <= served
    populate = next(span for span in spans if span["name"] == "POST /data/populate")
    assert (
        "trial" in _ancestors(populate, by_id) and populate["attributes"]["http.response.status_code"] == 200
    )


#: With no OTLP endpoint: the services' apps and hooks, then what loaded (litellm, which the
#: model-call hook sits beside, is left out: its import alone costs seconds; see the next test).
OFF_PROBE = """
import json, sys
from atoll import telemetry
import environment.app, environment.gateway, orchestrator.scheduler
from opentelemetry import trace

async def tool(arguments):
    return arguments

app = environment.app.create_app()
with telemetry.span("trial") as current:
    made = current
print(json.dumps({
    "enabled": telemetry.ENABLED,
    "span": repr(made),
    "same_tool": telemetry.traced_tool(tool, tool="t", server="s") is tool,
    "hooks": telemetry.httpx_hooks(),
    "provider": type(trace.get_tracer_provider()).__name__,
    "sdk": sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))),
}))
"""


def test_with_no_endpoint_no_sdk_is_imported_and_no_span_is_made(tmp_path):
    # run_fresh passes this process's variables on: it sets no OTEL_* variable of its own
    assert not any(key.startswith("OTEL_EXPORTER_OTLP") for key in os.environ)
    roots = {"ATOLL_FS_ROOT": str(tmp_path / "fs"), "ATOLL_APPS_DATA_ROOT": str(tmp_path / "apps")}
    report, _ = run_fresh(OFF_PROBE, env=roots)
    assert report == {
        "enabled": False,
        "span": "None",
        "same_tool": True,
        "hooks": {},
        "provider": "ProxyTracerProvider",
        "sdk": [],
    }


#: An endpoint set where the SDK cannot be imported (as without the otel extra).
NO_SDK_PROBE = """
import json, logging, sys
sys.modules["opentelemetry.sdk"] = None  # what an environment without the SDK gives
records = []
logging.getLogger("atoll.telemetry").addHandler(logging.Handler())
logging.getLogger("atoll.telemetry").handlers[0].emit = records.append
from atoll import telemetry
with telemetry.span("trial") as current:
    made = current
print(json.dumps({"before": telemetry.wanted(), "enabled": telemetry.ENABLED, "span": repr(made),
                  "warnings": [record.getMessage() for record in records]}))
"""


def test_an_endpoint_without_the_sdk_installed_is_one_warning_and_no_traces():
    report, _ = run_fresh(NO_SDK_PROBE, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert report["before"] is True and report["enabled"] is False and report["span"] == "None"
    (warning,) = report["warnings"]
    assert "OpenTelemetry SDK is not installed" in warning and "atoll[otel]" in warning


def test_with_no_endpoint_a_model_call_makes_no_span_and_loads_no_sdk():
    """In this process (no OTEL_* variable set, so traces are off): a real model call."""
    from opentelemetry import trace

    from atoll import telemetry
    from atoll.llm import Endpoint, complete

    assert telemetry.ENABLED is False
    with ScriptedLLM([{"content": "hello", "usage": AGENT_USAGE}]) as model:
        done = asyncio.run(
            complete(Endpoint("openai/scripted", model.api_base), [{"role": "user", "content": "hi"}])
        )
    assert done.text == "hello" and done.prompt_tokens == AGENT_USAGE["prompt_tokens"]
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"  # nothing installed
    assert not [m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))]


def test_the_endpoint_variables_decide_and_the_sdk_switch_wins():
    from atoll.telemetry import wanted

    assert not wanted({})
    assert not wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "})
    assert wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"})


def test_a_tool_name_and_call_id_from_the_model_are_cut_before_they_reach_a_span():
    from atoll.telemetry import MAX_TEXT, tool_span_fields

    name, attributes = tool_span_fields(
        "x" * 100_000, call_id="c" * 100_000, gateway_url="http://env:8080/mcp"
    )
    assert len(name) == len("execute_tool ") + MAX_TEXT and name.endswith("…")
    assert (
        len(attributes["gen_ai.tool.name"]) == MAX_TEXT and len(attributes["gen_ai.tool.call.id"]) == MAX_TEXT
    )
    assert (attributes["server.address"], attributes["server.port"]) == ("env", 8080)
    name, attributes = tool_span_fields("mail_search_mail", call_id="call_1")
    assert name == "execute_tool mail_search_mail" and attributes["gen_ai.tool.call.id"] == "call_1"
