"""Agent checkpoints and resume: a run killed right after a checkpoint is finished by a new run
from it, with no model call made twice, no step lost or repeated, usage counted once, the time
already spent counted, and the resume recorded; a checkpoint of another run is refused."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from agents_runner import AgentCheckpoint, CheckpointPolicy, load_agent_checkpoint, run_agent
from atoll.benchmark import ReferenceSolution, ReferenceStep
from atoll.errors import AtollError
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.trajectory import RunStatus, Trajectory

from .conftest import assert_every_call_answered_once, call

TASK = "Find the settlement wire reference and mail it to the CFO."
PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6}


def _step(number: int, *calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """A scripted reply whose tool calls have fixed ids (``s<step>_<n>``), so runs compare."""
    return {
        "content": content,
        "tool_calls": [{**c, "id": f"s{number}_{n}"} for n, c in enumerate(calls)],
    }


def _script() -> list[dict[str, Any]]:
    """Nine steps of react_toolbelt: toolbelt, todos, reads, a mail, final answer."""
    return [
        _step(1, call("toolbelt_list_tools", filter="mail")),
        _step(2, call("toolbelt_add_tool", tool_name="mail_search_mail")),
        _step(
            3, call("todo_write", todos=[{"id": "w", "content": "find the wire", "status": "in_progress"}])
        ),
        _step(4, call("mail_search_mail", query="settlement"), content="Searching."),
        _step(5, call("toolbelt_add_tool", tool_name="filesystem_read_text_file")),
        _step(6, call("filesystem_read_text_file", file_path="/notes/todo.txt")),
        _step(7, call("toolbelt_add_tool", tool_name="mail_send_mail")),
        _step(8, call("todo_write", todos=[{"id": "w", "status": "completed"}], merge=True)),
        _step(9, call("final_answer", answer="HX-40917-Q")),
    ]


async def _run(llm_base: str | None, gateway, **kwargs: Any) -> Trajectory:
    kwargs.setdefault("model", "openai/scripted")
    kwargs.setdefault("config", PRICES)
    kwargs.setdefault("trial_id", "trial-1")
    return await run_agent(
        api_base=llm_base,
        api_key="x",
        gateway_url=gateway.url,
        gateway_token=gateway.token,
        prompt=TASK,
        task_id="task-1",
        **kwargs,
    )


async def _killed_at_checkpoint(step: int, **kwargs: Any) -> list[AgentCheckpoint]:
    """Run until the checkpoint of ``step`` is taken, then kill the run there (its callback never
    returns, and the task running it is cancelled, as a worker dying mid-write would leave it).
    Returns the checkpoints taken, as JSON read back (what a store would give a new worker)."""
    taken: list[AgentCheckpoint] = []
    reached = asyncio.Event()

    async def on_checkpoint(checkpoint: AgentCheckpoint) -> None:
        taken.append(load_agent_checkpoint(checkpoint.model_dump_json()))
        if checkpoint.step == step:
            reached.set()
            await asyncio.Event().wait()  # the worker dies here

    running = asyncio.create_task(_run(on_checkpoint=on_checkpoint, **kwargs))
    waiter = asyncio.create_task(reached.wait())
    await asyncio.wait({running, waiter}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert reached.is_set(), running.result() if running.done() else "no checkpoint in 60 s"
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    return taken


async def test_a_run_killed_after_a_checkpoint_is_finished_from_it_with_each_request_made_once(gateway):
    script = _script()
    with ScriptedLLM(script) as reference_llm:
        reference = await _run(reference_llm.api_base, gateway)
    assert reference.status == RunStatus.completed, reference.error

    with ScriptedLLM(script[:6]) as first_llm:
        taken = await _killed_at_checkpoint(
            6, llm_base=first_llm.api_base, gateway=gateway, checkpoint=CheckpointPolicy(every_steps=3)
        )
    assert [checkpoint.step for checkpoint in taken] == [3, 6]
    last = taken[-1]
    assert last.agent_state["toolbelt"] == ["mail_search_mail", "filesystem_read_text_file"]
    assert last.todos == [{"id": "w", "content": "find the wire", "status": "in_progress"}]

    first_seen: list[Trajectory] = []  # what a live view shows first: the steps made so far

    def watch(run) -> None:
        if not first_seen:
            first_seen.append(run.so_far())

    with ScriptedLLM(script[6:]) as second_llm:
        resumed = await _run(second_llm.api_base, gateway, resume=last, attempt=2, on_change=watch)
    assert (first_seen[0].steps, len(first_seen[0].model_calls)) == (6, 6)
    assert first_seen[0].usage == last.usage and first_seen[0].resumes[0].from_step == 6
    assert resumed.status == RunStatus.completed, resumed.error
    # each step's request exactly once, and exactly the requests of a run never interrupted
    assert first_llm.requests + second_llm.requests == reference_llm.requests
    assert second_llm.remaining == 0
    # every step once, in order; the trajectory is the uninterrupted run's
    assert resumed.messages == reference.messages
    assert [c.id for c in resumed.tool_calls] == [c.id for c in reference.tool_calls]
    assert [c.step for c in resumed.model_calls] == list(range(1, 10))
    assert resumed.steps == reference.steps == 9
    assert resumed.usage == reference.usage and resumed.usage.cost_usd > 0
    assert resumed.started_at == last.started_at  # the first attempt's start
    assert_every_call_answered_once(resumed)
    (resume,) = resumed.resumes
    assert (resume.from_step, resume.attempt, resume.checkpoint_taken_at) == (6, 2, last.taken_at)
    assert resume.elapsed_s == last.elapsed_s > 0


async def test_a_second_resume_keeps_the_first_on_record(gateway):
    script = _script()
    with ScriptedLLM(script[:3]) as llm:
        (first,) = await _killed_at_checkpoint(
            3, llm_base=llm.api_base, gateway=gateway, checkpoint=CheckpointPolicy(every_steps=3)
        )
    with ScriptedLLM(script[3:6]) as llm:
        taken = await _killed_at_checkpoint(
            6,
            llm_base=llm.api_base,
            gateway=gateway,
            checkpoint=CheckpointPolicy(every_steps=3),
            resume=first,
            attempt=2,
        )
    assert [checkpoint.step for checkpoint in taken] == [6]  # none at the resumed step itself
    with ScriptedLLM(script[6:]) as llm:
        final = await _run(llm.api_base, gateway, resume=taken[0], attempt=3)
    assert final.status == RunStatus.completed, final.error
    assert [(r.from_step, r.attempt) for r in final.resumes] == [(3, 2), (6, 3)]
    assert len(final.model_calls) == 9


async def test_resumed_tool_call_ids_stay_unique_when_the_server_reuses_them(gateway):
    """A fresh model server numbers its call ids from zero again: ids the run already used are
    still reserved after a resume, so each call is answered once."""
    script = [
        {**item, "tool_calls": [{k: v for k, v in c.items() if k != "id"} for c in item["tool_calls"]]}
        for item in _script()
    ]
    with ScriptedLLM(script[:4]) as llm:
        (checkpoint,) = await _killed_at_checkpoint(
            4, llm_base=llm.api_base, gateway=gateway, checkpoint=CheckpointPolicy(every_steps=4)
        )
    with ScriptedLLM(script[4:]) as llm:
        resumed = await _run(llm.api_base, gateway, resume=checkpoint)
    assert resumed.status == RunStatus.completed, resumed.error
    ids = [c["id"] for m in resumed.messages for c in m.get("tool_calls") or []]
    assert len(ids) == len(set(ids)) == 9
    assert_every_call_answered_once(resumed)


async def test_checkpoints_by_time_need_a_new_step(gateway):
    with ScriptedLLM([{**item, "delay_s": 0.05} for item in _script()]) as llm:
        taken: list[AgentCheckpoint] = []
        trajectory = await _run(
            llm.api_base, gateway, checkpoint=CheckpointPolicy(every_s=0.01), on_checkpoint=taken.append
        )
    assert trajectory.status == RunStatus.completed, trajectory.error
    # a checkpoint at each boundary after the first step (every one is past 0.01 s), one per step
    assert [checkpoint.step for checkpoint in taken] == list(range(1, 9))
    # the checkpoint is the context the next request carried
    first_request = llm.requests[1]["messages"]
    assert len(taken[0].context) == len(first_request)


async def test_the_time_limit_counts_the_time_already_spent(gateway):
    with ScriptedLLM(_script()[:2]) as llm:
        (checkpoint,) = await _killed_at_checkpoint(
            2, llm_base=llm.api_base, gateway=gateway, checkpoint=CheckpointPolicy(every_steps=2)
        )
    spent = checkpoint.model_copy(update={"elapsed_s": 99.0})
    with ScriptedLLM([{**item, "delay_s": 3} for item in _script()[2:]]) as llm:
        started = time.monotonic()
        resumed = await _run(llm.api_base, gateway, resume=spent, config={**PRICES, "timeout_s": 100})
        took_s = time.monotonic() - started
    assert resumed.status == RunStatus.timeout
    assert len(llm.requests) == 1 and took_s < 2.5  # 1 s was left of 100, not 100


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"model": "openai/other"},
            "the checkpoint is of model 'openai/scripted', this run's is 'openai/other'",
        ),
        ({"trial_id": "trial-2"}, "the checkpoint is of trial_id 'trial-1', this run's is 'trial-2'"),
        ({"agent": "loop"}, "the checkpoint is of agent 'react_toolbelt', this run's is 'loop'"),
    ],
)
async def test_a_checkpoint_of_another_run_is_refused(gateway, change, message):
    with ScriptedLLM(_script()[:1]) as llm:
        (checkpoint,) = await _killed_at_checkpoint(
            1, llm_base=llm.api_base, gateway=gateway, checkpoint=CheckpointPolicy(every_steps=1)
        )
    with ScriptedLLM(_script()) as llm, pytest.raises(AtollError, match=message) as raised:
        await _run(llm.api_base, gateway, resume=checkpoint, **change)
    assert raised.value.code == "bad_checkpoint"
    assert llm.requests == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "unreadable agent checkpoint: not JSON"),
        (
            json.dumps({"version": 2, "agent": "react_toolbelt"}),
            "checkpoint format version 2; this runner reads version 1",
        ),
        (json.dumps({"version": 1, "agent": "react_toolbelt"}), "model: Field required"),
    ],
)
def test_an_unreadable_checkpoint_is_one_clear_error(text, message):
    with pytest.raises(AtollError, match=message) as raised:
        load_agent_checkpoint(text)
    assert raised.value.code == "bad_checkpoint"


async def test_a_checkpoint_whose_toolbelt_tool_is_gone_ends_the_run_saying_why(gateway):
    with ScriptedLLM(_script()[:2]) as llm:
        (checkpoint,) = await _killed_at_checkpoint(
            2, llm_base=llm.api_base, gateway=gateway, checkpoint=CheckpointPolicy(every_steps=2)
        )
    broken = checkpoint.model_copy(
        update={"agent_state": {**checkpoint.agent_state, "toolbelt": ["mail_gone"]}}
    )
    with ScriptedLLM(_script()[2:]) as llm:
        resumed = await _run(llm.api_base, gateway, resume=broken)
    assert resumed.status == RunStatus.error
    assert resumed.error is not None and resumed.error.message.startswith(
        "bad_checkpoint: the checkpoint's toolbelt"
    )
    assert resumed.error.code == "bad_checkpoint"  # what the executor starts over on
    assert llm.requests == []


# --- provider state survives the checkpoint (JSON) and goes back verbatim -----------------------

ANTHROPIC_TURN = {
    "role": "assistant",
    "content": "Reading.",
    "tool_calls": [
        {"id": "toolu_01A", "type": "function", "function": {"name": "read", "arguments": '{"p": "/a"}'}}
    ],
    "thinking_blocks": [
        {"type": "thinking", "thinking": "Plan: read /a. ünïcødé ✓", "signature": "EqoBCkgIARABGAIiQ+/=="},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    ],
    "reasoning_content": "Plan: read /a. ünïcødé ✓",
}
GEMINI_TURN = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_9f__thought__CiQBVKhc7+Zb/0x==",
            "type": "function",
            "function": {"name": "read", "arguments": "{}"},
            "provider_specific_fields": {"thought_signature": "CiQBVKhc7+Zb/0x=="},
        }
    ],
    "provider_specific_fields": {"thought_signatures": ["CmQBVKhc", None]},
}
RESPONSES_TURN = {
    "role": "assistant",
    "content": "",
    "reasoning_items": [
        {"type": "reasoning", "id": "rs_0a1", "summary": [], "encrypted_content": "gAAAAABo\u00e9=="}
    ],
    "provider_specific_fields": {"openai_responses_replay": [{"type": "reasoning", "id": "rs_0a1"}]},
    "tool_calls": [
        {"id": "fc_1", "type": "function", "function": {"name": "x", "arguments": '{"n": 1.5e-7}'}}
    ],
}


def test_provider_shaped_context_survives_the_json_round_trip_byte_for_byte():
    context = [
        {"role": "system", "content": "s"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "t"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            ],
        },
        ANTHROPIC_TURN,
        {"role": "tool", "tool_call_id": "toolu_01A", "content": "a"},
        GEMINI_TURN,
        {"role": "tool", "tool_call_id": GEMINI_TURN["tool_calls"][0]["id"], "content": "b"},
        RESPONSES_TURN,
    ]
    checkpoint = AgentCheckpoint(
        agent="react_toolbelt",
        model="anthropic/claude-opus-4-5",
        step=3,
        taken_at="2026-12-06T12:00:00Z",
        started_at="2026-12-06T11:00:00Z",
        elapsed_s=3600.25,
        context=context,
        transcript=context,
        agent_state={"toolbelt": ["read"], "malformed_turns": 0, "text_only_replies": 0},
    )
    text = checkpoint.model_dump_json()
    back = load_agent_checkpoint(text)
    assert back.model_dump_json() == text
    assert json.dumps(back.context, ensure_ascii=False) == json.dumps(context, ensure_ascii=False)
    assert back == checkpoint


def _toolbelt_script() -> list[dict]:
    from .test_provider_conversations import _toolbelt_script as script

    return script()


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai"])
async def test_a_thinking_run_resumed_from_a_checkpoint_sends_its_provider_state_back(
    provider, request, gateway
):
    """The emulators verify each signed thinking block, thought signature and reasoning item:
    the turns made before the checkpoint go back from the checkpoint (read back from JSON)
    exactly as the provider returned them."""
    from .test_provider_conversations import CLAUDE, GEMINI, GPT_PRO, SIGNATURE_MODES, STATELESS

    emu = request.getfixturevalue(provider)
    model, extra = {
        "anthropic": (CLAUDE, {}),
        "gemini": (GEMINI, SIGNATURE_MODES["in_fields"]),
        "openai": (GPT_PRO, STATELESS),
    }[provider]
    config = {"reasoning_effort": "high", **extra}
    script = _toolbelt_script()
    emu.reset()
    emu.load(script[:3])
    taken = await _killed_at_checkpoint(
        3,
        llm_base=emu.api_base,
        gateway=gateway,
        model=model,
        config=config,
        checkpoint=CheckpointPolicy(every_steps=1),
    )
    assert [c.step for c in taken] == [1, 2, 3] and emu.rejections == []
    checkpoint = taken[-1]
    emu.reset()
    emu.load(script[3:])
    resumed = await _run(emu.api_base, gateway, model=model, config=config, resume=checkpoint)
    assert emu.rejections == []
    assert getattr(emu, "placeholder_signatures", []) == [] and getattr(emu, "dropped_reasoning", []) == []
    assert resumed.status == RunStatus.completed, resumed.error
    assert len(emu.requests) == 2 and len(resumed.model_calls) == 5
    assert_every_call_answered_once(resumed)


# --- the replay oracle resumes at the next reference step ------------------------------------


async def test_the_replay_agent_resumes_at_the_next_reference_step(gateway):
    mails = [{"to_email": f"{name}@example.com", "subject": "Wire", "body": "HX-40917-Q"} for name in "abc"]
    solution = ReferenceSolution(
        steps=[
            *(ReferenceStep(tool="mail_send_mail", arguments=mail) for mail in mails),
            ReferenceStep(tool="filesystem_read_text_file", arguments={"file_path": "/notes/todo.txt"}),
        ],
        final_answer="sent",
    )
    sent_before = len(gateway.world.sent)
    replay = {"model": "replay", "agent": "replay", "config": None, "reference_solution": solution}
    taken = await _killed_at_checkpoint(
        2, llm_base=None, gateway=gateway, checkpoint=CheckpointPolicy(every_steps=2), **replay
    )
    assert [(c.step, c.agent_state) for c in taken] == [(2, {"next_step": 2})]
    assert [m["to"] for m in gateway.world.sent[sent_before:]] == ["a@example.com", "b@example.com"]
    resumed = await _run(None, gateway, resume=taken[0], **replay)
    assert resumed.status == RunStatus.completed, resumed.error
    assert [m["to"] for m in gateway.world.sent[sent_before:]] == [f"{name}@example.com" for name in "abc"]
    assert [c.id for c in resumed.tool_calls] == ["replay_0", "replay_1", "replay_2", "replay_3"]
    assert resumed.steps == 5 and resumed.final_answer == "sent"
    assert [r.from_step for r in resumed.resumes] == [2]
    assert_every_call_answered_once(resumed)


# --- the HTTP service takes a checkpoint to resume from ----------------------------------------


async def test_the_service_resumes_a_run_from_a_posted_checkpoint(gateway, monkeypatch):
    import httpx

    from agents_runner.service import create_app

    from .conftest import ServedApp

    script = _script()
    with ScriptedLLM(script[:4]) as llm:
        (checkpoint,) = await _killed_at_checkpoint(
            4,
            llm_base=llm.api_base,
            gateway=gateway,
            model="openai/x",
            checkpoint=CheckpointPolicy(every_steps=4),
        )
    with ScriptedLLM(script[4:]) as llm, ServedApp(create_app(token="svc")) as served:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={llm.api_base}")
        body = {"model": "openai/x", "api_base": llm.api_base, "gateway_url": gateway.url,
                "gateway_token": gateway.token, "prompt": TASK, "task_id": "task-1", "trial_id": "trial-1",
                "config": PRICES, "resume": json.loads(checkpoint.model_dump_json()), "attempt": 2}  # fmt: skip
        base = f"http://127.0.0.1:{served.port}"
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": "Bearer svc"}, timeout=10
        ) as client:
            refused = await client.post("/runs", json={**body, "trial_id": "trial-9"})
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_checkpoint", (
                refused.text
            )
            run_id = (await client.post("/runs", json=body)).json()["run_id"]
            for _ in range(400):
                if (await client.get(f"/runs/{run_id}")).json()["state"] == "finished":
                    break
                await asyncio.sleep(0.05)
            trajectory = Trajectory.model_validate((await client.get(f"/runs/{run_id}/trajectory")).json())
    assert trajectory.status == RunStatus.completed, trajectory.error
    assert len(llm.requests) == 5 and trajectory.steps == 9 and len(trajectory.model_calls) == 9
    assert [(r.from_step, r.attempt) for r in trajectory.resumes] == [(4, 2)]


async def test_the_service_pauses_a_run_at_each_checkpoint_until_its_caller_took_it(gateway, monkeypatch):
    """Over HTTP the caller snapshots the world while the run waits: the run is paused at the
    checkpoint (no model call) until ``checkpoint/taken``, and ends saying so when nobody takes
    it within ``checkpoint_wait_s``; taking one it does not wait at is 409."""
    import httpx

    from agents_runner.service import create_app

    from .conftest import ServedApp

    script = _script()

    def reply(request: dict[str, Any]) -> dict[str, Any]:  # by the step the request is for
        return script[sum(1 for m in request["messages"] if m["role"] == "assistant")]

    with ScriptedLLM(reply) as llm, ServedApp(create_app(token="svc")) as served:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={llm.api_base}")
        body = {"model": "openai/x", "api_base": llm.api_base, "gateway_url": gateway.url,
                "gateway_token": gateway.token, "prompt": TASK, "task_id": "task-1", "trial_id": "trial-1",
                "config": PRICES, "checkpoint": {"every_steps": 4}}  # fmt: skip
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{served.port}", headers={"Authorization": "Bearer svc"}, timeout=30
        ) as client:
            run_id = (await client.post("/runs", json=body)).json()["run_id"]
            offered = await client.get(f"/runs/{run_id}/checkpoint", params={"wait_s": 20})
            assert offered.status_code == 200, offered.text
            checkpoint = load_agent_checkpoint(offered.content)
            assert checkpoint.step == 4 and checkpoint.trial_id == "trial-1"
            await asyncio.sleep(0.3)  # paused: no model call while the caller takes its time
            assert len(llm.requests) == 4
            assert (await client.get(f"/runs/{run_id}")).json()["checkpoint_step"] == 4
            wrong = await client.post(f"/runs/{run_id}/checkpoint/taken", json={"step": 3})
            assert wrong.status_code == 409 and wrong.json()["error"]["code"] == "no_checkpoint_pending"
            taken = await client.post(f"/runs/{run_id}/checkpoint/taken", json={"step": 4})
            assert taken.status_code == 202
            offered = await client.get(f"/runs/{run_id}/checkpoint", params={"wait_s": 20})
            assert load_agent_checkpoint(offered.content).step == 8  # it went on, to the next one
            await client.post(f"/runs/{run_id}/cancel")
            # The next one (step 8) is never taken: the run ends once its wait is over.
            run_id = (await client.post("/runs", json={**body, "checkpoint_wait_s": 0.3})).json()["run_id"]
            for _ in range(200):
                if (await client.get(f"/runs/{run_id}")).json()["state"] == "finished":
                    break
                await asyncio.sleep(0.05)
            ended = Trajectory.model_validate((await client.get(f"/runs/{run_id}/trajectory")).json())
            none = await client.get(f"/runs/{run_id}/checkpoint", params={"wait_s": 5})
    assert none.status_code == 204  # a finished run has none, and says so at once
    assert ended.status == RunStatus.error and ended.steps == 4 and ended.error is not None
    assert "checkpoint of step 4 was not taken within 0.3 s" in ended.error.message
