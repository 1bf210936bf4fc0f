"""A world under construction: where its files go and the facts tasks are derived from."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any


@dataclass
class WorldDraft:
    """``root`` holds ``filesystem/`` and ``.apps_data/``; ``facts`` is what tasks read."""

    world_id: str
    root: Path
    rng: random.Random
    user: dict[str, str]
    facts: dict[str, Any] = field(default_factory=dict)

    def fs(self, virtual_path: str) -> Path:
        """The real path of a filesystem path as the agent sees it (``/Data/x.csv``)."""
        path = self.root / "filesystem" / virtual_path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def apps(self, relative: str) -> Path:
        path = self.root / ".apps_data" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def text(self, virtual_path: str, content: str) -> None:
        self.fs(virtual_path).write_text(content.strip() + "\n", encoding="utf-8")


def business_hours(moment: datetime) -> datetime:
    """``moment`` moved forward, if needed, into a weekday between 8:00 and 19:00 (its own zone)."""
    if moment.hour >= 19:
        moment = (moment + timedelta(days=1)).replace(hour=8)
    elif moment.hour < 8:
        moment = moment.replace(hour=8)
    while moment.weekday() >= 5:
        moment = (moment + timedelta(days=1)).replace(hour=8)
    return moment


def filler_mail(
    draft: WorldDraft,
    *,
    prefix: str,
    threads: list[tuple[str, list[str]]],
    people: list[dict[str, str]],
    start: datetime,
    span_days: int,
) -> list[dict[str, Any]]:
    """Background mail threads in the user's mailbox: each ``(subject, [bodies])`` becomes a
    message plus replies between two of three participants, one of them the user (as sender,
    recipient or Cc), during business hours of ``start``'s zone."""
    rng = draft.rng
    others = [p for p in people if p["email"] != draft.user["email"]]
    messages: list[dict[str, Any]] = []
    for number, (subject, bodies) in enumerate(threads):
        when = business_hours(start + timedelta(days=rng.randrange(span_days), hours=rng.randrange(8, 18)))
        cast = rng.sample(others, 2)
        cast.insert(rng.randrange(3), draft.user)
        previous = None
        for reply, body in enumerate(bodies):
            sender, recipient = (cast[0], cast[1]) if reply % 2 == 0 else (cast[1], cast[0])
            key = f"{prefix}-{number:02d}-{reply}"
            messages.append(
                {
                    "key": key,
                    "sender": sender,
                    "to": [recipient],
                    # The Cc'd person stays on the thread, so a user in Cc sees every reply.
                    "cc": [cast[2]],
                    "date": when,
                    "subject": subject if reply == 0 else f"Re: {subject}",
                    "body": f"Hi {recipient['name'].split()[0]},\n\n{body}\n\nBest,\n{sender['name'].split()[0]}",
                    "reply_to": previous,
                }
            )
            previous = key
            when = business_hours(when + timedelta(hours=rng.randrange(1, 6), minutes=rng.randrange(60)))
    return messages


def filler_chat(
    draft: WorldDraft, lines: list[str], people: list[dict[str, str]], start: datetime, count: int
) -> list[dict[str, Any]]:
    """``count`` chat messages drawn from ``lines``, during business hours of ``start``'s zone:
    roughly a third reply to a recent root post, a fifth carry a reaction."""
    rng = draft.rng
    messages: list[dict[str, Any]] = []
    roots: list[int] = []
    when = start
    for index in range(count):
        when = business_hours(when + timedelta(minutes=rng.randrange(5, 240)))
        spec: dict[str, Any] = {"author": rng.choice(people), "at": when, "text": lines[index % len(lines)]}
        if roots and rng.random() < 0.35:
            spec["topic"] = rng.choice(roots[-4:])
        else:
            roots.append(index)
        if rng.random() < 0.2:
            spec["reactions"] = [(rng.choice(["👍", "🎉", "✅", "👀"]), rng.sample(people, 2))]
        messages.append(spec)
    return messages
