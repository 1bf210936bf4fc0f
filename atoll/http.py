"""HTTP-layer helpers shared by the services' FastAPI apps (never imported by domain code).

Replies are strict JSON (docs/orchestrator.md, "Strict JSON"): typed routes are written by
pydantic, which never writes NaN; a route answering with a contract as its file is written
uses :func:`model_reply`. Every service answers an error with one body, :class:`ErrorBody`:
``{"error": {"code": "...", "message": "...", ...details}}`` (see docs/architecture.md,
Contracts), installed by :func:`add_error_handler`; every bearer token is checked by
:func:`bearer_guard`. The environment, whose clients are Archipelago's, asks for FastAPI's
``detail`` field beside it (``detail_field=True``: :class:`DetailedErrorBody`).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from atoll.errors import AtollError, ErrorCode, code_of_status, http_status
from atoll.jsonio import dumps_strict, model_json


class Health(BaseModel):
    """``GET /health`` of a service."""

    status: str = Field(description='"ok" when serving')


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``code``, a sentence for people, and details per code."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="stable, machine-readable: unknown_run, bad_input, unauthorized, …")
    message: str = Field(description="what went wrong, naming the offending input")


class ErrorBody(BaseModel):
    """The one error body of every atoll service."""

    error: ErrorDetail


class DetailedErrorBody(ErrorBody):
    """The one body plus FastAPI's ``detail`` field, for clients that read FastAPI's errors."""

    detail: Any = Field(
        description="what FastAPI would have answered: the HTTPException's detail (text or "
        "object), the validation errors, or the message"
    )


#: Declared on routes (``responses=ERROR_RESPONSES``) so OpenAPI shows the error body.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "the request was refused"},
    "5XX": {"model": ErrorBody, "description": "the service or what it depends on failed"},
}

#: The environment's (``FastAPI(responses=...)``): the one body with FastAPI's ``detail`` beside it.
DETAILED_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": DetailedErrorBody, "description": "the request was refused"},
    "5XX": {"model": DetailedErrorBody, "description": "the service or what it depends on failed"},
}


def error_body(code: str, message: str, *, compat_detail: Any = None, **details: Any) -> dict[str, Any]:
    """``{"error": {"code", "message", **details}}`` as JSON-ready data; with ``compat_detail``
    (not None), FastAPI's ``"detail": compat_detail`` beside it (:class:`DetailedErrorBody`)."""
    body: dict[str, Any] = {"error": {"code": code, "message": message, **jsonable_encoder(details)}}
    if compat_detail is not None:
        body["detail"] = jsonable_encoder(compat_detail)
    return body


def error_bytes(code: str, message: str, *, detail_field: bool = False) -> bytes:
    """The one body as JSON bytes, for refusals sent below FastAPI (ASGI middleware, a mounted
    app's guard); ``detail_field`` adds ``"detail": message`` as FastAPI's ``{"detail": text}``."""
    body = error_body(code, message, compat_detail=message if detail_field else None)
    return dumps_strict(body, separators=(",", ":")).encode()


def http_error(
    code: str, message: str, *, headers: Mapping[str, str] | None = None, **details: Any
) -> HTTPException:
    """The HTTPException a route raises to answer an error with ``code``: its status is the
    code's (``atoll.errors.http_status(code, refusal=True)``: the one table), its body the one
    :class:`ErrorBody` with ``details`` beside the message; FastAPI's ``detail`` (the
    environment's :class:`DetailedErrorBody`) is ``{"error": message, "code": code, **details}``."""
    return HTTPException(
        http_status(code, refusal=True), {"error": message, "code": code, **details}, headers=headers
    )


def error_reply(error: AtollError, **details: Any) -> HTTPException:
    """``error`` as the HTTPException a route raises when it adds ``details`` to the reply (its
    handler's reply has none): its code's status (``atoll.errors.http_status``, as the handler
    answers it), the one :class:`ErrorBody`; FastAPI's ``detail`` is
    ``{"error": message, "code": code, **details}``."""
    return HTTPException(http_status(error.code), {"error": error.message, "code": error.code, **details})


def model_reply(model: BaseModel, *, by_alias: bool = False) -> Response:
    """``model`` as a 200 ``application/json`` reply written by :func:`atoll.jsonio.model_json`:
    for routes that answer with a contract as its file is written rather than through FastAPI's
    response model. A NaN or Infinity in it raises (a 500 naming where), never goes out."""
    return Response(model_json(model, by_alias=by_alias), media_type="application/json")


def _http_error_body(status: int, detail: Any, detail_field: bool) -> dict[str, Any]:
    fallback = code_of_status(status)
    compat = (detail or HTTPStatus(status).phrase) if detail_field else None
    if isinstance(detail, Mapping):
        details = dict(detail)
        message = details.pop("message", None) or details.pop("error", None)
        code = details.pop("code", None) or fallback
        return error_body(
            str(code), str(message or HTTPStatus(status).phrase), compat_detail=compat, **details
        )
    message = str(detail) if detail else HTTPStatus(status).phrase
    return error_body(fallback, message, compat_detail=compat)


def _validation_message(errors: list[Any]) -> str:
    parts = []
    for error in errors[:3]:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def bearer_matches(header: str | None, token: str) -> bool:
    """True when an ``Authorization`` header value carries exactly ``Bearer <token>``."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].strip().encode(), token.encode())


def bearer_guard(token: str | None) -> Callable[[Request], Awaitable[None]]:
    """The one bearer guard of every service: a FastAPI dependency that answers 401 (with
    ``WWW-Authenticate: Bearer``) unless the request carries ``Bearer <token>``; no-op when None.

    ``async`` on purpose: FastAPI runs a plain ``def`` dependency on the shared thread pool,
    which a flood of long synchronous tool calls can exhaust.
    """

    async def authorize(request: Request) -> None:
        if token is not None and not bearer_matches(request.headers.get("authorization"), token):
            raise HTTPException(
                status_code=http_status("unauthorized"),
                detail="missing or wrong bearer token",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return authorize


def document_models(app: FastAPI, *models: type[BaseModel]) -> None:
    """Add ``models`` (and the models they use) to ``app``'s OpenAPI components, for routes that
    read their body themselves and name it in ``openapi_extra`` as
    ``{"$ref": "#/components/schemas/<Model>"}``; a component FastAPI already made is kept."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            components = document.setdefault("components", {}).setdefault("schemas", {})
            for model in models:
                schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
                for name, definition in schema.pop("$defs", {}).items():
                    components.setdefault(name, definition)
                components.setdefault(model.__name__, schema)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def strict_json(model: type[BaseModel]) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency that refuses, as 422 ``invalid_request``, a JSON body ``model``
    would accept only by coercion (``"1"`` for 1, ``0`` for false, …): the body is validated in
    pydantic's strict JSON mode, nested models included, so what the service accepts is what its
    OpenAPI document declares. The route still takes ``model`` as its body (which documents it);
    an empty body is left to the route.

    ``async`` and on the event loop: bodies are bounded (atoll.http_guard) and pydantic-core
    validates JSON bytes without building Python objects first.
    """

    async def refuse_coercions(request: Request) -> None:
        body = await request.body()
        if not body.strip():
            return
        try:
            model.model_validate_json(body, strict=True)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            if any(error["type"] == "json_invalid" for error in errors):
                return  # not JSON: the route's own parsing answers it, as it would have
            raise RequestValidationError(
                [{**error, "loc": ("body", *error["loc"])} for error in errors]
            ) from None

    return refuse_coercions


def add_error_handler(app: FastAPI, *, detail_field: bool = False) -> None:
    """Answer every error in the one shape :class:`ErrorBody`.

    AtollError with its code's status (``atoll.errors.HTTP_STATUS``, the one table; 400 for
    a code not in it); an
    HTTPException with a code for its status (a dict detail may carry ``code``, its message as
    ``message`` or ``error``, and more details); a request that fails validation as 422
    ``invalid_request`` listing its ``errors``.

    ``detail_field`` (the environment, for Archipelago's clients) adds FastAPI's own ``detail``
    beside ``error``: the HTTPException's detail as raised, the validation errors, or the
    AtollError's message (:class:`DetailedErrorBody`).
    """

    @app.exception_handler(AtollError)
    async def _atoll_error(_request: Request, exc: AtollError) -> JSONResponse:
        compat = exc.message if detail_field else None
        return JSONResponse(
            status_code=http_status(exc.code),
            content=error_body(exc.code, exc.message, compat_detail=compat),
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            status_code=exc.status_code,
            content=_http_error_body(exc.status_code, exc.detail, detail_field),
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = jsonable_encoder(exc.errors())
        return JSONResponse(
            status_code=http_status("invalid_request", refusal=True),
            content=error_body(
                ErrorCode.invalid_request,
                _validation_message(errors),
                compat_detail=errors if detail_field else None,
                errors=errors,
            ),
        )
