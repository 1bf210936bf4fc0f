"""The check every documented rule of an emulator gets: a request breaking it is refused, in the
provider's error format, for that rule alone; the same request keeping it is answered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.providers._server import ProviderEmulator, post_json

Edit = Callable[[dict[str, Any]], None]


def assert_refused_then_kept(
    emu: ProviderEmulator,
    url: str,
    rule: str,
    request: Callable[[], dict[str, Any]],
    break_rule: Edit,
    keep_rule: Edit,
) -> dict[str, Any]:
    """POST ``request()`` edited by ``break_rule`` to ``url`` (refused with 400 for ``rule``, its
    message the error's), then edited by ``keep_rule`` (answered 200, no new refusal); returns
    the refusal's body for the provider's own error-format checks."""
    broken = request()
    break_rule(broken)
    status, refusal = post_json(url, broken)
    assert status == 400, refusal
    assert [rejected_rule for rejected_rule, _ in emu.rejections] == [rule]
    assert emu.rejections[0][1] == refusal["error"]["message"]

    kept = request()
    keep_rule(kept)
    status, body = post_json(url, kept)
    assert status == 200, body
    assert len(emu.rejections) == 1
    return refusal
