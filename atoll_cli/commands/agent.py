"""`atoll agent …`: run one agent on one task (file out), or serve the agents runner over HTTP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import typer

from atoll.errors import AtollError, ErrorCode, first_problem
from atoll.jsonio import model_json
from atoll.logs import JSON_LOGS_HELP

app = typer.Typer(help="The agents runner: one trajectory, or the HTTP service.", no_args_is_help=True)


@app.command("run")
def run(
    output: Path = typer.Option(..., "--output", "-o", help="where to write the trajectory JSON"),
    gateway_url: str = typer.Option(
        ..., "--gateway-url", "--mcp-gateway-url", help="MCP gateway, e.g. http://127.0.0.1:8080/mcp"
    ),
    model: str = typer.Option(
        ..., "--model", "--orchestrator-model", help="litellm model, e.g. openai/gpt-4o or hosted_vllm/NAME"
    ),
    benchmark: str | None = typer.Option(None, "--benchmark", help="benchmark directory (with --task-id)"),
    task_id: str | None = typer.Option(None, "--task-id", help="task of --benchmark to run"),
    prompt: str | None = typer.Option(None, "--prompt", help="task text (instead of --benchmark/--task-id)"),
    initial_messages: Path | None = typer.Option(
        None, "--initial-messages", help="Archipelago initial_messages.json (instead of a prompt)"
    ),
    agent: str | None = typer.Option(None, "--agent", help="react_toolbelt (default), loop or replay"),
    agent_config: Path | None = typer.Option(
        None, "--agent-config", help="Archipelago agent_config.json, or an atoll AgentConfig JSON file"
    ),
    config: str | None = typer.Option(
        None, "--config", help="AgentConfig as JSON text (overrides --agent-config)"
    ),
    api_base: str | None = typer.Option(
        None, "--api-base", help="OpenAI-compatible endpoint (vLLM, llama.cpp, …)"
    ),
    gateway_token: str | None = typer.Option(
        None,
        "--gateway-token",
        "--mcp-gateway-auth-token",
        envvar="ATOLL_GATEWAY_TOKEN",
        help="bearer token of the gateway",
    ),
    extra_args: str | None = typer.Option(
        None,
        "--extra-args",
        "--orchestrator-extra-args",
        help="extra litellm arguments: a JSON object, or a file holding one",
    ),
    max_steps: int | None = typer.Option(None, "--max-steps", min=1, help="model turns (default 250)"),
    timeout: float | None = typer.Option(
        None, "--timeout", min=1, help="wall-clock limit in seconds (default 3600)"
    ),
    trial_id: str | None = typer.Option(
        None, "--trial-id", "--trajectory-id", help="recorded in the trajectory"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress line"),
) -> None:
    """Run an agent on one task against an MCP gateway and write its trajectory.

    Exit status: 0 when the trajectory was written and the run did not end with status error,
    1 when it did, 2 for bad input."""
    # The task is checked before the agents runner is imported (litellm and the MCP client:
    # seconds of CPU), so that a wrong --benchmark or --task-id fails at once.
    task_prompt, reference_solution = prompt, None
    if benchmark or task_id:
        if not (benchmark and task_id):
            raise AtollError(ErrorCode.bad_input, "--benchmark and --task-id go together")
        if prompt:
            raise AtollError(ErrorCode.bad_input, "give either --prompt or --benchmark/--task-id, not both")
        from atoll.loader import load_task

        task = load_task(benchmark, task_id)
        task_prompt, reference_solution = task.prompt, task.reference_solution  # never the rubric
    from agents_runner import AgentConfig, prepare_run
    from agents_runner.archipelago import load_agent_config_file, load_initial_messages

    messages = load_initial_messages(initial_messages) if initial_messages else None
    if not task_prompt and not messages:
        raise AtollError(
            ErrorCode.bad_input, "no task: give --prompt, --benchmark with --task-id, or --initial-messages"
        )

    file_agent, agent_settings, ignored = (None, AgentConfig(), [])
    if agent_config:
        file_agent, agent_settings, ignored = load_agent_config_file(agent_config)
    if config:
        agent_settings = _merge_config(agent_settings, config)
    if extra_args:
        merged = {**agent_settings.extra_args, **_json_object(extra_args, "--extra-args")}
        agent_settings = agent_settings.model_copy(update={"extra_args": merged})
    for name in ignored:
        typer.secho(f"note: agent config value {name!r} has no atoll equivalent and is ignored", err=True)

    from atoll.llm.endpoints import trust_endpoints

    # The operator's own options and file, for the model they run (docs/security.md)
    trust_endpoints([(model, api_base), (model, agent_settings.api_base)])
    spec, agent_run = prepare_run(
        model=model,
        prompt=task_prompt,
        initial_messages=messages,
        agent=agent or file_agent or "react_toolbelt",
        config=agent_settings,
        api_base=api_base,
        task_id=task_id,
        trial_id=trial_id,
        reference_solution=reference_solution,
        max_steps=max_steps,
        timeout_s=timeout,
    )
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AtollError(
            ErrorCode.bad_output, f"--output {output}: cannot create its folder ({exc.strerror})"
        ) from exc
    from atoll.costs import cost_text, tokens_text

    trajectory = asyncio.run(_run_with_progress(spec, agent_run, gateway_url, gateway_token, quiet))
    output.write_text(model_json(trajectory, indent=2), encoding="utf-8")
    if trajectory.raw_model_calls:  # record_raw: beside the trajectory, as the orchestrator keeps it
        from atoll.trajectory import RAW_MODEL_CALLS_NAME, raw_lines

        output.with_name(RAW_MODEL_CALLS_NAME).write_bytes(raw_lines(trajectory.raw_model_calls))
    usage = trajectory.usage
    typer.echo(
        f"{trajectory.status.value}: {trajectory.steps} steps, {trajectory.duration_s:.1f} s, "
        f"{tokens_text(usage.total_tokens, usage.reasoning_tokens, usage.cached_tokens)} tokens, "
        f"{cost_text(usage.cost_usd, usage.total_tokens)} cost -> {output}"
    )
    if trajectory.error:
        typer.echo(f"error ({trajectory.error.kind.value}): {trajectory.error.message}", err=True)
    if trajectory.final_answer:
        answer = " ".join(trajectory.final_answer.split())
        typer.echo(f"final answer: {answer[:300]}{'…' if len(answer) > 300 else ''}")
    if trajectory.status.value == "error":
        raise typer.Exit(1)


def _json_object(value: str, flag: str) -> dict[str, Any]:
    """A JSON object given inline or as the path of a file holding it."""
    text = value
    if not value.lstrip().startswith("{"):
        try:
            text = Path(value).read_text(encoding="utf-8")
        except OSError as exc:
            raise AtollError(
                ErrorCode.bad_input,
                f"{flag} {value}: neither a JSON object nor a readable file ({exc.strerror})",
            ) from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AtollError(ErrorCode.bad_input, f"{flag}: not JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(parsed, dict):
        raise AtollError(ErrorCode.bad_input, f"{flag} must be a JSON object")
    return parsed


def _merge_config(base: Any, text: str) -> Any:
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AtollError(
            ErrorCode.bad_input, f"--config is not JSON: {exc.msg} at position {exc.pos}"
        ) from None
    if not isinstance(overrides, dict):
        raise AtollError(ErrorCode.bad_input, "--config must be a JSON object")
    from pydantic import ValidationError

    try:
        # Validating the overrides alone turns aliases (max_tokens, …) into field names first.
        named = type(base).model_validate(overrides).model_dump(exclude_unset=True)
        return type(base).model_validate({**base.model_dump(exclude_unset=True), **named})
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_input, f"--config: {first_problem(exc, top='')}") from None


async def _run_with_progress(
    spec: Any, agent_run: Any, gateway_url: str, token: str | None, quiet: bool
) -> Any:
    from rich.console import Console

    from agents_runner import execute

    if quiet:
        return await execute(spec, agent_run, gateway_url=gateway_url, gateway_token=token)
    console = Console(stderr=True)
    task = asyncio.create_task(execute(spec, agent_run, gateway_url=gateway_url, gateway_token=token))
    with console.status("starting") as status:
        while not task.done():
            client = agent_run.model_client
            tokens = client.usage.total_tokens if client else 0
            status.update(
                f"{spec.name}: step {agent_run.steps}/{agent_run.config.max_steps}, "
                f"{agent_run.elapsed_s:.0f} s, {len(agent_run.tool_calls)} tool calls, {tokens} tokens"
            )
            await asyncio.wait({task}, timeout=0.5)
    return task.result()


@app.command("serve")
def serve(
    host: str | None = typer.Option(
        None, "--host", help="bind address (default $ATOLL_AGENT_HOST or 127.0.0.1)"
    ),
    port: int | None = typer.Option(None, "--port", help="TCP port (default $ATOLL_AGENT_PORT or 8081)"),
    json_logs: bool = typer.Option(False, "--json-logs", help=JSON_LOGS_HELP),
) -> None:
    """Serve the agents runner HTTP API (start a run, poll it, fetch its trajectory, cancel it)."""
    from pydantic import ValidationError

    from agents_runner.service import create_app
    from agents_runner.settings import AgentRunnerSettings
    from atoll.http_guard import guarded_protocol
    from atoll.serving import serve_app

    overrides = {key: value for key, value in (("host", host), ("port", port)) if value is not None}
    try:
        settings = AgentRunnerSettings(**overrides)
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_settings, str(first_problem(exc))) from None
    serve_app(
        create_app(settings),
        service="agent runner",
        host=settings.host,
        port=settings.port,
        token=settings.token.get_secret_value() if settings.token else None,
        token_variable="ATOLL_AGENT_TOKEN",
        http=guarded_protocol(10.0),  # a client gets 10 s for its headers (atoll.http_guard)
        json_logs=json_logs or None,
        log_level="warning",
    )
