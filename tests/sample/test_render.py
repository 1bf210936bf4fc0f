"""World files kept as data (atoll_sample/worlds/*.yaml) render through the file writers."""

from __future__ import annotations

import json
import mailbox
import random
import re
from email.header import decode_header, make_header

import icalendar
import pytest
import yaml

from atoll.errors import AtollError
from atoll_sample import people
from atoll_sample._tasks import TASKS, tasks_from_data
from atoll_sample._world import WorldDraft
from atoll_sample.people import PRIYA, TOMAS
from atoll_sample.render import WORLDS, render_apps, render_files
from tests.sample.conftest import CONSULTING, DEAL

WORLD_OF = {  # data file -> its world
    "keystone_background": CONSULTING,
    "keystone_engagement": CONSULTING,
    "atlas_background": DEAL,
    "atlas_financials": DEAL,
    "atlas_legal": DEAL,
}
APPS_OF = {"keystone_apps": CONSULTING, "atlas_apps": DEAL}  # apps data file -> its world


def _draft(tmp_path) -> WorldDraft:
    return WorldDraft("world_test", tmp_path, random.Random(0), PRIYA)


def test_every_listed_file_is_in_the_generated_world(worlds):
    assert sorted(path.stem for path in WORLDS.glob("*.yaml")) == sorted(WORLD_OF | APPS_OF)
    for name, world_id in WORLD_OF.items():
        data = yaml.safe_load((WORLDS / f"{name}.yaml").read_text(encoding="utf-8"))
        facts, filesystem = data.get("facts", {}), worlds[world_id] / "filesystem"
        missing = []
        for entry in data["files"]:
            each = entry.get("each")
            if each and each not in facts:  # one file per item of a computed list: at least one
                pattern = re.sub(r"\{[^}]*\}", "*", entry["path"]).lstrip("/")
                missing += [] if list(filesystem.glob(pattern)) else [entry["path"]]
                continue
            paths = [_resolved(entry["path"], facts | item) for item in (facts[each] if each else [{}])]
            missing += [path for path in paths if not (filesystem / path.lstrip("/")).is_file()]
        assert missing == [], name


def _resolved(text: str, facts: dict) -> str:
    """``text`` with ``{PERSON.field}`` and ``{fact}`` filled in, as the renderer does."""
    return re.sub(r"\{([A-Z]+)\.(\w+)\}", lambda m: vars(people)[m[1]][m[2]], text).format_map(facts)


@pytest.mark.parametrize("name", sorted(APPS_OF))
def test_every_listed_message_event_and_chat_group_is_in_the_generated_world(worlds, name):
    data = yaml.safe_load((WORLDS / f"{name}.yaml").read_text(encoding="utf-8"))
    apps = worlds[APPS_OF[name]] / ".apps_data"
    facts = data["facts"]

    mail = data["mail"]
    messages = list(mailbox.mbox(apps / mail["path"]))
    keys = {m["Message-ID"].strip("<>").split("@")[0] for m in messages}
    assert [spec["key"] for spec in mail["messages"] if spec["key"] not in keys] == []
    subjects = [str(make_header(decode_header(m["Subject"]))).removeprefix("Re: ") for m in messages]
    threads = mail["filler"]["threads"]
    assert [subjects.count(t["subject"]) for t in threads] == [len(t["bodies"]) for t in threads]
    assert len(messages) == len(mail["messages"]) + sum(len(t["bodies"]) for t in threads)

    for calendar in data["calendars"]:
        ics = icalendar.Calendar.from_ical((apps / _resolved(calendar["path"], facts)).read_bytes())
        assert [str(e["UID"]) for e in ics.walk("VEVENT")] == [e["uid"] for e in calendar["events"]]

    groups = apps / data["chat"]["path"] / "Groups"
    listed = [_resolved(group["group_id"], facts) for group in data["chat"]["groups"]]
    assert sorted(folder.name for folder in groups.iterdir()) == sorted(listed)
    for group_id, group in zip(listed, data["chat"]["groups"], strict=True):
        records = json.loads((groups / group_id / "messages.json").read_text(encoding="utf-8"))["messages"]
        own = [item["text"] for item in group.get("messages", [])]
        assert len(records) == group.get("filler", {}).get("count", 0) + len(own), group_id
        assert [record["text"] for record in records[len(records) - len(own) :]] == own


def test_a_person_field_is_filled_in_from_the_cast(tmp_path):
    data_file = tmp_path / "world.yaml"
    data_file.write_text(
        "files:\n"
        "  - {path: /roster.txt, kind: text, body: '{TOMAS.name} <{TOMAS.email}>'}\n"
        '  - {path: /raw.csv, kind: exact, body: "a,b\\n1,2\\n"}\n',
        encoding="utf-8",
    )
    draft = _draft(tmp_path / "world")
    render_files(draft, data_file)
    assert draft.fs("/roster.txt").read_text(encoding="utf-8") == f"{TOMAS['name']} <{TOMAS['email']}>\n"
    assert draft.fs("/raw.csv").read_bytes() == b"a,b\n1,2\n"


def test_a_files_data_file_fills_computed_values_in(tmp_path):
    data_file = tmp_path / "world.yaml"
    data_file.write_text(
        "facts: {report: /r.csv, notes: [{plant: Aurora}, {plant: Macon}]}\n"
        "files:\n"
        "  - {path: '{report}', kind: csv, rows: [[plant, fte], '{rows}', [Total, '{total}']]}\n"
        "  - {path: '/{plant}.md', each: notes, kind: text, body: '{plant}: {total} in all'}\n",
        encoding="utf-8",
    )
    draft = _draft(tmp_path / "world")

    def compute(draft: WorldDraft) -> None:
        draft.facts |= {"rows": [["Aurora", 3], ["Macon, GA", 4]], "total": 7}

    render_files(draft, data_file, compute)
    assert draft.fs("/r.csv").read_text(encoding="utf-8") == 'plant,fte\nAurora,3\n"Macon, GA",4\nTotal,7\n'
    assert draft.fs("/Macon.md").read_text(encoding="utf-8") == "Macon: 7 in all\n"
    with pytest.raises(AtollError, match=r"world.yaml: \{report\} uses 'rows' with no value"):
        render_files(_draft(tmp_path / "other"), data_file)


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ("{path: /a.txt, kind: text, body: '{NOBODY.name}'}", "{NOBODY.name}: NOBODY is no person"),
        ("{path: /a.odt, kind: odt, body: x}", "/a.odt has unknown kind 'odt'"),
    ],
    ids=["unknown-person", "unknown-kind"],
)
def test_a_mistake_in_a_data_file_is_one_line_naming_it(tmp_path, entry, named):
    data_file = tmp_path / "world.yaml"
    data_file.write_text(f"files:\n  - {entry}\n", encoding="utf-8")
    with pytest.raises(AtollError) as raised:
        render_files(_draft(tmp_path / "world"), data_file)
    assert named in raised.value.message and "\n" not in raised.value.message


def test_every_task_data_file_is_in_the_generated_benchmark(tasks):
    for data_file in sorted(TASKS.glob("*.yaml")):
        stated = [
            entry["task_id"] for entry in yaml.safe_load(data_file.read_text(encoding="utf-8"))["tasks"]
        ]
        assert [task_id for task_id in stated if task_id not in tasks] == [], data_file.name


def test_a_task_takes_its_values_whole_or_formatted(tmp_path, monkeypatch):
    (tmp_path / "made_up.yaml").write_text(
        "domain: Law\n"
        "tasks:\n"
        "  - task_id: t-1\n"
        "    name: A made-up task\n"
        "    output: message_in_console\n"
        "    prompt: 'What is {{x}}? About {x:.1f}.'\n"
        "    rubric:\n"
        "      - criteria: 'x is {x:,.2f}'\n"
        "        grading_target: {kind: final_answer}\n"
        "        check: {kind: answer_number, value: '{x}', tolerance: 0.5}\n"
        "    steps: [{tool: code_exec, arguments: {lines: '{lines}'}}]\n"
        "    final_answer: 'x is {x}.'\n",
        encoding="utf-8",
    )
    monkeypatch.setattr("atoll_sample._tasks.TASKS", tmp_path)
    [task] = tasks_from_data("made_up", "world_test", tmp_path, {"t-1": {"x": 1234.5, "lines": ["a", "b"]}})
    assert (task.prompt, task.domain, task.rubric[0].criteria) == (
        "What is {x}? About 1234.5.",
        "Law",
        "x is 1,234.50",
    )
    assert (task.rubric[0].verifier_id, task.rubric[0].check.value) == ("t-1-c1", 1234.5)
    assert task.reference_solution.steps[0].arguments == {"lines": ["a", "b"]}
    with pytest.raises(AtollError, match="made_up.yaml: task t-1 uses 'lines' with no value"):
        tasks_from_data("made_up", "world_test", tmp_path, {"t-1": {"x": 1}})


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"sender": "NOBODY"}, "NOBODY is no person"),
        ({"to": ["KEYSTONE_TEAM"], "sender": "KEYSTONE_TEAM"}, "KEYSTONE_TEAM is a list of people"),
        ({"subject": "About {nowhere}"}, "world.yaml: uses 'nowhere' with no value"),
        ({"date": "2024-02-27 16:42"}, "'2024-02-27 16:42' is neither a day nor"),
        ({"date": "2024-02-27 16:42 Mars/Olympus"}, "'2024-02-27 16:42 Mars/Olympus' is neither"),
    ],
    ids=["unknown-person", "list-for-one", "unknown-fact", "moment-without-zone", "unknown-zone"],
)
def test_a_mistake_in_an_apps_data_file_is_one_line_naming_it(tmp_path, change, named):
    message = {"key": "m-1", "sender": "PRIYA", "to": ["TOMAS"], "date": "2024-02-27 16:42 UTC"}
    message |= {"subject": "Hello", "body": "Hi"} | change
    data = {
        "mail": {
            "path": "mail/box.mbox",
            "filler": {
                "prefix": "x",
                "people": ["PRIYA"],
                "start": "2024-01-09 00:00 UTC",
                "span_days": 1,
                "threads": [],
            },
            "messages": [message],
        },
        "calendars": [],
        "chat": {"path": "chat", "user_id": "1", "start": "2024-01-09 00:00 UTC", "lines": [], "groups": []},
    }
    data_file = tmp_path / "world.yaml"
    data_file.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(AtollError) as raised:
        render_apps(_draft(tmp_path / "world"), data_file)
    assert named in raised.value.message and "\n" not in raised.value.message


def test_an_apps_data_file_sets_its_facts_and_the_counts(tmp_path):
    data_file = tmp_path / "world.yaml"
    data_file.write_text(
        "facts: {room: Boardroom 3}\n"
        "mail: {path: mail/box.mbox, messages: [],\n"
        "  filler: {prefix: x, people: [PRIYA, TOMAS, ZOE], start: 2024-01-09 00:00 UTC, span_days: 1,\n"
        "           threads: [{subject: Hello, bodies: [One, Two]}]}}\n"
        "calendars: [{path: 'calendar/{PRIYA.email}.ics', name: '{PRIYA.name}', events: [\n"
        "  {uid: e-1, summary: 'In {room}', start: 2024-03-12, end: 2024-03-13, attendees: [TOMAS]}]}]\n"
        "chat: {path: chat, user_id: '1', start: 2024-01-09 08:00 UTC, lines: [a, b], groups: [\n"
        "  {group_id: DM x, members: [PRIYA, TOMAS], filler: {count: 3}, deleted: [1],\n"
        "   messages: [{author: TOMAS, at: 2024-03-01 09:00 UTC, text: c},\n"
        "              {author: PRIYA, at: 2024-03-01 09:05 UTC, text: d, topic: 0}]}]}\n",
        encoding="utf-8",
    )
    draft = _draft(tmp_path / "world")
    render_apps(draft, data_file)
    assert draft.facts == {"room": "Boardroom 3", "mail_count": 2, "event_count": 1, "chat_count": 5}
    ics = icalendar.Calendar.from_ical(draft.apps(f"calendar/{PRIYA['email']}.ics").read_bytes())
    assert [str(e["SUMMARY"]) for e in ics.walk("VEVENT")] == ["In Boardroom 3"]
    records = json.loads(draft.apps("chat/Groups/DM x/messages.json").read_text(encoding="utf-8"))["messages"]
    assert [r["text"] for r in records][1:] == ["", "a", "c", "d"]
    assert records[4]["topic_id"] == records[3]["topic_id"] != records[2]["topic_id"]
