"""A long react_toolbelt trial for the checkpoint tests: the scripted model adds the mail tool,
sends one mail (subject :data:`SUBJECT`) early, then lists files for many steps and answers.
Its step is read from the request (the assistant turns in it), so a resumed run that sends the
checkpoint's context gets the same next reply."""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from typing import Any

from atoll.experiment import ExperimentSpec
from tests.shared_sample import fresh_sample_benchmark

TASK = "keystone-01-packaging-baseline"
SUBJECT = "Checkpoint canary 7f3a"


class StepModel:
    """The script, counting the requests of each step (``requests[step]``)."""

    def __init__(self, steps: int, *, delay_s: float = 0.0, slow_from: int | None = None) -> None:
        self.steps = steps
        self.delay_s = delay_s
        self.slow_from = slow_from
        self.requests: collections.Counter[int] = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        step = sum(1 for message in request["messages"] if message["role"] == "assistant") + 1
        if not _preflight(request):  # a worker checks the endpoint before its first trial
            with self.lock:
                self.requests[step] += 1
        if step == 1:
            call = {"name": "toolbelt_add_tool", "arguments": {"tool_name": "mail_send_mail"}}
        elif step == 2:
            call = {
                "name": "mail_send_mail",
                "arguments": {"to_email": "cfo@example.com", "subject": SUBJECT, "body": "HX-40917-Q"},
            }
        elif step < self.steps:
            call = {"name": "filesystem_list_files", "arguments": {"path": "/"}}
        else:
            call = {"name": "final_answer", "arguments": {"answer": "done", "status": "completed"}}
        delay = self.delay_s if self.slow_from is None or step >= self.slow_from else 0.0
        return {"tool_calls": [{**call, "id": f"s{step}"}], "delay_s": delay}


def _preflight(request: dict[str, Any]) -> bool:
    from atoll.llm.preflight import AGENT_MESSAGES

    probes = {str(message["content"]) for message in AGENT_MESSAGES} | {"Reply with the word ok."}
    return any(str(message.get("content")) in probes for message in request["messages"])


def experiment(tmp_path: Path, api_base: str, *, steps: int, **extra: Any) -> dict[str, Any]:
    """The experiment (as a dict) of one such trial, programmatic checks only."""
    return {
        "name": "ckpt",
        "benchmark": str(fresh_sample_benchmark(tmp_path / "bench")),
        "tasks": {"ids": [TASK]},
        "agents": [
            {
                "name": "react",
                "agent": "react_toolbelt",
                "model": "openai/scripted",
                "api_base": api_base,
                "config": {"max_steps": steps + 5},
            }
        ],
        "judge": {"model": None},
        "store": str(tmp_path / "store.db"),
        "artifacts": (tmp_path / "artifacts").as_uri(),
        "output_dir": str(tmp_path / "out"),
        **extra,
    }


def spec(tmp_path: Path, api_base: str, *, steps: int, **extra: Any) -> ExperimentSpec:
    return ExperimentSpec.model_validate(experiment(tmp_path, api_base, steps=steps, **extra))
