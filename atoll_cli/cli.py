"""The ``atoll`` command line.

Each command group lives in ``atoll_cli/commands/<group>.py`` and imports its service lazily,
inside the command function, so ``atoll --help`` stays fast and ``atoll`` (contracts)
never imports a service at module level.

litellm fetches its price map from the internet when first imported (four warnings and ~8 s
lost offline, and prices that change under a run); every command uses the copy bundled with
the installed litellm instead. This is set here, before any command can import litellm, so
it holds for every entry point and the processes the commands start (they inherit it); a
value the user set is kept.
"""

from __future__ import annotations

import sys

from atoll.settings import set_default

set_default("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import typer  # noqa: E402

from atoll.errors import AtollError  # noqa: E402
from atoll.logs import configure_logging  # noqa: E402
from atoll.service_tokens import TokenDirSettings, load_token_dir  # noqa: E402
from atoll_cli.commands import (  # noqa: E402
    agent,
    bench,
    compare,
    demo,
    env,
    export,
    grade,
    judge,
    lifecycle,
    mcp,
    orchestrator,
    run,
    view,
)

app = typer.Typer(
    name="atoll",
    help="Run and grade AI agents on long-horizon professional tasks in sandboxed worlds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(bench.app, name="bench")
app.add_typer(env.app, name="env")
app.add_typer(agent.app, name="agent")
app.add_typer(grade.app, name="grade")
app.add_typer(judge.app, name="judge")
app.add_typer(export.app, name="export")
app.command(name="mcp")(mcp.mcp)
run.register(app)
lifecycle.register(app)
demo.register(app)
orchestrator.register(app)
view.register(app)
compare.register(app)


def main() -> None:
    """Console entry point: user errors are one line on stderr and exit status 2. Logs are
    readable lines on a terminal, JSON lines when stderr is not one (atoll.logs; a command's
    --json-logs forces JSON)."""
    configure_logging("WARNING")
    token_dir = TokenDirSettings().token_dir
    if token_dir:  # tokens a deployment generated (atoll.service_tokens)
        load_token_dir(token_dir)
    try:
        app()
    except AtollError as exc:
        typer.secho(f"error: {exc.message}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.secho("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
