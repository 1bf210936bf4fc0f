"""atoll.retry: the one Retry-After parser, the backoff, and the tenacity wait that honours a
server's Retry-After once. The callers (model calls, the Kubernetes API, webhooks) are each
tested over real HTTP beside their own code (test_llm_client, test_kubernetes_api,
test_events_api)."""

from __future__ import annotations

import email.utils

import httpx
import pytest
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from atoll.retry import backoff, honoured_wait, parse_retry_after, pause_s, wait_retry_after

NOW = 1_800_000_000.0  # a fixed "now" for the date form


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "120"}, 120.0),
        ({"retry-after": "0"}, 0.0),
        ({"RETRY-AFTER": " 7 "}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),  # milliseconds win when readable
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        (httpx.Headers({"Retry-After": "3"}), 3.0),
        ({"Retry-After": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"Retry-After": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),  # already past
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(headers, seconds):
    assert parse_retry_after(headers, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value",
    ["", "soon", "-5", "nan", "inf", "1e999", "Wed, 99 Foo 2015 07:28:00 GMT", "12 apples", "\x00"],
)
def test_garbage_is_no_retry_after(value):
    assert parse_retry_after({"Retry-After": value}, now=NOW) is None


def test_no_headers_is_no_retry_after():
    assert parse_retry_after(None) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Content-Type": "text/plain"}) is None


def test_a_retry_after_is_cut_to_the_cap_and_replaces_the_backoff():
    assert honoured_wait(backoff_s=4.0, asked_s=3600.0, cap_s=30.0) == 30.0
    assert honoured_wait(backoff_s=4.0, asked_s=1.0, cap_s=30.0) == 1.0  # shorter than the backoff
    assert honoured_wait(backoff_s=4.0, asked_s=None, cap_s=30.0) == 4.0


def test_the_backoff_doubles_up_to_its_ceiling_with_jitter_in_the_upper_half():
    plain = backoff(0.5, 3.0, jitter=False)
    assert [pause_s(plain, n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert pause_s(plain, 10_000) == 3.0  # no overflow however many failures
    assert pause_s(plain, 0) == 0.5  # a count from 0 is the first failure's
    assert pause_s(backoff(0.0, 60.0, jitter=False), 5) == 0.0  # no backoff asked
    jittered = backoff(1.0, 60.0)
    for attempt, ceiling in ((1, 1.0), (3, 4.0), (8, 60.0)):
        waits = {pause_s(jittered, attempt) for _ in range(50)}
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits) and len(waits) > 1


class _Refused(Exception):
    def __init__(self, retry_after_s: float | None) -> None:
        super().__init__("refused")
        self.retry_after_s = retry_after_s


def test_tenacity_waits_the_servers_retry_after_once_then_backs_off_again():
    asked = iter([None, 2.0, None, 500.0, None])
    slept: list[float] = []

    def fails() -> None:
        raise _Refused(next(asked))

    retrying = Retrying(
        retry=retry_if_exception_type(_Refused),
        wait=wait_retry_after(backoff(0.1, 10.0, jitter=False), cap_s=60.0),
        stop=stop_after_attempt(5),
        sleep=slept.append,
        reraise=True,
    )
    with pytest.raises(_Refused):
        retrying(fails)
    # backoff 0.1; the server's 2 s; backoff again (0.4: the third failure); 500 s cut to 60.
    assert slept == [0.1, 2.0, 0.4, 60.0]
