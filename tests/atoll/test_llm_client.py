"""atoll.llm.complete through litellm against the scripted OpenAI-compatible server: which
errors are retried, how long a call may take, and what the error line says."""

from __future__ import annotations

import time

import pytest

from atoll.llm import (
    CostLedger,
    Endpoint,
    ModelError,
    ModelErrorKind,
    ProviderLimiter,
    RetryBudget,
    RetryPolicy,
    complete,
)
from atoll.testing.scripted_llm import ScriptedLLM, refused_api_base

OK = {"content": "fine"}
MESSAGES = [{"role": "user", "content": "hi"}]


def fast(**overrides) -> RetryPolicy:
    values = {"max_retries": 3, "initial_wait_s": 0.0, "max_wait_s": 5.0, "budget": RetryBudget(10)}
    values.update(overrides)
    return RetryPolicy(**values)


async def call(endpoint: Endpoint, **options):
    options.setdefault("retry", fast())
    options.setdefault("limiter", ProviderLimiter())
    options.setdefault("ledger", CostLedger())
    return await complete(endpoint, MESSAGES, **options)


async def test_a_401_is_a_configuration_error_sent_once_naming_model_and_url():
    body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    with ScriptedLLM([{"status": 401, "body": body}, OK]) as llm:
        with pytest.raises(ModelError) as raised:
            await call(Endpoint("openai/judge", llm.api_base, "wrong"))
        assert len(llm.requests) == 1
        api_base = llm.api_base
    error = raised.value
    assert error.kind is ModelErrorKind.configuration and error.retries == 0
    assert str(error) == (
        f"configuration error from model endpoint openai/judge at {api_base}: "
        "HTTP 401: Incorrect API key provided"
    )


async def test_a_missing_key_is_a_configuration_error_at_once(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    started = time.monotonic()
    with pytest.raises(ModelError) as raised:
        await call(Endpoint("openai/gpt-4o-mini"), retry=fast(initial_wait_s=5.0))
    assert raised.value.kind is ModelErrorKind.configuration and raised.value.retries == 0
    assert "Missing credentials" in str(raised.value) and "openai's default endpoint" in str(raised.value)
    assert time.monotonic() - started < 5.0  # no backoff was waited


# The refused address is made when the test runs: a port found free at collection time may be
# taken by then, and pytest-xdist needs the same test ids on every worker.
@pytest.mark.parametrize(
    "api_base, reason",
    [
        (None, "connection refused"),
        ("http://atoll-no-such-host.invalid/v1", "host name does not resolve"),
    ],
    ids=["refused", "unresolvable"],
)
async def test_an_api_base_with_nothing_behind_it_is_a_configuration_error(api_base, reason):
    api_base = api_base or refused_api_base()
    with pytest.raises(ModelError) as raised:
        await call(Endpoint("openai/x", api_base, "k"), retry=fast(initial_wait_s=5.0))
    assert raised.value.kind is ModelErrorKind.configuration and raised.value.retries == 0
    assert api_base in str(raised.value) and reason in str(raised.value)


async def test_retry_after_is_honoured_and_server_errors_are_retried():
    script = [{"status": 429, "headers": {"Retry-After": "1"}}, {"status": 503}, OK]
    with ScriptedLLM(script) as llm:
        started = time.monotonic()
        done = await call(Endpoint("openai/x", llm.api_base, "k"))
    took = time.monotonic() - started
    # The asked second, not the 0 s backoff; once: the 503 after it is backed off (0 s) again.
    assert 1.0 <= took < 1.95
    assert done.text == "fine" and done.retries == 2
    assert [reason.split(":")[0] for reason in done.recovered_from] == ["rate_limited", "transient"]


async def test_content_errors_are_not_retried():
    with ScriptedLLM([{"status": 400}, OK]) as llm:
        with pytest.raises(ModelError) as raised:
            await call(Endpoint("openai/x", llm.api_base, "k"))
        assert len(llm.requests) == 1 and raised.value.kind is ModelErrorKind.content


async def test_a_hung_server_is_bounded_by_the_attempt_timeout():
    with ScriptedLLM([{"hang": True}, {"hang": True}, OK]) as llm:
        started = time.monotonic()
        done = await call(Endpoint("openai/x", llm.api_base, "k"), timeout_s=0.5)
        elapsed = time.monotonic() - started
    assert done.text == "fine" and done.retries == 2 and elapsed < 5
    assert done.recovered_from[0] == "transient: no answer within 0.5 s"


async def test_the_deadline_bounds_a_call_and_its_retries_together():
    with ScriptedLLM(lambda request: {"hang": True}) as llm:
        started = time.monotonic()
        with pytest.raises(ModelError) as raised:
            await call(
                Endpoint("openai/x", llm.api_base, "k"),
                timeout_s=1.0,
                retry=fast(max_retries=50, deadline_s=2.5),
            )
        elapsed = time.monotonic() - started
    assert elapsed < 4.5 and raised.value.kind is ModelErrorKind.transient
    assert "deadline of 2.5 s" in str(raised.value)


async def test_the_retry_budget_is_shared_by_the_calls_that_hold_it():
    budget = RetryBudget(1)
    with ScriptedLLM([{"status": 503}, OK, {"status": 503}, OK]) as llm:
        await call(Endpoint("openai/x", llm.api_base, "k"), retry=fast(budget=budget))
        with pytest.raises(ModelError) as raised:
            await call(Endpoint("openai/x", llm.api_base, "k"), retry=fast(budget=budget))
        assert len(llm.requests) == 3
    assert "retry budget spent" in str(raised.value)


async def test_the_cost_ledger_records_every_call_and_its_ceiling_stops_new_ones():
    ledger = CostLedger(ceiling_usd=0.01)
    with ScriptedLLM([OK, OK]) as llm:
        await call(
            Endpoint("openai/x", llm.api_base, "k"), ledger=ledger, cost=lambda response: 0.02, role="judge"
        )
        with pytest.raises(ModelError) as raised:
            await call(Endpoint("openai/x", llm.api_base, "k"), ledger=ledger, cost=lambda response: 0.02)
        assert len(llm.requests) == 1
    assert raised.value.kind is ModelErrorKind.cost_ceiling
    assert ledger.spent_by_role() == {"judge": 0.02}


async def test_a_429_halves_the_providers_window():
    limiter = ProviderLimiter({"openai": 8})
    with ScriptedLLM([{"status": 429}, OK]) as llm:
        await call(Endpoint("openai/x", llm.api_base, "k"), limiter=limiter)
    assert limiter.limit("openai") == 5  # halved to 4, then one clean call widened it
