"""The raw model exchanges of a run, recorded on request (``AgentConfig.record_raw``).

For each model call: the request exactly as it went to ``litellm.acompletion`` (model,
messages, tools, generation parameters, endpoint, stream options) and litellm's response as it
came back (or the error), bounded per run by ``record_raw_max_bytes``. A key never enters it:
:func:`atoll.llm.complete` hands over the request before the key is added, and the text is
passed through :func:`atoll.llm.endpoints.redact` (every key-like environment variable's value)
and stripped of the endpoint's own key. The orchestrator stores it beside the trajectory as
``raw_model_calls.jsonl`` (one exchange a line), never inside it: a trajectory stays small.
"""

from __future__ import annotations

import json
from typing import Any

from atoll.llm.endpoints import redact


class RawRecorder:
    """Collects a run's exchanges until ``max_bytes`` of them are kept; past that an exchange
    is kept as ``{"step", "omitted": bytes}`` so the steps stay numbered."""

    def __init__(self, max_bytes: int, *, secrets: tuple[str | None, ...] = ()) -> None:
        self.max_bytes = max_bytes
        self.records: list[dict[str, Any]] = []
        self.kept_bytes = 0
        self._secrets = tuple(secret for secret in secrets if secret)
        self._request: str | None = None

    def request(self, call: dict[str, Any]) -> None:
        """Keep an attempt's request (serialised now: providers' adapters may edit it later)."""
        self._request = self._clean(json.dumps(call, ensure_ascii=False, default=str))

    def add(self, step: int, *, response: Any = None, error: str | None = None, retries: int = 0) -> None:
        """Record step ``step``'s exchange: the last request sent and ``response`` (or ``error``)."""
        request, self._request = self._request, None
        body = _plain(response) if response is not None else None
        record = {
            "step": step,
            "retries": retries,
            "request": json.loads(request) if request else None,
            "response": json.loads(self._clean(json.dumps(body, ensure_ascii=False, default=str)))
            if body is not None
            else None,
            "error": self._clean(error) if error else None,
        }
        size = len(json.dumps(record, ensure_ascii=False).encode())
        if self.kept_bytes + size > self.max_bytes:
            self.records.append({"step": step, "omitted": size})
            return
        self.kept_bytes += size
        self.records.append(record)

    def _clean(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return redact(text)


def _plain(response: Any) -> Any:
    """litellm's response as plain JSON data (its pydantic dump when it has one)."""
    if hasattr(response, "model_dump"):
        try:
            return response.model_dump(mode="json")
        except Exception:  # noqa: BLE001 - a provider object pydantic cannot dump: its text
            return str(response)
    return response


__all__ = ["RawRecorder"]
