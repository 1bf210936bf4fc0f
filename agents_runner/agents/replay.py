"""``replay``: the oracle.  Replays a task's reference solution against the gateway.

Each reference step becomes an assistant tool call and its ``role: tool`` answer in the
trajectory, exactly as a model-driven run would record it, then the reference final answer is
submitted.  No model is called.  With ``replay_stop_on_error`` (default) a step whose tool reports
an error fails the run (error kind ``agent``: the reference solution is wrong for this world),
which is what validating tasks and graders offline needs.
"""

from __future__ import annotations

import json

from agents_runner.checkpoint import at_step_boundary
from agents_runner.conversation import restore
from agents_runner.engine import answer, run_gateway_call
from agents_runner.gateway import ImagePart
from agents_runner.registry import register_agent
from agents_runner.state import AgentRun, RunEnded
from atoll.errors import AtollError, ErrorCode
from atoll.trajectory import AgentReportedStatus, ErrorKind, RunStatus


@register_agent("replay")  # declared in agents_runner/registry.py
async def replay(run: AgentRun) -> RunStatus:
    solution = run.reference_solution
    if solution is None:
        raise AtollError(
            ErrorCode.no_reference_solution,
            f"task {run.task_id or '(prompt)'} has no reference_solution to replay",
        )
    if run.resumed:  # the checkpoint's transcript holds the steps made so far
        first = int(run.agent_state.get("next_step", 0))
        if not 0 <= first <= len(solution.steps):
            raise AtollError(
                ErrorCode.bad_checkpoint,
                f"the checkpoint resumes at reference step {first + 1}; the reference solution has "
                f"{len(solution.steps)}",
            )
    else:
        first = 0
        for message in run.initial_messages:
            context_message, record = restore(message)
            run.add(context_message, record=record)
    for index, step in enumerate(solution.steps[first:], start=first):
        if run.steps >= run.config.max_steps:
            raise RunEnded(
                RunStatus.max_steps, f"stopped after {run.steps} steps (max_steps={run.config.max_steps})"
            )
        run.agent_state = {"next_step": index}
        await at_step_boundary(run)
        run.steps += 1
        call_id = f"replay_{index}"
        run.add(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": step.tool, "arguments": json.dumps(step.arguments)},
                    }
                ],
            }
        )
        images: list[tuple[str, ImagePart]] = []
        text = await run_gateway_call(run, call_id, step.tool, step.arguments, images)
        answer(run, call_id, text)
        if run.tool_calls[-1].is_error and run.config.replay_stop_on_error:
            raise RunEnded(
                RunStatus.failed,
                f"reference step {index + 1} ({step.tool}) failed: {text[:500]}",
                kind=ErrorKind.agent,
            )
    run.agent_state = {"next_step": len(solution.steps)}
    await at_step_boundary(run)
    run.steps += 1
    run.add({"role": "assistant", "content": solution.final_answer})
    run.final_answer = solution.final_answer
    run.reported_status = AgentReportedStatus.completed
    return RunStatus.completed
