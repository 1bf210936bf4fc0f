"""The paper-sized benchmark (issue 30): the sample's worlds and tasks, grown to APEX's scale.

``generate_paper_benchmark(OUT)`` writes a v1-layout benchmark of 33 worlds and 480 tasks:

- each world is one of the sample's two worlds (alternating) under a new id, padded with
  background files of a shared drive (memos, workbooks, decks, PDFs, CSV exports, logs and
  notes under ``/Archive``, ``/Reference`` and ``/Exports``, folders no task reads) to 156
  files and 8.0 MB unpacked, which zip to 1.36–1.56 MB (1.2–1.4 MB as a snapshot tar.gz),
  the size measured in the issue; the padding is drawn from a generator seeded by ``seed``
  and the world id, so the same seed gives byte-identical worlds and no two worlds share a
  padded file;
- task ``i`` is the sample task ``i // worlds`` (cycling) of world ``i % worlds``'s base, with
  id ``p<i>-<sample task id>``; its overlay and gold files are copied under the new id;
- rubrics keep only the criteria with a programmatic check, so the replay agent passes every
  task when graded by checks alone (no judge).

Only worlds that get a task are written (``tasks < worlds`` writes ``tasks`` worlds).

    python benchmarks/paper_world.py OUT [--worlds 33] [--tasks 480] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from atoll_sample import generate_sample_benchmark  # noqa: E402
from atoll_sample._files import zip_tree  # noqa: E402
from atoll_sample.documents import write_document  # noqa: E402
from atoll_sample.generator import OUTPUTS  # noqa: E402
from atoll_sample.pdfs import write_pdf  # noqa: E402
from atoll_sample.sheets import Sheet, write_workbook  # noqa: E402
from atoll_sample.slides import write_deck  # noqa: E402

WORLD_FILES = 156
WORLD_BYTES = 8_000_000

_VENDORS = [
    "Arcadia Packaging Ltd",
    "Brightline Logistics",
    "Cobalt Facility Services",
    "Delmar Ingredients",
    "Everstone IT Solutions",
    "Fjord Cold Chain AS",
    "Granite Industrial Supply",
    "Harbor & Vale Insurance",
    "Ionic Lab Instruments",
    "Juniper Temp Staffing",
    "Keel Marine Freight",
    "Lattice Software GmbH",
    "Monarch Print & Label",
    "Northgate Energy",
    "Orchard Office Supplies",
    "Pinecrest Maintenance",
]
_ENTITIES = ["US01", "US02", "CA01", "DE01", "NL01", "PL01"]
_ACCOUNTS = ["5100 Raw materials", "5200 Packaging", "6100 Freight", "6300 Utilities", "6500 IT services"]
_CENTERS = ["CC-100 Plant ops", "CC-200 Quality", "CC-300 Logistics", "CC-400 Admin", "CC-500 R&D"]
_TOPICS = [
    "the quarterly supplier review",
    "the working-capital programme",
    "the integration readiness plan",
    "the audit committee pre-read",
    "the pricing governance update",
    "the plant maintenance backlog",
    "the data-room refresh",
    "the budget reforecast",
]
_SENTENCES = [
    "The team reviewed {topic} and agreed to revisit the open items at the next checkpoint.",
    "Figures for {entity} were reconciled against the ledger; variances above 2% are listed below.",
    "{vendor} confirmed the revised schedule, subject to the volume commitments in the framework agreement.",
    "Action: circulate the updated tracker for {topic} before Thursday's call.",
    "No change to the baseline was proposed; the assumptions in the March model still hold.",
    "Legal asked that any amendment to the {vendor} contract go through the standard approval route.",
    "The steering group noted that {entity} runs ahead of plan on savings but behind on compliance.",
    "Open question: whether the {account} accruals should be restated for the prior quarter.",
    "Headcount assumptions were left unchanged pending the HR data refresh.",
    "The risk log was updated; two items were closed and one new item was raised on {topic}.",
]
_LOG_EVENTS = [
    "INFO sync completed for folder {folder} ({count} items)",
    "INFO user {user} opened {doc}",
    "WARN retrying upload of {doc} (attempt {count})",
    "INFO permission granted to {user} on {folder}",
    "INFO version {count} saved for {doc}",
    "DEBUG index refreshed for {folder} in {count} ms",
]
_USERS = ["a.moreau", "b.tanaka", "c.oyelaran", "d.fischer", "e.novak", "f.almeida", "g.kowalski"]


def generate_paper_benchmark(out_dir: Path, *, worlds: int = 33, tasks: int = 480, seed: int = 0) -> Path:
    """Write the paper-sized benchmark into ``out_dir`` and return it.

    ``worlds`` worlds (only those that get a task) and ``tasks`` tasks; the same arguments
    give byte-identical files. Replaces what the sample generator writes (its ``OUTPUTS``)
    and nothing else in ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        target = out_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    with tempfile.TemporaryDirectory(prefix="atoll-paper-") as scratch:
        sample = generate_sample_benchmark(Path(scratch) / "sample", seed=seed)
        sample_tasks = json.loads((sample / "tasks_and_rubrics.json").read_text(encoding="utf-8"))
        bases = json.loads((sample / "world_descriptions.json").read_text(encoding="utf-8"))
        by_world = {
            base["world_id"]: [t for t in sample_tasks if t["world_id"] == base["world_id"]] for base in bases
        }
        descriptions: list[dict[str, Any]] = []
        for number in range(min(worlds, tasks)):
            base = bases[number % len(bases)]
            world_id = f"{base['world_id']}_{number:02d}"
            root = Path(scratch) / world_id
            with zipfile.ZipFile(sample / "world_files_zipped" / f"{base['world_id']}.zip") as archive:
                archive.extractall(root)
            _pad_world(root, random.Random(f"{seed}:{world_id}:padding"))
            zip_tree(root, out_dir / "world_files_zipped" / f"{world_id}.zip")
            shutil.rmtree(root)
            descriptions.append(
                {**base, "world_id": world_id, "world_name": f"{base['world_name']} (copy {number:02d})"}
            )
        records = []
        for index in range(tasks):
            world = descriptions[index % len(descriptions)]
            base_tasks = by_world[bases[(index % len(descriptions)) % len(bases)]["world_id"]]
            source = base_tasks[(index // len(descriptions)) % len(base_tasks)]
            task_id = f"p{index:03d}-{source['task_id']}"
            rubric = [criterion for criterion in source["rubric"] if criterion.get("check")]
            records.append({**source, "task_id": task_id, "world_id": world["world_id"], "rubric": rubric})
            for folder in ("task_files", "gold_files"):
                if (sample / folder / source["task_id"]).is_dir():
                    shutil.copytree(sample / folder / source["task_id"], out_dir / folder / task_id)
    _write_json(out_dir / "tasks_and_rubrics.json", records)
    _write_json(out_dir / "world_descriptions.json", descriptions)
    return out_dir


def _write_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _pad_world(root: Path, rng: random.Random) -> None:
    """Add background files under ``root/filesystem`` until the world holds WORLD_FILES files
    and about WORLD_BYTES bytes: office files and PDFs first, then CSV exports, drive logs and
    notes sharing out what is left."""
    files = root / "filesystem"
    existing = [path for path in root.rglob("*") if path.is_file()]
    room = WORLD_FILES - len(existing)
    office = [
        *(lambda path, i=i: _memo(path, rng, i) for i in range(5)),
        *(lambda path, i=i: _workbook(path, rng, i) for i in range(8)),
        *(lambda path, i=i: _deck(path, rng, i) for i in range(2)),
        *(lambda path, i=i: _report(path, rng, i) for i in range(8)),
    ][:room]
    names = [
        *(f"Archive/FY2022/Memos/Memo {i + 1:02d} - {rng.choice(_TOPICS)[4:]}.docx" for i in range(5)),
        *(f"Archive/FY2022/Trackers/Tracker {i + 1:02d}.xlsx" for i in range(8)),
        *(f"Archive/FY2022/Decks/Update {i + 1:02d}.pptx" for i in range(2)),
        *(f"Reference/Reports/Report {i + 1:02d}.pdf" for i in range(8)),
    ]
    for make, name in zip(office, names, strict=False):
        make(files / name)
    written = sum(path.stat().st_size for path in root.rglob("*") if path.is_file())
    left = room - len(office)
    budget = max(WORLD_BYTES - written, 0)
    for i in range(left):
        share = budget // (left - i)
        budget -= share
        kind, number = i % 4, i // 4 + 1
        if kind == 0:
            data = _ledger(rng, share)
            path = files / f"Exports/Ledger/GL export {number:02d}.csv"
        elif kind == 1:
            data = _drive_log(rng, share)
            path = files / f"Exports/Logs/drive-audit-{number:02d}.log"
        else:
            data = _notes(rng, share)
            path = files / f"Reference/Notes/Notes {number:02d}{'ab'[kind - 2]}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[:share])


def _fill(rng: random.Random) -> dict[str, Any]:
    return {
        "topic": rng.choice(_TOPICS),
        "entity": rng.choice(_ENTITIES),
        "vendor": rng.choice(_VENDORS),
        "account": rng.choice(_ACCOUNTS),
    }


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(rng.choice(_SENTENCES).format(**_fill(rng)) for _ in range(sentences))


def _memo(path: Path, rng: random.Random, number: int) -> None:
    blocks: list[tuple[Any, ...]] = [("heading", f"Memo {number + 1}: {rng.choice(_TOPICS)}", 1)]
    for section in range(4):
        blocks.append(("heading", f"{section + 1}. {rng.choice(_TOPICS).capitalize()}", 2))
        blocks.extend(("para", _paragraph(rng, rng.randrange(3, 7))) for _ in range(3))
    rows = [["Vendor", "Entity", "Spend (USD)", "Change"]]
    rows += [
        [
            rng.choice(_VENDORS),
            rng.choice(_ENTITIES),
            f"{rng.randrange(10_000, 900_000):,}",
            f"{rng.uniform(-9, 9):.1f}%",
        ]
        for _ in range(12)
    ]
    blocks.append(("table", rows))
    write_document(path, blocks, title=f"Memo {number + 1}")


def _workbook(path: Path, rng: random.Random, number: int) -> None:
    rows: list[list[Any]] = [["Month", "Entity", "Vendor", "Budget", "Actual", "Variance"]]
    for row in range(2, 202):
        rows.append(
            [
                f"2022-{rng.randrange(1, 13):02d}",
                rng.choice(_ENTITIES),
                rng.choice(_VENDORS),
                rng.randrange(5_000, 250_000),
                rng.randrange(5_000, 250_000),
                f"=E{row}-D{row}",
            ]
        )
    write_workbook(path, [Sheet(f"Tracker {number + 1}", rows, number_formats={"D": "#,##0", "E": "#,##0"})])


def _deck(path: Path, rng: random.Random, number: int) -> None:
    slides: list[dict[str, Any]] = [
        {"layout": "title", "title": f"Update {number + 1}", "subtitle": "FY2022"}
    ]
    for _ in range(6):
        slides.append(
            {
                "layout": "bullets",
                "title": rng.choice(_TOPICS).capitalize(),
                "bullets": [rng.choice(_SENTENCES).format(**_fill(rng)) for _ in range(4)],
                "notes": _paragraph(rng, 3),
            }
        )
    write_deck(path, slides, title=f"Update {number + 1}")


def _report(path: Path, rng: random.Random, number: int) -> None:
    pages = [
        {"title": f"Report {number + 1}, page {page + 1}", "lines": [_paragraph(rng, 1) for _ in range(14)]}
        for page in range(4)
    ]
    write_pdf(path, pages, title=f"Report {number + 1}")


def _ledger(rng: random.Random, size: int) -> bytes:
    lines = ["posting_date,entity,account,cost_center,vendor,document,currency,amount"]
    total, document = len(lines[0]), rng.randrange(400_000, 900_000)
    while total < size:
        document += rng.randrange(1, 4)
        line = (
            f"2022-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d},{rng.choice(_ENTITIES)},"
            f"{rng.choice(_ACCOUNTS)},{rng.choice(_CENTERS)},{rng.choice(_VENDORS)},"
            f"INV-{document},USD,{rng.randrange(100, 99_999)}.{rng.randrange(100):02d}"
        )
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def _drive_log(rng: random.Random, size: int) -> bytes:
    lines, total, second = [], 0, rng.randrange(86_400)
    folders = ["/Archive/FY2022", "/Reference/Reports", "/Exports/Ledger", "/Data/Raw", "/Deliverables"]
    while total < size:
        second += rng.randrange(1, 90)
        day, rest = divmod(second, 86_400)
        stamp = f"2022-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}Z"
        event = rng.choice(_LOG_EVENTS).format(
            folder=rng.choice(folders),
            user=rng.choice(_USERS),
            doc=f"doc-{rng.randrange(400)}",
            count=rng.randrange(1, 40),
        )
        line = f"{stamp} {event}"
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def _notes(rng: random.Random, size: int) -> bytes:
    parts, total = [], 0
    while total < size:
        part = f"## {rng.choice(_TOPICS).capitalize()}\n\n{_paragraph(rng, rng.randrange(4, 9))}\n\n"
        parts.append(part)
        total += len(part.encode())
    return "".join(parts).encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write the paper-sized benchmark (issue 30)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--worlds", type=int, default=33)
    parser.add_argument("--tasks", type=int, default=480)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out = generate_paper_benchmark(args.out, worlds=args.worlds, tasks=args.tasks, seed=args.seed)
    print(describe(out) + f"; written in {time.perf_counter() - started:.1f} s")
    return 0


def describe(benchmark: Path) -> str:
    """One line: worlds, tasks, files and bytes per world (unpacked and zipped)."""
    zips = sorted((benchmark / "world_files_zipped").glob("*.zip"))
    files, unpacked = [], []
    for path in zips:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
        files.append(len(members))
        unpacked.append(sum(info.file_size for info in members))
    sizes = [path.stat().st_size for path in zips]
    tasks = len(json.loads((benchmark / "tasks_and_rubrics.json").read_text(encoding="utf-8")))
    return (
        f"{benchmark}: {len(zips)} worlds, {tasks} tasks; per world {min(files)}–{max(files)} files, "
        f"{min(unpacked) / 1e6:.1f}–{max(unpacked) / 1e6:.1f} MB unpacked, "
        f"{min(sizes) / 1e6:.2f}–{max(sizes) / 1e6:.2f} MB zipped"
    )


if __name__ == "__main__":
    sys.exit(main())
