"""HTTP-layer helpers shared by the services' FastAPI apps (never imported by domain code)."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from atoll.errors import AtollError


def bearer_matches(header: str | None, token: str) -> bool:
    """True when an ``Authorization`` header value carries exactly ``Bearer <token>``."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].strip().encode(), token.encode())


def bearer_guard(token: str | None) -> Callable[[Request], None]:
    """A FastAPI dependency: 401 unless the request carries ``Bearer <token>`` (no-op when None)."""

    def authorize(request: Request) -> None:
        if token is not None and not bearer_matches(request.headers.get("authorization"), token):
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    return authorize


def add_error_handler(app: FastAPI, status_of_code: Mapping[str, int] | None = None) -> None:
    """Answer AtollError as ``{"error": {"code", "message"}}`` with a status per code (default 400)."""
    statuses = dict(status_of_code or {})

    @app.exception_handler(AtollError)
    async def _atoll_error(_request: Request, exc: AtollError) -> JSONResponse:
        return JSONResponse(
            status_code=statuses.get(exc.code, 400),
            content={"error": {"code": exc.code, "message": exc.message}},
        )
