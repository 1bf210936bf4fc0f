"""`atoll run` end to end against the provider emulators (tests/providers/), thinking on.

The whole path a user takes: the experiment file, `atoll run` (the console entry point, in
process), the preflight of each agent and the judge, the local executor with the sample
benchmark's real world, the react_toolbelt agent, the real grader and the report. Each provider
emulator is both the agent's and the judge's model, through litellm's real provider code:
Claude Opus 4.5 (Anthropic Messages), Gemini 3 Flash with the thought signature outside the
tool-call id, GPT-5.2 on Chat Completions with a gpt-5 judge at its defaults, GPT-5.2 Pro on the
Responses API; each streamed and not, one agent summarising its context mid-run. The emulators
refuse what their provider refuses and record the silent degradations (placeholder signatures,
dropped reasoning items), so a run that completes here sent each provider its state back.
Also: running the experiment again resumes it (an interrupted trial runs again, finished ones
are kept), and a misconfigured agent or judge stops `atoll run` in seconds, exit status 2, with
the provider's own words, the model and the endpoint.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from orchestrator.store import TrialStore
from tests.shared_sample import fresh_sample_benchmark

pytestmark = pytest.mark.slow

TASK = "keystone-01-packaging-baseline"
CLAUDE = "anthropic/claude-opus-4-5-20251101"
GEMINI_FLASH = "gemini/gemini-3-flash-preview"
GPT_52 = "openai/gpt-5.2"
GPT_52_PRO = "openai/gpt-5.2-pro"  # litellm sends it to the Responses API
# Billed usage the emulators report on every answer (each provider's native keys are mapped by
# the emulator): the cached input and the reasoning must reach the results and the report.
CACHED, REASONING = 128, 64
# Markers of the three kinds of request a run makes (grader/evidence.py, agents_runner/summarize.py).
JUDGE_MARK, SUMMARY_MARK = "CRITERION", "compress the working history"
COMPACTED_MARK = "earlier messages were compacted"


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return fresh_sample_benchmark(tmp_path_factory.mktemp("bench"))


@pytest.fixture(scope="module")
def gold(bench) -> str:
    tasks = json.loads((bench / "tasks_and_rubrics.json").read_text())
    return next(t["gold_response"] for t in tasks if t["task_id"] == TASK)


@pytest.fixture(autouse=True)
def provider_keys(monkeypatch):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(variable, "test")


def _tool_results(body: dict[str, Any]) -> int:
    """Tool results in a request, in each provider's wire form."""
    if "contents" in body:  # Gemini (litellm sends snake_case proto names)
        parts = [p for c in body["contents"] for p in c.get("parts", [])]
        return sum("function_response" in p or "functionResponse" in p for p in parts)
    if "input" in body:  # OpenAI Responses
        return sum(item.get("type") == "function_call_output" for item in body["input"])
    blocks = [b for m in body["messages"] if isinstance(m.get("content"), list) for b in m["content"]]
    return sum(m.get("role") == "tool" for m in body["messages"]) + sum(  # OpenAI Chat, Anthropic
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
    )


# Each provider's own usage keys for the cached input and the reasoning (merged by the emulator
# over its estimate); Claude's reasoning count is litellm's estimate from the thinking text.
NATIVE_USAGE = {
    "anthropic": {"cache_read_input_tokens": CACHED},
    "gemini": {"cachedContentTokenCount": CACHED, "thoughtsTokenCount": REASONING},
    "chat": {
        "prompt_tokens_details": {"cached_tokens": CACHED},
        "completion_tokens_details": {"reasoning_tokens": REASONING},
    },
    "responses": {
        "input_tokens_details": {"cached_tokens": CACHED},
        "output_tokens_details": {"reasoning_tokens": REASONING},
    },
}


def _script(
    gold: str, usage: dict[str, Any], *, steps: int = 1, **turn: Any
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The model of a whole run: a verdict for the judge, a summary when asked to compact, and
    for the agent ``steps`` tool calls on the sample world (listing its files; each with
    ``turn``'s extra script keys) before the gold answer: react_toolbelt's final_answer call, or
    the loop agent's plain reply."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(body)
        if JUDGE_MARK in text:
            verdict = {"rationale": "The answer states the baseline figures.", "verdict": "met"}
            return {"thinking": "Compare with the criterion.", "content": json.dumps(verdict), "usage": usage}
        if SUMMARY_MARK in text:
            return {"thinking": "Summarise.", "content": "Listed the world's files; the answer is next."}
        # a summarised context has lost its tool results: the summary counts as the work done
        done = steps if COMPACTED_MARK in text else _tool_results(body)
        if done < steps:
            return {
                "thinking": f"Look at the files first ({done}).",
                "content": "Listing the files.",
                "tool_calls": [{"name": "filesystem_list_files", "arguments": {"path": "/"}}],
                "usage": usage,
                **turn,
            }
        if '"final_answer"' not in json.dumps(body.get("tools")):  # the loop agent
            return {"thinking": "I have what I need.", "content": gold, "usage": usage}
        return {
            "thinking": "I have what I need.",
            "tool_calls": [{"name": "final_answer", "arguments": {"answer": gold, "status": "completed"}}],
            "usage": usage,
        }

    return answer


def _agent(name: str, model: str, api_base: str, **config: Any) -> dict[str, Any]:
    extra = config.pop("extra_args", None)
    agent = {
        "name": name,
        "agent": "react_toolbelt",
        "model": model,
        "api_base": api_base,
        "thinking": "high",
        "config": {"max_steps": 30, "initial_toolbelt": ["filesystem_list_files"], **config},
    }
    if extra:
        agent["config"]["extra_args"] = extra
    return agent


def _experiment(tmp_path: Path, bench: Path, name: str, agents: list[dict], judge: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    spec = {
        "name": name,
        "benchmark": str(bench),
        "tasks": {"ids": [TASK]},
        "agents": agents,
        "judge": judge,
        "executor": "local",
        "store": str(tmp_path / "store.db"),
        "artifacts": (tmp_path / "artifacts").as_uri(),
        "output_dir": str(tmp_path / "out"),
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _atoll(capsys, *argv: str) -> tuple[int, str, str, float]:
    """`atoll ARGV` through the console entry point: (exit status, stdout, stderr, seconds)."""
    from atoll_cli.cli import main

    capsys.readouterr()
    saved, sys.argv = sys.argv, ["atoll", *argv]
    started = time.monotonic()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved
    out, err = capsys.readouterr()
    return code, out, err, time.monotonic() - started


def _results(tmp_path: Path, run: str) -> dict[str, Any]:
    store = TrialStore(str(tmp_path / "store.db"))
    try:
        return {spec.agent_name: result for spec, result, _state, _a in store.results(run)}
    finally:
        store.dispose()


def _assert_completed_and_graded(tmp_path: Path, run: str, agents: list[str]) -> dict[str, Any]:
    results = _results(tmp_path, run)
    assert set(results) == set(agents)
    for name, result in results.items():
        assert result.outcome.value == "pass", (name, result.outcome, result.run_status, result.error)
        assert result.run_status == "completed", (name, result.error)
        assert result.criteria_total == 2 and result.criteria_ungradeable == 0, name
        # the provider's billed reasoning and cached tokens, the agent's and the judge's (litellm
        # estimates Claude's reasoning from the thinking text: only > 0 holds for every provider)
        assert result.reasoning_tokens > 0 and result.cached_tokens >= CACHED, name
    # the judge's too, summed: a verdict the grader's cache already held costs nothing again
    assert sum(r.judge_reasoning_tokens for r in results.values()) > 0
    assert sum(r.judge_cached_tokens for r in results.values()) >= CACHED
    report = json.loads((tmp_path / "out" / run / "report.json").read_text())
    for name in agents:
        usage = report["agents"][name]
        assert usage["reasoning_tokens"] == results[name].reasoning_tokens, name
        assert usage["cached_tokens"] == results[name].cached_tokens, name
    table = (tmp_path / "out" / run / "report.md").read_text()
    for name, result in results.items():
        shown = f"({result.reasoning_tokens} reasoning, {result.cached_tokens} cached)"
        assert any(f"| {name} |" in row and shown in row for row in table.splitlines()), (name, shown)
    return results


def _without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


# --- the runs ------------------------------------------------------------------------------


def test_claude_opus_with_thinking_runs_and_judges_against_anthropic(
    tmp_path, bench, gold, anthropic, capsys
):
    anthropic.reset()
    # an opaque redacted_thinking block after the thinking one: it goes back too, data unchanged
    anthropic.load(_script(gold, NATIVE_USAGE["anthropic"], steps=3, redacted_thinking=True))
    agents = [
        _agent("claude", CLAUDE, anthropic.api_base),
        _agent("claude-stream", CLAUDE, anthropic.api_base, stream=True),
        # a tiny window: the context passes it after the first tool results and is summarised
        _agent("claude-compact", CLAUDE, anthropic.api_base, context_window=1000, keep_last_messages=2),
        {**_agent("claude-loop", CLAUDE, anthropic.api_base, stream=True), "agent": "loop"},
    ]
    judge = {"model": CLAUDE, "api_base": anthropic.api_base, "thinking": "high"}
    path = _experiment(tmp_path, bench, "claude", agents, judge)
    code, out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 0, err
    assert anthropic.rejections == []
    results = _assert_completed_and_graded(tmp_path, "claude", [a["name"] for a in agents])
    assert results["claude-compact"].steps >= 2
    assert results["claude-loop"].tool_calls == 3  # the loop agent used the world's tool too
    bodies = anthropic.requests
    # every agent turn after the first went back with its signed thinking block first
    for body in bodies:
        for message in body["messages"]:
            if message["role"] == "assistant" and isinstance(message["content"], list):
                assert message["content"][0]["type"] == "thinking", message
    _assert_summarised_mid_run(bodies)
    # the preflight tried the run's exact calls: thinking budget, max_tokens, streaming
    _assert_preflight_exact(bodies, 3, ("messages", "tools", "system"))
    assert any(
        block["type"] == "redacted_thinking"
        for body in bodies
        for message in body["messages"]
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
    )
    # running it again resumes: every trial is done, so no model is called, preflight included
    anthropic.reset()
    code, out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 0, err
    assert "4 of 4 trials done: 0 run now, 4 already done" in out
    assert anthropic.requests == []


def _assert_summarised_mid_run(bodies: list[dict[str, Any]]) -> None:
    """A summary was asked for after a tool result, and the run went on with the summary."""
    texts = [json.dumps(b) for b in bodies]
    asked = [i for i, text in enumerate(texts) if SUMMARY_MARK in text]
    assert asked, "the context was never summarised"
    assert any(COMPACTED_MARK in text and JUDGE_MARK not in text for text in texts[asked[0] :])


def _assert_preflight_exact(bodies: list[dict[str, Any]], preflight: int, varying: tuple[str, ...]) -> None:
    """The first ``preflight`` requests (the preflight's: one per distinct agent call, one
    verdict) carry exactly the arguments of a call the run itself made: everything but the
    conversation and the tool list (the preflight offers one tool of the gateway's shape)."""

    def arguments(body: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in body.items() if k not in varying}, sort_keys=True)

    tried, made = bodies[:preflight], bodies[preflight:]
    assert sum(JUDGE_MARK in json.dumps(b) for b in tried) == 1
    made_arguments = {arguments(b) for b in made if SUMMARY_MARK not in json.dumps(b)}
    for body in tried:
        assert arguments(body) in made_arguments, arguments(body)


def test_gemini_3_flash_with_thinking_runs_and_judges_in_both_signature_modes(
    tmp_path, bench, gold, gemini, capsys
):
    """litellm keeps Gemini 3's thought signature in the tool-call id by default; with
    ``thought_signature_in_tool_call_id: false`` (an agent's extra_args) only in the tool call's
    provider fields. Either way each signature goes back unchanged, and never as Google's
    skip-validation placeholder."""
    gemini.reset()
    gemini.load(_script(gold, NATIVE_USAGE["gemini"], steps=2))
    outside = {"thought_signature_in_tool_call_id": False}
    agents = [
        # the agent's extra_args, as docs/models.md shows it, and the config's
        {**_agent("flash", GEMINI_FLASH, gemini.api_base), "extra_args": outside},
        _agent("flash-stream", GEMINI_FLASH, gemini.api_base, stream=True, extra_args=outside),
        _agent("flash-in-id", GEMINI_FLASH, gemini.api_base),
        {**_agent("flash-loop", GEMINI_FLASH, gemini.api_base, extra_args=outside), "agent": "loop"},
        _agent(
            "flash-compact",
            GEMINI_FLASH,
            gemini.api_base,
            context_window=1000,
            keep_last_messages=2,
            extra_args=outside,
        ),
    ]
    judge = {"model": GEMINI_FLASH, "api_base": gemini.api_base, "thinking": "high"}
    path = _experiment(tmp_path, bench, "gemini", agents, judge)
    code, _out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 0, err
    assert gemini.rejections == [] and gemini.placeholder_signatures == []
    results = _assert_completed_and_graded(tmp_path, "gemini", [a["name"] for a in agents])
    # the mode each agent asked for: the signature in the tool-call id only for flash-in-id
    for name, result in results.items():
        trajectory = json.loads(Path(urlsplit(result.trajectory_uri).path).read_text())
        ids = [c["id"] for m in trajectory["messages"] for c in m.get("tool_calls") or []]
        assert ids and all(("__thought__" in i) == (name == "flash-in-id") for i in ids), (name, ids)
    bodies = gemini.requests
    # the agent's turns went back with their signed function calls (the emulator verified each)
    signed = [
        part
        for body in bodies
        for content in body.get("contents", [])
        if content["role"] == "model"
        for part in content["parts"]
        if ("function_call" in part or "functionCall" in part)
    ]
    assert signed and all(part.get("thoughtSignature") or part.get("thought_signature") for part in signed)
    assert all(b["generationConfig"]["thinkingConfig"]["thinkingLevel"] == "high" for b in bodies)
    # one call per distinct agent arguments (the signature mode is one), one verdict
    _assert_summarised_mid_run(bodies)
    _assert_preflight_exact(bodies, 4, ("contents", "tools", "system_instruction", "systemInstruction"))


def test_gpt_5_2_on_chat_completions_with_a_gpt_5_judge_at_its_defaults(
    tmp_path, bench, gold, openai, capsys
):
    openai.reset()
    openai.load(_script(gold, NATIVE_USAGE["chat"]))
    agents = [
        _agent("gpt52", GPT_52, openai.api_base),
        _agent("gpt52-stream", GPT_52, openai.api_base, stream=True),
    ]
    judge = {"model": "openai/gpt-5", "api_base": openai.api_base}  # nothing set: the defaults
    path = _experiment(tmp_path, bench, "chat", agents, judge)
    code, _out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 0, err
    assert openai.rejections == []
    _assert_completed_and_graded(tmp_path, "chat", [a["name"] for a in agents])
    assert set(openai.request_paths) == {"/v1/chat/completions"}
    bodies = openai.requests
    agent = [b for b in bodies if JUDGE_MARK not in json.dumps(b)]
    verdicts = [b for b in bodies if JUDGE_MARK in json.dumps(b)]
    assert all(b["reasoning_effort"] == "high" and "max_tokens" not in b for b in agent)
    # gpt-5 as judge with no settings: no temperature (gpt-5 refuses 0), the verdict schema
    assert verdicts and all("temperature" not in b and "max_tokens" not in b for b in verdicts)
    assert all(b["response_format"]["json_schema"]["name"] == "verdict" for b in verdicts)
    _assert_preflight_exact(bodies, 3, ("messages", "tools"))
    # re-judged by gpt-5.2-pro (litellm's Responses route) without re-running the agents
    openai.reset()
    store = f"sqlite:///{tmp_path / 'store.db'}"
    argv = ["regrade", "chat", "--store", store, "--judge-model", GPT_52_PRO, "--api-base", openai.api_base]
    code, _out, err, _ = _atoll(capsys, *argv)
    assert code == 0, err
    assert openai.rejections == [] and set(openai.request_paths) == {"/v1/responses"}
    assert openai.requests and all(JUDGE_MARK in json.dumps(b) for b in openai.requests)
    _assert_completed_and_graded(tmp_path, "chat", [a["name"] for a in agents])


def test_gpt_5_2_pro_on_the_responses_api_gets_its_reasoning_items_back(
    tmp_path, bench, gold, openai, capsys
):
    openai.reset()
    openai.load(_script(gold, NATIVE_USAGE["responses"], steps=2))
    stateless = {"store": False, "include": ["reasoning.encrypted_content"]}
    agents = [
        _agent("pro", GPT_52_PRO, openai.api_base),
        _agent("pro-stream", GPT_52_PRO, openai.api_base, stream=True),
        _agent("pro-stateless", GPT_52_PRO, openai.api_base, extra_args=stateless),
        {**_agent("pro-loop", GPT_52_PRO, openai.api_base), "agent": "loop"},
        _agent("pro-compact", GPT_52_PRO, openai.api_base, context_window=1000, keep_last_messages=2),
    ]
    judge = {"model": GPT_52_PRO, "api_base": openai.api_base, "thinking": "high"}
    path = _experiment(tmp_path, bench, "responses", agents, judge)
    code, _out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 0, err
    assert openai.rejections == [] and openai.dropped_reasoning == []
    _assert_completed_and_graded(tmp_path, "responses", [a["name"] for a in agents])
    assert set(openai.request_paths) == {"/v1/responses"}
    bodies = openai.requests
    # each later turn sent its reasoning items back before the function calls they preceded
    replayed = [item for b in bodies for item in b.get("input", []) if item.get("type") == "reasoning"]
    assert replayed
    assert all(
        item.get("encrypted_content")
        for b in bodies
        if b.get("store") is False
        for item in b["input"]
        if item.get("type") == "reasoning"
    )
    assert all(b["reasoning"]["effort"] == "high" for b in bodies)
    _assert_summarised_mid_run(bodies)
    _assert_preflight_exact(bodies, 4, ("input", "tools", "instructions"))


# --- the failure side: a misconfigured agent or judge stops `atoll run` in seconds ---------


def test_a_claude_agent_anthropic_refuses_stops_atoll_run_with_anthropics_words(
    tmp_path, bench, gold, anthropic, capsys
):
    # Anthropic's own thinking parameter by hand (extra_args go through as written) with a
    # max_tokens below its budget: loading cannot know the budget rule is broken, Anthropic can.
    anthropic.reset()
    anthropic.load(_script(gold, NATIVE_USAGE["anthropic"]))
    agent = _agent(
        "claude",
        CLAUDE,
        anthropic.api_base,
        extra_args={"thinking": {"type": "enabled", "budget_tokens": 4096}, "max_tokens": 2048},
    )
    del agent["thinking"]
    path = _experiment(
        tmp_path, bench, "bad-agent", [agent], {"model": CLAUDE, "api_base": anthropic.api_base}
    )
    code, _out, err, seconds = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 2 and seconds < 15, (code, seconds, err)
    assert [rule for rule, _ in anthropic.rejections] == ["anthropic.thinking_budget_below_max_tokens"]
    assert f"{CLAUDE} at {anthropic.api_base} (agent claude)" in err
    assert "`max_tokens` must be greater than `thinking.budget_tokens`" in err
    assert not _results(tmp_path, "bad-agent")


def test_a_claude_judge_anthropic_refuses_stops_atoll_run_with_anthropics_words(
    tmp_path, bench, gold, anthropic, capsys
):
    anthropic.reset()
    anthropic.load(_script(gold, NATIVE_USAGE["anthropic"]))
    agents = [_agent("claude", CLAUDE, anthropic.api_base)]
    judge = {
        "model": CLAUDE,
        "api_base": anthropic.api_base,
        "extra_args": {"thinking": {"type": "enabled", "budget_tokens": 4096}, "max_tokens": 1024},
    }
    path = _experiment(tmp_path, bench, "bad-judge", agents, judge)
    code, _out, err, seconds = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 2 and seconds < 15, (code, seconds, err)
    assert [rule for rule, _ in anthropic.rejections] == ["anthropic.thinking_budget_below_max_tokens"]
    assert f"{CLAUDE} at {anthropic.api_base} (judge)" in err
    assert "`max_tokens` must be greater than `thinking.budget_tokens`" in err
    assert "[tried a verdict" in err
    assert not _results(tmp_path, "bad-judge")


@pytest.mark.parametrize(
    ("model", "extra_args", "refused"),
    [
        ("openai/gpt-5", {"temperature": 0}, "temperature: 0"),
        # Anthropic's extended thinking refuses top_k and a forced tool (Feature compatibility)
        (CLAUDE, {"top_k": 5}, "top_k: 5"),
        (CLAUDE, {"tool_choice": "required"}, 'tool_choice: "required"'),
    ],
)
def test_a_parameter_the_model_refuses_stops_atoll_run_when_the_experiment_loads(
    tmp_path, bench, openai, capsys, model, extra_args, refused
):
    openai.reset()
    agent = _agent("agent", model, openai.api_base, extra_args=extra_args)
    path = _experiment(
        tmp_path, bench, "refused", [agent], {"model": "openai/gpt-5", "api_base": openai.api_base}
    )
    code, _out, err, seconds = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 2 and seconds < 15, (code, seconds, err)
    assert f"agent agent: model {model} does not accept {refused}" in err
    assert openai.requests == []  # refused before any call


def test_an_interrupted_responses_trial_is_run_again_on_resume(tmp_path, bench, gold, openai, capsys):
    """Ctrl-C (twice: abandon) while a gpt-5.2-pro trial waits on its model gives the trial back;
    `atoll run` again runs it from the start, reasoning items and all, and keeps the finished one."""
    slow = threading.Event()
    slow.set()
    answer = _script(gold, NATIVE_USAGE["responses"])

    def script(body: dict[str, Any]) -> dict[str, Any]:
        item = answer(body)
        in_run = len(body.get("tools") or []) > 1  # not the preflight's one-tool turn
        if slow.is_set() and body.get("stream") and in_run and JUDGE_MARK not in json.dumps(body):
            return {**item, "delay_s": 15}
        return item

    openai.reset()
    openai.load(script)
    agents = [
        _agent("pro", GPT_52_PRO, openai.api_base),
        _agent("pro-stream", GPT_52_PRO, openai.api_base, stream=True),
    ]
    judge = {"model": GPT_52_PRO, "api_base": openai.api_base, "thinking": "high"}
    path = _experiment(tmp_path, bench, "resume", agents, judge)
    store_path = tmp_path / "store.db"

    def interrupt_when_one_is_done() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            counts = TrialStore(str(store_path)).counts("resume") if store_path.exists() else {}
            if counts.get("done") == 1 and counts.get("leased") == 1:
                break
            time.sleep(0.2)
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)

    watcher = threading.Thread(target=interrupt_when_one_is_done, daemon=True)
    watcher.start()
    code, _out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    watcher.join()
    assert code == 130, err
    assert f"interrupted: 1/2 done; `atoll run {path}` resumes" in err
    slow.clear()
    code, out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 0, err
    assert "2 of 2 trials done: 1 run now, 1 already done" in out
    assert openai.rejections == [] and openai.dropped_reasoning == []
    _assert_completed_and_graded(tmp_path, "resume", ["pro", "pro-stream"])


def test_the_paper_agents_reach_a_gateway_named_by_the_providers_base_variable(
    tmp_path, bench, gold, gemini, monkeypatch, capsys
):
    """docs/models.md: the paper's experiment runs against a gateway without editing its agents,
    by the provider's base-URL variable litellm reads (here GEMINI_API_BASE), judge included."""
    paper = yaml.safe_load((Path(__file__).parents[2] / "examples" / "apex-agents-paper.yaml").read_text())
    flash = next(a for a in paper["agents"] if a["model"] == GEMINI_FLASH)
    assert "api_base" not in flash and "api_base" not in paper["judge"]
    monkeypatch.setenv("GEMINI_API_BASE", gemini.api_base)
    gemini.reset()
    gemini.load(_script(gold, NATIVE_USAGE["gemini"]))
    agent = {**flash, "config": {"initial_toolbelt": ["filesystem_list_files"]}}
    path = _experiment(tmp_path, bench, "paper-flash", [agent], paper["judge"])
    code, _out, err, _ = _atoll(capsys, "run", str(path), "--quiet")
    assert code == 0, err
    assert gemini.rejections == [] and gemini.placeholder_signatures == []
    _assert_completed_and_graded(tmp_path, "paper-flash", [flash["name"]])
