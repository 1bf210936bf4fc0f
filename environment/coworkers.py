"""The coworker engine: the world's personas answer the agent's chat messages and mails.

The gateway tells the engine of every successful call of a chat or mail server that is not
read-only (:meth:`CoworkerEngine.noticed`); the engine reads the posted message or the sent
mail from the tool's own result, finds the personas it is addressed to (a direct chat with
them, a channel message naming them, a mail to or copying them) and starts each persona's
reply at once: from the cache when the same persona already answered the same conversation
under the same seed and model, else from the coworker model (:func:`atoll.llm.complete`, its
key under :mod:`atoll.llm.endpoints`' rule), else the persona's "unavailable" message. The
reply is written into the app's own data as the persona (the chat server's ``post``/``reply``
service, the mail server's mailbox append) once the persona's ``reply_delay_s`` has passed;
a tool call made after that waits for it (:meth:`CoworkerEngine.deliver_due`), so the agent
sees it with the normal tools. Every exchange is one line of
``.apps_data/coworkers/exchanges.jsonl``. A reply is text only: the model is offered no
tools and nothing it writes is run or parsed. See docs/coworkers.md.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from atoll.coworkers import (
    EXCHANGES_FILE,
    PERSONAS_FILE,
    REPLY_CHARS,
    Channel,
    CoworkerExchange,
    CoworkerUsage,
    Persona,
    coworker_messages,
    parse_personas,
    read_exchanges,
    reply_key,
    unavailable_reply,
)
from atoll.errors import AtollError

if TYPE_CHECKING:
    from environment.config import AppsConfig
    from environment.settings import EnvironmentSettings

logger = logging.getLogger("environment.coworkers")

#: Replies cached in this process, by :func:`atoll.coworkers.reply_key` (a cache folder in
#: the settings keeps them across processes).
_MEMORY_CACHE: dict[str, dict[str, Any]] = {}
_MEMORY_CACHE_MAX = 4_096
_ANSWERED = ("replied", "unavailable", "failed")


@dataclass(frozen=True)
class CoworkerModel:
    """Which model writes the replies, and how."""

    model: str | None = None
    api_base: str | None = None
    api_key_secret: str | None = None
    thinking: str | None = None
    extra_args: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    max_replies: int = 20
    cache_dir: Path | None = None
    timeout_s: float = 120.0

    @classmethod
    def from_settings(cls, settings: EnvironmentSettings) -> CoworkerModel:
        return cls(
            model=settings.coworker_model,
            api_base=settings.coworker_api_base,
            api_key_secret=settings.coworker_api_key_secret,
            thinking=settings.coworker_thinking,
            extra_args=dict(settings.coworker_extra_args),
            seed=settings.coworker_seed,
            max_replies=settings.coworker_max_replies,
            cache_dir=settings.coworker_cache_dir,
            timeout_s=settings.coworker_timeout_s,
        )

    def arguments(self) -> dict[str, Any]:
        """The litellm arguments of a reply call (the model's parameter profile applied:
        temperature 0 and the seed where the model takes them). Raises ProfileError."""
        from atoll.llm.profiles import call_arguments
        from atoll.model_arguments import check_arguments

        assert self.model is not None
        requested = dict(check_arguments(self.extra_args, "coworker.extra_args"))
        return call_arguments(
            self.model,
            requested,
            thinking=self.thinking,
            preferred={"temperature": 0.0, "seed": self.seed},
            where="coworker",
        )


@dataclass
class _Written:
    """A reply to write: text, and what the exchange records of how it was made."""

    text: str
    status: str
    cached: bool = False
    usage: CoworkerUsage = field(default_factory=CoworkerUsage)
    cost_usd: float = 0.0
    error: str | None = None


@dataclass
class _Pending:
    persona: Persona
    channel: Channel
    conversation: str  # channel id or thread id
    message_id: str
    message: str
    due: float  # monotonic time the reply may be written
    sent_at: str
    task: asyncio.Task[None] | None = None


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _unwrap(structured: Any) -> dict[str, Any] | None:
    """A tool's structured result as a dict (a consolidated or wrapped result unwrapped)."""
    if (
        isinstance(structured, dict)
        and set(structured) == {"result"}
        and isinstance(structured["result"], dict)
    ):
        structured = structured["result"]
    return structured if isinstance(structured, dict) else None


class CoworkerEngine:
    """The personas of the environment's world, answering the agent (module docstring)."""

    def __init__(self, settings: EnvironmentSettings) -> None:
        from atoll.llm.endpoints import trust_endpoints

        self.fs_root = settings.fs_root.resolve()
        self.apps_data_root = settings.apps_data_root.resolve()
        self.model = CoworkerModel.from_settings(settings)
        # The operator set this endpoint for this model (as ATOLL_JUDGE_API_BASE for the judge):
        # the key of that model's provider may go there, and no other key.
        trust_endpoints([(self.model.model, self.model.api_base)])
        #: server name -> ("chat" | "mail", its options): the servers whose writes are watched
        self._servers: dict[str, tuple[str, dict[str, Any]]] = {}
        self._pending: list[_Pending] = []
        self._replies: int | None = None  # answered so far in this world (from its log)
        self._personas: tuple[Any, list[Persona]] | None = None
        self._write_lock = threading.Lock()
        self.model_calls = 0  # tests and metrics: calls actually sent to the model

    # --- wiring -------------------------------------------------------------------------

    def attach(self, config: AppsConfig) -> None:
        """Watch the chat and mail servers of ``config`` (our in-process ones)."""
        servers: dict[str, tuple[str, dict[str, Any]]] = {}
        for name, server in config.mcpServers.items():
            if server.transport == "inprocess" and server.server in ("chat", "mail"):
                servers[name] = (str(server.server), dict(server.options))
        self._servers = servers

    def watches(self, server_name: str) -> bool:
        return server_name in self._servers

    def world_replaced(self) -> None:
        """A new world: pending replies of the old one are dropped, counts start again."""
        for pending in self._pending:
            if pending.task is not None:
                pending.task.cancel()
        self._pending = []
        self._replies = None
        self._personas = None

    # --- the agent wrote ------------------------------------------------------------------

    async def noticed(self, server_name: str, structured: Any) -> None:
        """A write tool of a watched server succeeded with ``structured`` as its result:
        start the replies of every persona it addresses."""
        kind, options = self._servers.get(server_name, ("", {}))
        data = _unwrap(structured)
        if not kind or data is None:
            return
        try:
            found = await anyio.to_thread.run_sync(self._addressed, kind, options, data)
        except Exception as exc:  # a broken personas file or chat export must not fail the call
            logger.warning("coworkers: message not routed", extra={"error": str(exc)[:300]})
            return
        for pending in found:
            self._pending.append(pending)
            pending.task = asyncio.create_task(self._answer(pending, options))

    def personas(self) -> list[Persona]:
        """The world's personas (empty without a personas file); AtollError(bad_personas)."""
        from mcp_servers._core.app_data import AppData

        data = AppData(self.apps_data_root, "coworkers")
        path = self.apps_data_root / PERSONAS_FILE
        stamp = data.stamp(path)
        if stamp is None:
            return []
        if self._personas is not None and self._personas[0] == stamp:
            return self._personas[1]
        personas = parse_personas(data.read_bytes(path), source=f".apps_data/{PERSONAS_FILE}")
        self._personas = (stamp, personas)
        return personas

    def _addressed(self, kind: str, options: dict[str, Any], data: dict[str, Any]) -> list[_Pending]:
        personas = self.personas()
        if not personas:
            return []
        now, sent_at = time.monotonic(), _now_iso()

        def pending(
            persona: Persona, channel: Channel, conversation: str, message_id: str, text: str
        ) -> _Pending:
            return _Pending(
                persona, channel, conversation, message_id, text[:2_000], now + persona.reply_delay_s, sent_at
            )

        if kind == "mail":
            recipients = {
                _address(a) for a in [*data.get("to", []), *data.get("cc", []), *(data.get("bcc") or [])]
            }
            mail_id, thread_id = str(data.get("mail_id", "")), str(data.get("thread_id", ""))
            return [
                pending(p, "mail", thread_id, mail_id, str(data.get("subject", "")))
                for p in personas
                if "mail" in p.channels and p.email.lower() in recipients and mail_id
            ]
        channel_id, post_id, text = (
            str(data.get("channel_id", "")),
            str(data.get("post_id", "")),
            str(data.get("text", "")),
        )
        author = _address(str((data.get("author") or {}).get("email") or ""))
        if not channel_id or not post_id:
            return []
        members = self._chat_members(options, channel_id)
        direct = channel_id.startswith("DM ")
        return [
            pending(p, "chat", channel_id, post_id, text)
            for p in personas
            if "chat" in p.channels
            and p.chat_email != author
            and ((direct and p.chat_email in members) or (not direct and p.mentioned_in(text)))
        ]

    def _chat_members(self, options: dict[str, Any], channel_id: str) -> set[str]:
        from mcp_servers.chat.service import ChatService

        service = ChatService(self._context(options))
        group = service.group(channel_id)
        info = service.index.json_object(group.info_path)
        return {
            _address(str(member.get("email") or ""))
            for member in info.get("members") or []
            if isinstance(member, dict)
        }

    def _context(self, options: dict[str, Any]) -> Any:
        from mcp_servers._core.context import ServerContext

        return ServerContext.create(self.fs_root, self.apps_data_root, options)

    # --- the persona answers ------------------------------------------------------------

    def has_due(self) -> bool:
        """Whether a reply is due (cheap: the gateway asks before every call)."""
        if not self._pending:
            return False
        now = time.monotonic()
        return any(p.due <= now for p in self._pending)

    async def deliver_due(self) -> None:
        """Wait until every reply due by now is written (before the agent's next call)."""
        now = time.monotonic()
        for pending in [p for p in self._pending if p.due <= now]:
            if pending.task is not None:
                await asyncio.shield(pending.task)

    async def settle(self) -> None:
        """Wait for every pending reply, however far off (tests; shutting down cleanly)."""
        while self._pending:
            task = self._pending[0].task
            if task is not None:
                await asyncio.shield(task)

    async def _answer(self, pending: _Pending, options: dict[str, Any]) -> None:
        try:
            if self._replies is None:
                self._replies = await anyio.to_thread.run_sync(self._count_replies)
            if self._replies >= self.model.max_replies:
                await anyio.to_thread.run_sync(self._record, pending, None, _Written("", "over_limit"))
                return
            self._replies += 1  # counted now: replies started together stay within the bound
            conversation = await anyio.to_thread.run_sync(self._conversation, pending, options)
            if pending.channel == "mail" and conversation:  # the result held its subject, not its body
                pending.message = conversation[-1][1][:2_000]
            written = await self._write_reply_text(pending.persona, pending.channel, conversation)
            wait = pending.due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            reply_id = await anyio.to_thread.run_sync(self._deliver, pending, options, written.text)
            await anyio.to_thread.run_sync(self._record, pending, reply_id, written)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a reply that cannot be written is logged, never raised
            logger.warning(
                "coworkers: reply not delivered",
                extra={"persona": pending.persona.email, "error": f"{type(exc).__name__}: {exc}"[:300]},
            )
        finally:
            if pending in self._pending:
                self._pending.remove(pending)

    async def _write_reply_text(
        self, persona: Persona, channel: Channel, conversation: list[tuple[str, str]]
    ) -> _Written:
        model = self.model
        if model.model is None:
            return _Written(unavailable_reply(persona), "unavailable")
        key = reply_key(persona, channel, conversation, seed=model.seed, model=model.model)
        cached = self._cached(key)
        if cached is not None:
            return _Written(str(cached["reply"])[:REPLY_CHARS], "replied", cached=True)
        # litellm's import takes seconds: never on the event loop, which serves the agent's calls.
        await anyio.to_thread.run_sync(importlib.import_module, "atoll.llm.client")
        from atoll.llm import Endpoint, ModelError, RetryPolicy, complete

        try:
            arguments = await anyio.to_thread.run_sync(model.arguments)
            self.model_calls += 1
            done = await complete(
                Endpoint(model.model, model.api_base, secret=model.api_key_secret),
                coworker_messages(persona, conversation),
                role="coworker",
                arguments=arguments,
                timeout_s=model.timeout_s,
                retry=RetryPolicy(max_retries=2, deadline_s=model.timeout_s * 2),
            )
        except (ModelError, AtollError) as exc:
            return _Written(
                unavailable_reply(persona), "failed", error=str(getattr(exc, "message", exc))[:500]
            )
        text = done.text.strip()[:REPLY_CHARS]
        usage = CoworkerUsage(prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens)
        if not text:  # e.g. only tool calls, which are never run: nothing to say as the persona
            error = "the coworker model returned no reply text"
            return _Written(
                unavailable_reply(persona), "failed", usage=usage, cost_usd=done.cost_usd, error=error
            )
        self._store(key, {"reply": text, "usage": usage.model_dump(), "cost_usd": done.cost_usd})
        return _Written(text, "replied", usage=usage, cost_usd=done.cost_usd)

    def _cached(self, key: str) -> dict[str, Any] | None:
        hit = _MEMORY_CACHE.get(key)
        if hit is not None or self.model.cache_dir is None:
            return hit
        try:
            hit = json.loads((self.model.cache_dir / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return hit if isinstance(hit, dict) and isinstance(hit.get("reply"), str) else None

    def _store(self, key: str, value: dict[str, Any]) -> None:
        if len(_MEMORY_CACHE) >= _MEMORY_CACHE_MAX:
            _MEMORY_CACHE.pop(next(iter(_MEMORY_CACHE)))
        _MEMORY_CACHE[key] = value
        if self.model.cache_dir is None:
            return
        try:
            self.model.cache_dir.mkdir(parents=True, exist_ok=True)
            temporary = self.model.cache_dir / f".{key}.tmp"
            temporary.write_text(json.dumps(value), encoding="utf-8")
            temporary.replace(self.model.cache_dir / f"{key}.json")
        except OSError as exc:
            logger.warning("coworkers: reply not cached", extra={"error": str(exc)[:300]})

    # --- reading and writing the world (threads) ---------------------------------------

    def _conversation(self, pending: _Pending, options: dict[str, Any]) -> list[tuple[str, str]]:
        """The conversation the persona sees, oldest first: the direct chat, the channel's
        thread of the message, or the mail thread."""
        context = self._context(options)
        if pending.channel == "mail":
            from atoll.formats.mail.text import message_text
            from mcp_servers.mail.store import MailStore

            store = MailStore(context)
            view = store.view()
            original = view.find(pending.message_id)
            if original is None:
                return [("(the agent)", pending.message)]
            thread = [e for e in reversed(view.entries) if e.thread_id == original.thread_id]
            return [
                (entry.sender, f"Subject: {entry.subject}\n{message_text(store.raw(entry))[0]}")
                for entry in thread[-20:]
            ]
        from mcp_servers.chat.service import ChatService

        service = ChatService(context)
        group = service.group(pending.conversation)
        messages = [m for m in service.parsed(group).messages if not m.deleted]
        if not pending.conversation.startswith("DM "):
            trigger = next((m for m in messages if m.message_id == pending.message_id), None)
            topic = trigger.topic_id if trigger is not None else None
            messages = [m for m in messages if topic and m.topic_id == topic]
        return [(m.author_name or m.author_email or "someone", m.text) for m in messages[-20:]]

    def _deliver(self, pending: _Pending, options: dict[str, Any], text: str) -> str:
        """Write the persona's reply into the app's data; its message id."""
        persona = pending.persona
        if pending.channel == "mail":
            return self._deliver_mail(pending, options, text)
        from mcp_servers.chat.service import ChatService

        as_persona = dict(options, user_email=persona.chat_email, user_name=persona.name)
        service = ChatService(self._context(as_persona))
        if pending.conversation.startswith("DM "):
            posted = service.post(pending.conversation, text)
        else:
            posted = service.reply(pending.conversation, pending.message_id, text)
        return str(posted["post_id"])

    def _deliver_mail(self, pending: _Pending, options: dict[str, Any], text: str) -> str:
        from mcp_servers.mail.compose import Outgoing, address_of, build_message, prefixed
        from mcp_servers.mail.sending import thread_headers
        from mcp_servers.mail.store import MailStore

        persona = pending.persona
        store = MailStore(self._context(options))
        original = store.view().find(pending.message_id)
        if original is None:
            raise LookupError(f"mail {pending.message_id!r} is no longer in the mailbox")
        in_reply_to, references, thread_header = thread_headers(store, original)
        outgoing = Outgoing(
            sender=f"{persona.name} <{persona.email}>",
            to=[address_of(original.sender)],
            cc=[],
            bcc=[],
            subject=prefixed(original.subject, "Re:"),
            body=text,
            in_reply_to=in_reply_to,
            references=references,
            thread_header=thread_header,
        )
        return store.append(build_message(outgoing), persona.email).mail_id

    def _count_replies(self) -> int:
        return sum(1 for exchange in self.exchanges() if exchange.status in _ANSWERED)

    def exchanges(self) -> list[CoworkerExchange]:
        """The exchanges recorded in this world so far."""
        from mcp_servers._core.app_data import AppData

        data = AppData(self.apps_data_root, "coworkers")
        path = self.apps_data_root / EXCHANGES_FILE
        if data.stamp(path) is None:
            return []
        return read_exchanges(data.read_bytes(path))

    def _record(self, pending: _Pending, reply_id: str | None, written: _Written) -> None:
        from mcp_servers._core.app_data import AppData

        exchange = CoworkerExchange(
            persona=pending.persona.name,
            persona_email=pending.persona.email,
            channel=pending.channel,
            conversation=pending.conversation,
            message_id=pending.message_id,
            message=pending.message,
            reply_id=reply_id,
            reply=written.text,
            status=written.status,
            cached=written.cached,
            model=self.model.model if written.status == "replied" else None,
            usage=written.usage,
            cost_usd=written.cost_usd,
            error=written.error,
            sent_at=pending.sent_at,
            replied_at=_now_iso() if reply_id else None,
        )
        line = exchange.model_dump_json().encode("utf-8") + b"\n"
        data = AppData(self.apps_data_root, "coworkers")
        with self._write_lock, data.open_append(self.apps_data_root / EXCHANGES_FILE) as log:
            log.write(line)


def _address(value: str) -> str:
    from email.utils import parseaddr

    return (parseaddr(value)[1] or value).strip().lower()
