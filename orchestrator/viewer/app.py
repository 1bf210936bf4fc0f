"""``atoll view``: the viewer's FastAPI app — thin routes over ``data`` and ``trial``.

| path | gives |
|---|---|
| ``GET /api/runs`` | every run: status, counts, outcomes, cost, started/ended, spec summary |
| ``GET /api/runs/{name}`` | one run: the above plus leaderboard, agents × tasks matrix, failures |
| ``GET /api/runs/{name}/trials`` | the run's trial table |
| ``GET /api/compare?a=RUN&b=RUN`` | run b against run a: metric deltas, McNemar, per-task changes |
| ``GET /api/trials/{trial_id}[?run=NAME]`` | one trial: transcript, verdicts, world diff, attempts |
| ``GET /api/trials/{trial_id}/download/{what}[?attempt=N]`` | trajectory, grade, before or after (snapshot); of attempt N (an earlier, failed one) when given |
| ``GET /api/trials/{trial_id}/file/{before|after}?path=filesystem/…`` | one file of a snapshot |
| ``GET /``, ``/runs/{name}``, ``/trials/{trial_id}``, ``/compare?a=&b=`` | the pages (static HTML + JS over the API) |

Errors are ``{"error": {"code", "message"}}`` (404 for an unknown run, trial or file). A page
of an unknown run or trial is a 404 too, whose HTML says what is missing (and JS or not).
Trial content is untrusted: pages build the DOM with ``textContent`` only, every response
carries a Content-Security-Policy that allows no inline script, and files from snapshots are
served as downloads (``application/octet-stream``, ``attachment``), never rendered.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Coroutine
from importlib import resources
from pathlib import PurePosixPath
from typing import Any, ParamSpec, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, Response
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from atoll.errors import AtollError, ErrorCode, http_status
from atoll.http import add_error_handler, bearer_matches, error_body
from atoll.http_guard import guard
from atoll.jsonio import dumps_strict
from atoll.trial import TrialResult, TrialSpec
from orchestrator.store import TrialStore
from orchestrator.viewer import data
from orchestrator.viewer.compare import compare_runs
from orchestrator.viewer.trial import raw_exchanges, trial_detail
from orchestrator.viewer.worlddiff import SnapshotCache, snapshot_member

P = ParamSpec("P")
T = TypeVar("T")

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_COOKIE = "atoll_view_token"
_STATIC = resources.files("orchestrator.viewer") / "static"


class _Headers(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers.setdefault("Cache-Control", "no-store")
        return response


def create_app(store: TrialStore, *, bind_host: str | None = None, token: str | None = None) -> FastAPI:
    """The viewer over ``store``. With ``token``, every request needs ``Authorization: Bearer``
    or the cookie that ``/?token=…`` sets (for a browser)."""
    app = FastAPI(title="atoll view", docs_url=None, redoc_url=None, openapi_url="/api/openapi.json")
    snapshots, cache = SnapshotCache(), data.RunCache()
    app.state.store, app.state.snapshots, app.state.cache = store, snapshots, cache
    app.router.add_event_handler("shutdown", snapshots.close)
    add_error_handler(app)
    app.add_middleware(_Headers)
    guard(app, bind_host=bind_host)  # Host allow-list ($ATOLL_ALLOWED_HOSTS) and cross-site refusal

    if token is not None:

        @app.middleware("http")
        async def authorize(request: Request, call_next: RequestResponseEndpoint) -> Response:
            given = request.query_params.get("token")
            if given is not None and bearer_matches(f"Bearer {given}", token):
                response = await call_next(request)
                response.set_cookie(_COOKIE, given, httponly=True, samesite="strict")
                return response
            cookie = request.cookies.get(_COOKIE)
            if bearer_matches(request.headers.get("authorization"), token) or (
                cookie is not None and bearer_matches(f"Bearer {cookie}", token)
            ):
                return await call_next(request)
            return Response(
                dumps_strict(error_body(ErrorCode.unauthorized, "missing or wrong viewer token")),
                status_code=http_status("unauthorized"),
                media_type="application/json",
            )

    def run_off_loop(
        function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Coroutine[Any, Any, T]:
        return asyncio.to_thread(function, *args, **kwargs)

    @app.get("/api/runs")
    async def runs() -> dict[str, Any]:
        return {
            "store": data.shown_url(store),
            "runs": await run_off_loop(data.list_runs, store, cache=cache),
        }

    @app.get("/api/runs/{name}")
    async def run(name: str) -> dict[str, Any]:
        return await run_off_loop(data.run_detail, store, name, cache=cache)

    @app.get("/api/runs/{name}/trials")
    async def trials(name: str) -> dict[str, Any]:
        return {"run": name, "trials": await run_off_loop(data.run_trials, store, name, cache=cache)}

    @app.get("/api/compare")
    async def compare(a: str = Query(...), b: str = Query(...)) -> dict[str, Any]:
        return await run_off_loop(compare_runs, store, a, b, cache=cache)

    @app.get("/api/trials/{trial_id}")
    async def trial(trial_id: str, run: str | None = None) -> dict[str, Any]:
        return await run_off_loop(trial_detail, store, trial_id, run=run, snapshots=snapshots)

    @app.get("/api/trials/{trial_id}/raw/{step}")
    async def raw(trial_id: str, step: int, run: str | None = None) -> dict[str, Any]:
        return await run_off_loop(raw_exchanges, store, trial_id, step, run=run)

    def result_of(
        trial_id: str, run: str | None, attempt: int | None = None
    ) -> tuple[TrialSpec, TrialResult]:
        (spec, result, _state, _attempts), _runs = data.find_trial(store, trial_id, run)
        if attempt is not None:
            result = data.attempt_result(store, spec, attempt)
            if result is None:
                raise AtollError(
                    ErrorCode.unknown_file, f"trial {trial_id} has no recorded attempt {attempt}"
                )
        if result is None:
            raise AtollError(ErrorCode.unknown_file, f"trial {trial_id} has no recorded result yet")
        return spec, result

    @app.get("/api/trials/{trial_id}/download/{what}")
    async def download(
        trial_id: str, what: str, run: str | None = None, attempt: int | None = None
    ) -> Response:
        names = {
            "trajectory": ("trajectory_uri", "trajectory.json", "application/json"),
            "grade": ("grade_uri", "grade.json", "application/json"),
            "before": ("snapshot_before_uri", "before.tar.gz", "application/gzip"),
            "after": ("snapshot_after_uri", "after.tar.gz", "application/gzip"),
        }
        if what not in names:
            raise AtollError(
                ErrorCode.unknown_file, f"no download {what!r} (trajectory, grade, before, after)"
            )
        field, filename, media_type = names[what]
        spec, result = await run_off_loop(result_of, trial_id, run, attempt)
        uri = getattr(result, field)
        if not uri:
            raise AtollError(ErrorCode.unknown_file, f"trial {trial_id} has no {what} artifact")
        if what in ("before", "after"):
            path = await run_off_loop(snapshots.local, uri)
            return FileResponse(path, media_type=media_type, filename=f"{spec.task_id}-{filename}")
        body = await run_off_loop(data.read_artifact, uri)
        return Response(
            body, media_type=media_type, headers={"Content-Disposition": f'attachment; filename="{filename}"'}
        )

    @app.get("/api/trials/{trial_id}/file/{side}")
    async def snapshot_file(
        trial_id: str, side: str, path: str = Query(...), run: str | None = None
    ) -> Response:
        if side not in ("before", "after"):
            raise AtollError(ErrorCode.unknown_file, f"no snapshot {side!r} (before, after)")
        _spec, result = await run_off_loop(result_of, trial_id, run)
        uri = result.snapshot_before_uri if side == "before" else result.snapshot_after_uri
        if not uri:
            raise AtollError(ErrorCode.unknown_file, f"trial {trial_id} has no {side} snapshot")
        body = await run_off_loop(snapshot_member, snapshots, uri, path)
        # Served as an opaque download: an HTML file the agent wrote must never run as this site.
        name = "".join(c for c in PurePosixPath(path).name if c.isalnum() or c in "._- ") or "file"
        return Response(
            body,
            media_type="application/octet-stream",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        types = {".css": "text/css", ".js": "text/javascript"}
        resource = _STATIC / name
        suffix = PurePosixPath(name).suffix
        if "/" in name or suffix not in types or not resource.is_file():
            raise AtollError(ErrorCode.unknown_file, f"no static file {name!r}")
        return Response(
            resource.read_bytes(), media_type=types[suffix], headers={"Cache-Control": "no-cache"}
        )

    def page(error: AtollError | None = None) -> Response:
        body = (_STATIC / "page.html").read_bytes()
        if error is None:
            return Response(body, media_type="text/html; charset=utf-8")
        # Readable without the script too: the message is in the HTML (escaped: it can name
        # what the URL said).
        shown = (
            f'<div class="error-box" id="error"><strong>{html.escape(error.code, quote=False)}</strong>: '
            f'{html.escape(error.message, quote=False)} · <a href="/">all runs</a></div>'
        )
        body = body.replace(b'<p class="muted">loading\xe2\x80\xa6</p>', shown.encode())
        return Response(
            body, status_code=http_status(error.code, default=404), media_type="text/html; charset=utf-8"
        )

    async def checked(function: Callable[..., object], *args: object) -> AtollError | None:
        try:
            await run_off_loop(function, *args)
        except AtollError as exc:
            if exc.code not in ("unknown_run", "unknown_trial", "bad_compare"):
                raise
            return exc
        return None

    def require_run(name: str) -> None:
        if store.experiment_spec(name) is None:
            raise data.unknown_run(store, name)

    @app.get("/")
    async def index_page() -> Response:
        return page()

    @app.get("/runs/{name}")
    async def run_page(name: str) -> Response:
        return page(await checked(require_run, name))

    @app.get("/trials/{trial_id}")
    async def trial_page(trial_id: str, run: str | None = None) -> Response:
        return page(await checked(data.find_trial, store, trial_id, run))

    @app.get("/compare")
    async def compare_page(a: str = "", b: str = "") -> Response:
        if not a or not b:
            return page(
                AtollError(
                    ErrorCode.bad_compare, "pick two runs to compare on the runs page (/compare?a=RUN&b=RUN)"
                )
            )
        return page(await checked(require_run, a) or await checked(require_run, b))

    return app


__all__ = ["create_app"]
