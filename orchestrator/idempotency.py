"""Idempotent submission of runs (``POST /runs`` with ``Idempotency-Key``): the key and a
digest of the request are kept in the trial store (``submissions``) with the reply the request
got, so a client that retries after a lost reply gets that reply, not a second submission."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import model_json
from orchestrator.store import TrialStore

Reply = TypeVar("Reply", bound=BaseModel)


def request_digest(body: bytes, *options: str) -> str:
    """What makes two submissions the same request: the body's bytes and the options asked."""
    digest = hashlib.sha256(body)
    for option in options:
        digest.update(b"\0" + option.encode())
    return digest.hexdigest()


def check_idempotency_key(key: str) -> str:
    """``key`` when it can be an idempotency key: 1 to 200 visible ASCII characters."""
    if not 1 <= len(key) <= 200 or not all("!" <= char <= "~" for char in key):
        raise AtollError(
            ErrorCode.bad_idempotency_key, "Idempotency-Key: must be 1 to 200 visible ASCII characters"
        )
    return key


async def submit_once(
    store: TrialStore,
    key: str,
    digest: str,
    submit: Callable[[], Awaitable[Reply]],
    reply_type: type[Reply],
    *,
    call: Callable[..., Awaitable[Any]],
) -> Reply:
    """``submit()`` unless idempotency ``key`` was used before with the same request (its
    ``digest``): then the reply stored then, without planning or enqueuing again. ``call``
    runs a store function off the event loop (``asyncio.to_thread``'s shape). A submission
    that fails frees the key. Raises AtollError ``idempotency_conflict`` for a key used with
    another request, ``idempotency_in_progress`` while the first one is being answered."""
    check_idempotency_key(key)
    holder, stored = await call(store.reserve_submission, key, digest)
    if stored is not None:
        return reply_type.model_validate_json(stored)
    try:
        reply = await submit()
    except BaseException:
        await call(store.drop_submission, key, holder)
        raise
    await call(store.record_submission, key, holder, model_json(reply))
    return reply
