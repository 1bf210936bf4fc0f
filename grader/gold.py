"""Gold worlds: the before/after snapshot pair a correct solution would leave, for judge validation.

"Before" is the world zip with the task's overlay.  "After" adds the gold files
(``GoldOutput.files[].source`` -> ``path``; the loader fills them from APEX's
``gold_files/<task_id>/filesystem/``) and the app-data effects of the reference
solution's writing steps (``mail_send_mail``, ``calendar_create_event``,
``chat_post_message``, ``chat_reply_to_thread``), written the way our MCP servers write them
(interfaces.md).  Other steps (reads, file edits) are not replayed: file results come from gold files.
"""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path
from typing import Any

from atoll.benchmark import Benchmark, GoldFile, Task
from atoll.errors import AtollError, ErrorCode
from atoll.members import is_zip_symlink
from atoll.trajectory import AgentReportedStatus, RunStatus, Trajectory
from grader.snapshot import _clean_name, member_path

GOLD_TIME = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


@dataclass
class GoldWorld:
    before: Path
    after: Path
    trajectory: Trajectory
    replayed: list[str]


def _read_world(benchmark: Benchmark, task: Task) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    archive_path = benchmark.world_archives.get(task.world_id)
    if archive_path:
        with zipfile.ZipFile(archive_path) as archive:
            for info in archive.infolist():
                name = _clean_name(info.filename)
                if (
                    name
                    and not info.is_dir()
                    and not is_zip_symlink(info)  # as the snapshot reader: a link is no file
                    and (name.startswith("filesystem/") or name.startswith(".apps_data/"))
                ):
                    members[name] = archive.read(info)
    for subsystem, seed in sorted(benchmark.world_seeds.get(task.world_id, {}).items()):
        # v1.1 seeds: one tar.gz per subsystem, rooted at it.
        with tarfile.open(seed, "r:gz") as archive:
            for member in archive:
                name = _clean_name(f"{subsystem}/{member.name}")
                extracted = archive.extractfile(member) if member.isfile() else None
                if name and extracted is not None:
                    members[name] = extracted.read()
    overlay = benchmark.task_overlays.get(task.task_id)
    if overlay:
        root = Path(overlay)
        for file in sorted(root.rglob("*")):
            if file.is_file() and not file.is_symlink():
                name = file.relative_to(root).as_posix()
                if name.startswith("filesystem/") or name.startswith(".apps_data/"):
                    members[name] = file.read_bytes()
    return members


def write_tar(path: Path, members: dict[str, bytes]) -> Path:
    """A snapshot tar.gz (sorted members, normalised owners and times)."""
    with tarfile.open(path, "w:gz") as archive:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            info.mtime = 0
            archive.addfile(info, io.BytesIO(members[name]))
    return path


def _gold_source(benchmark: Benchmark, task: Task, gold: GoldFile) -> Path:
    extra = gold.model_extra or {}
    source = extra.get("source")
    candidates = []
    if source:
        candidates += [Path(source), Path(benchmark.root) / source]
    candidates.append(
        Path(benchmark.root) / "gold_files" / task.task_id / "filesystem" / gold.path.lstrip("/")
    )
    for candidate in candidates:
        if candidate.is_absolute() and candidate.is_file():
            return candidate
    raise AtollError(
        ErrorCode.gold_missing,
        f"task {task.task_id}: gold file for {gold.path} not found (source {source!r})",
    )


# --- app-data effects of reference steps ---------------------------------------------------


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _send_mail(members: dict[str, bytes], arguments: dict[str, Any], user_email: str) -> None:
    message = EmailMessage()
    message["From"] = arguments.get("from_email") or user_email
    message["To"] = ", ".join(_as_list(arguments.get("to_email")))
    if arguments.get("cc"):
        message["Cc"] = ", ".join(_as_list(arguments["cc"]))
    message["Subject"] = str(arguments.get("subject", ""))
    message["Date"] = format_datetime(GOLD_TIME)
    message["Message-ID"] = make_msgid(domain="atoll.gold")
    message.set_content(str(arguments.get("body", "")))
    for attachment in _as_list(arguments.get("attachments")):
        data = members.get(member_path(attachment), b"")
        message.add_attachment(
            data, maintype="application", subtype="octet-stream", filename=Path(attachment).name
        )
    boxes = sorted(p for p in members if p.startswith(".apps_data/mail/") and p.endswith(".mbox"))
    target = boxes[0] if boxes else ".apps_data/mail/Sent.mbox"
    body = message.as_bytes().replace(b"\nFrom ", b"\n>From ")
    envelope = f"From {message['From']} {GOLD_TIME.strftime('%a %b %d %H:%M:%S %Y')}\n".encode()
    existing = members.get(target, b"")
    separator = b"" if not existing or existing.endswith(b"\n\n") else b"\n"
    members[target] = existing + separator + envelope + body + b"\n\n"


def _contacted(members: dict[str, bytes], arguments: dict[str, Any], number: int) -> None:
    """A mail to a persona of the world is recorded as the coworker engine records it with no
    coworker model: the persona is unavailable (docs/coworkers.md)."""
    from atoll.coworkers import (
        EXCHANGES_FILE,
        PERSONAS_FILE,
        CoworkerExchange,
        parse_personas,
        unavailable_reply,
    )

    personas_file = members.get(f".apps_data/{PERSONAS_FILE}")
    if personas_file is None:
        return
    recipients = {
        address.lower() for address in _as_list(arguments.get("to_email")) + _as_list(arguments.get("cc"))
    }
    lines = b""
    for persona in parse_personas(personas_file):
        if "mail" in persona.channels and persona.email.lower() in recipients:
            exchange = CoworkerExchange(
                persona=persona.name,
                persona_email=persona.email,
                channel="mail",
                conversation=f"gold{number}",
                message_id=f"gold{number}",
                message=str(arguments.get("body", ""))[:2_000],
                reply=unavailable_reply(persona),
                status="unavailable",
                sent_at=GOLD_TIME.isoformat(),
            )
            lines += exchange.model_dump_json().encode() + b"\n"
    if lines:
        path = f".apps_data/{EXCHANGES_FILE}"
        members[path] = members.get(path, b"") + lines


def _create_event(members: dict[str, bytes], arguments: dict[str, Any], user_email: str) -> None:
    from icalendar import Calendar, Event, vCalAddress

    def when(value: dict[str, Any]) -> Any:
        from zoneinfo import ZoneInfo

        if "dateTime" in value:
            moment = datetime.fromisoformat(value["dateTime"])
            if moment.tzinfo is None and value.get("timeZone"):
                moment = moment.replace(tzinfo=ZoneInfo(value["timeZone"]))
            return moment
        return datetime.fromisoformat(value["date"]).date()

    target = f".apps_data/calendar/{user_email}.ics"
    if target not in members:
        found = sorted(p for p in members if p.startswith(".apps_data/calendar/") and p.endswith(".ics"))
        target = found[0] if found else target
    calendar = Calendar.from_ical(members[target]) if target in members else Calendar()
    if target not in members:
        calendar.add("prodid", "-//atoll gold//EN")
        calendar.add("version", "2.0")
    event = Event()
    event.add("uid", make_msgid(domain="atoll.gold").strip("<>"))
    event.add("summary", arguments.get("summary", ""))
    event.add("dtstart", when(arguments["start"]))
    event.add("dtend", when(arguments["end"]))
    event.add("dtstamp", GOLD_TIME)
    for key in ("description", "location"):
        if arguments.get(key):
            event.add(key, arguments[key])
    for attendee in arguments.get("attendees") or []:
        address = attendee.get("email") if isinstance(attendee, dict) else str(attendee)
        event.add("attendee", vCalAddress(f"mailto:{address}"))
    calendar.add_component(event)
    members[target] = calendar.to_ical()


def _chat(members: dict[str, bytes], arguments: dict[str, Any], user: dict[str, str], reply: bool) -> None:
    channel = str(arguments.get("channel_id", ""))
    paths = [
        p
        for p in members
        if p.startswith(".apps_data/chat/") and p.endswith(f"/Groups/{channel}/messages.json")
    ]
    if not paths:
        raise AtollError(ErrorCode.gold_replay, f"chat channel {channel!r} not found in the world")
    document = json.loads(members[paths[0]])
    count = len(document.get("messages", []))
    if reply:
        topic = str(arguments.get("post_id", "")).split("/")[
            -2 if "/" in str(arguments.get("post_id")) else -1
        ]
        unique = f"gold{count}"
    else:
        topic = unique = f"gold{count}"
    document.setdefault("messages", []).append(
        {
            "creator": {"name": user["name"], "email": user["email"], "user_type": "Human"},
            "created_date": "Friday, March 1, 2024 at 12:00:00 PM UTC",
            "text": str(arguments.get("message", "")),
            "topic_id": topic,
            "message_id": f"{channel}/{topic}/{unique}",
            "reactions": [],
            "annotations": [],
        }
    )
    members[paths[0]] = json.dumps(document, indent=2, ensure_ascii=False).encode()


def build_gold_world(benchmark: Benchmark, task: Task, workdir: Path) -> GoldWorld:
    """Write ``before.tar.gz`` and ``after.tar.gz`` for ``task``'s gold output under ``workdir``.

    Raises AtollError when the task has neither gold output nor reference solution, or a gold
    file is missing.
    """
    if task.gold_output is None and task.reference_solution is None:
        raise AtollError(ErrorCode.gold_missing, f"task {task.task_id}: no gold output or reference solution")
    workdir.mkdir(parents=True, exist_ok=True)
    members = _read_world(benchmark, task)
    before = write_tar(workdir / "before.tar.gz", members)
    world = benchmark.world(task.world_id)
    extra = world.model_extra or {}
    user = {"name": str(extra.get("user_name", "")), "email": str(extra.get("user_email", ""))}
    after_members = dict(members)
    for gold in task.gold_output.files if task.gold_output else []:
        after_members[member_path(gold.path)] = _gold_source(benchmark, task, gold).read_bytes()
    replayed: list[str] = []
    for step in task.reference_solution.steps if task.reference_solution else []:
        if step.tool == "mail_send_mail":
            _send_mail(after_members, step.arguments, user["email"])
            _contacted(after_members, step.arguments, len(replayed))
        elif step.tool == "calendar_create_event":
            _create_event(after_members, step.arguments, user["email"])
        elif step.tool in ("chat_post_message", "chat_reply_to_thread"):
            _chat(after_members, step.arguments, user, reply=step.tool == "chat_reply_to_thread")
        else:
            continue
        replayed.append(step.tool)
    after = write_tar(workdir / "after.tar.gz", after_members)
    answer = (task.gold_output.answer if task.gold_output else None) or (
        task.reference_solution.final_answer if task.reference_solution else ""
    )
    trajectory = Trajectory(
        task_id=task.task_id,
        agent="gold",
        model="gold",
        status=RunStatus.completed,
        agent_reported_status=AgentReportedStatus.completed,
        final_answer=answer,
        started_at=GOLD_TIME,
        ended_at=GOLD_TIME,
    )
    return GoldWorld(before=before, after=after, trajectory=trajectory, replayed=replayed)
