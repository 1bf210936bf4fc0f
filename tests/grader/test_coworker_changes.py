"""Exchanges with personas in the grader: typed changes, the judge's evidence, coworker_contacted."""

from __future__ import annotations

import pytest

from atoll.benchmark import Criterion
from atoll.coworkers import CoworkerExchange
from grader import Snapshot, diff_snapshots
from grader.checks import run_check
from tests.grader import factories as f

LOG = ".apps_data/coworkers/exchanges.jsonl"


def _line(**fields) -> str:
    exchange = {
        "persona": "Margaret Chen",
        "persona_email": "margaret@client.example",
        "channel": "chat",
        "conversation": "DM m1",
        "message_id": "m1/a/a",
        "message": "What target did the board approve?",
        "reply_id": "m1/a/b",
        "reply": "7.5% of addressable spend.",
        "status": "replied",
        "sent_at": "2024-03-01T09:00:00+00:00",
    } | fields
    return CoworkerExchange.model_validate(exchange).model_dump_json() + "\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("coworkers")
    old = _line(message_id="old/1/1", message="an exchange of an earlier trial")
    before = f.write_snapshot(tmp / "b.tar.gz", {"filesystem/a.txt": "a", LOG: old})
    after = f.write_snapshot(
        tmp / "a.tar.gz",
        {
            "filesystem/a.txt": "a",
            LOG: old + _line() + _line(channel="mail", message_id="<x@y>", message="Budget?"),
        },
    )
    return diff_snapshots(Snapshot(before), Snapshot(after))


def test_the_typed_changes_and_the_evidence_show_the_conversation(world):
    assert [(e.channel, e.message) for e in world.changes.coworkers] == [
        ("chat", "What target did the board approve?"),
        ("mail", "Budget?"),
    ]
    artifact = next(a for a in world.artifacts if a.id == "coworker:m1/a/a:margaret@client.example")
    assert artifact.kind == "coworker"
    assert (
        "What target did the board approve?" in artifact.text
        and "7.5% of addressable spend." in artifact.text
    )


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        ({"persona": "Margaret Chen"}, True),
        ({"persona": "margaret@client.example", "channel": "mail"}, True),
        ({"persona": "Margaret Chen", "contains": ["board"]}, True),
        ({"persona": "Margaret Chen", "channel": "mail", "contains": ["board"]}, False),
        ({"persona": "Tomas Berg"}, False),
        (
            {"persona": "Margaret Chen", "contains": ["earlier trial"]},
            False,
        ),  # there before: not this trial's
    ],
)
def test_coworker_contacted(world, spec, passed):
    criterion = Criterion.model_validate(
        {"verifier_id": "c", "criteria": "asked", "check": {"kind": "coworker_contacted"} | spec}
    )
    assert run_check(criterion.check, "", world).passed is passed
