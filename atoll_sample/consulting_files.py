"""Project Keystone (Meridian Partners x Halvorsen Foods): the documents of the world."""

from __future__ import annotations

import csv
import io

from atoll_sample._world import WorldDraft
from atoll_sample.documents import write_document
from atoll_sample.people import (
    DMITRI,
    KENJI,
    MARGARET,
    PRIYA,
    TOMAS,
    ZOE,
)
from atoll_sample.sheets import Sheet, write_workbook
from atoll_sample.slides import write_deck

PLANTS = [
    ("Aurora", "Illinois, US"),
    ("Fresno", "California, US"),
    ("Macon", "Georgia, US"),
    ("Lethbridge", "Alberta, CA"),
    ("Tilburg", "Noord-Brabant, NL"),
    ("Wrocław", "Dolnośląskie, PL"),
]
# category -> (spend range per plant in USD, target savings rate)
CATEGORIES = {
    "Packaging": ((2_000_000, 6_500_000), 0.06),
    "Ingredients - Dairy": ((4_000_000, 12_000_000), 0.03),
    "Ingredients - Grains": ((3_000_000, 9_000_000), 0.04),
    "Logistics": ((1_500_000, 5_000_000), 0.07),
    "MRO": ((800_000, 2_500_000), 0.10),
    "Energy": ((1_000_000, 3_500_000), 0.05),
}
# Spend under fixed-price or regulated contracts cannot be negotiated in this engagement.
NOT_ADDRESSABLE = {("Energy", "Tilburg"), ("Energy", "Wrocław"), ("Ingredients - Dairy", "Lethbridge")}
FUNCTIONS = ["Production", "Quality", "Procurement", "Logistics", "Maintenance"]

SPEND_CUBE = "/Data/Raw/Halvorsen spend cube FY2023 (final_v3).xlsx"
HEADCOUNT_CSV = "/Data/Raw/plant_headcount_Jan2024.csv"
STEERCO_DECK = "/Deliverables/SteerCo/Keystone SteerCo 2024-02-29 DRAFT.pptx"
INTERIM_DOC = "/Deliverables/Interim Report/Keystone_interim_findings_DRAFT (jm edits).docx"
INTERVIEW_PLACEHOLDER = "[Kenji to add summary of plant interviews]"
INTERVIEWS = {
    "Aurora": (
        "/Research/Interviews/2024-02-06 Aurora plant mgr interview.md",
        ["packaging SKU proliferation", "late corrugate deliveries", "MRO spares bought ad hoc"],
    ),
    "Fresno": (
        "/Research/Interviews/Fresno - interview notes (ZL).md",
        ["packaging SKU proliferation", "diesel surcharges on outbound freight"],
    ),
    "Macon": (
        "/Research/Interviews/Macon_interview_notes_final.txt",
        ["packaging SKU proliferation", "single-source flour contract", "late corrugate deliveries"],
    ),
    "Lethbridge": (
        "/Research/Interviews/old/Lethbridge call 2024-02-13.md",
        ["dairy quota constraints", "MRO spares bought ad hoc"],
    ),
}


def build_files(draft: WorldDraft) -> None:
    rng = draft.rng
    spend = []
    for category, ((low, high), _rate) in CATEGORIES.items():
        for plant, region in PLANTS:
            amount = rng.randrange(low // 100, high // 100) * 100
            addressable = "N" if (category, plant) in NOT_ADDRESSABLE else "Y"
            spend.append((category, plant, region, amount, rng.randrange(3, 40), addressable))
    draft.facts["spend"] = spend
    draft.facts["rates"] = {category: rate for category, (_r, rate) in CATEGORIES.items()}
    _spend_cube(draft, spend)
    headcount = _headcount(draft)
    draft.facts["headcount"] = headcount
    _steerco_deck(draft, spend)
    _interim_doc(draft)
    _interviews(draft)


def _spend_cube(draft: WorldDraft, spend: list[tuple]) -> None:
    rows = [["Category", "Plant", "Region", "FY2023 Spend (USD)", "Active suppliers", "Addressable"]]
    rows += [list(r) for r in spend]
    last = len(rows)
    assumptions = [["Category", "Target savings %", "Source"]]
    for category, (_r, rate) in CATEGORIES.items():
        assumptions.append([category, rate, "Meridian benchmark (Jan 2024)"])
    assumptions += [
        [],
        [
            "EUR/USD (live)",
            '=IFERROR(__xludf.DUMMYFUNCTION("GOOGLEFINANCE(""CURRENCY:EURUSD"")"),1.0856)',
            "Google Sheets import",
        ],
    ]
    summary = [["Category", "Addressable spend (USD)", "Target savings %", "Target savings (USD)"]]
    for i, category in enumerate(CATEGORIES, start=2):
        summary.append(
            [
                category,
                f"=SUMIFS('Spend by Plant'!$D$2:$D${last},'Spend by Plant'!$A$2:$A${last},A{i},'Spend by Plant'!$F$2:$F${last},\"Y\")",
                f"=Assumptions!B{i}",
                f"=B{i}*C{i}",
            ]
        )
    end = len(summary)
    summary.append(["Total", f"=SUM(B2:B{end})", f"=D{end + 1}/B{end + 1}", f"=SUM(D2:D{end})"])
    eur_row = len(assumptions)
    write_workbook(
        draft.fs(SPEND_CUBE),
        [
            Sheet("Summary", summary, {"B": "#,##0", "C": "0.0%", "D": "#,##0"}, bold_rows=[len(summary)]),
            Sheet("Spend by Plant", rows, {"D": '"$"#,##0'}),
            Sheet("Assumptions", assumptions, {"B": "0.0%"}, cached={f"B{eur_row}": "1.0856"}),
        ],
        creator=KENJI["name"],
    )


def _headcount(draft: WorldDraft) -> dict[tuple[str, str], int]:
    rng = draft.rng
    headcount = {}
    for plant, _region in PLANTS:
        for function in FUNCTIONS:
            base = {"Production": 180, "Quality": 25, "Procurement": 9, "Logistics": 30, "Maintenance": 40}[
                function
            ]
            headcount[(plant, function)] = base + rng.randrange(-base // 3, base // 3 + 1)
    # A unique plant with the most procurement staff keeps the "which plant" question well posed.
    top = max(PLANTS, key=lambda p: headcount[(p[0], "Procurement")])[0]
    headcount[(top, "Procurement")] += 3
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["plant", "function", "fte", "as_of"])
    for (plant, function), fte in headcount.items():
        writer.writerow([plant, function, fte, "2024-01-31"])
    draft.fs(HEADCOUNT_CSV).write_text(out.getvalue(), encoding="utf-8")
    return headcount


def _steerco_deck(draft: WorldDraft, spend: list[tuple]) -> None:
    totals = {c: sum(r[3] for r in spend if r[0] == c) for c in CATEGORIES}
    write_deck(
        draft.fs(STEERCO_DECK),
        [
            {
                "layout": "title",
                "title": "Project Keystone - Steering Committee",
                "subtitle": "Halvorsen Foods | 29 February 2024 | DRAFT",
            },
            {
                "layout": "bullets",
                "title": "Executive summary",
                "bullets": [
                    "FY2023 baseline covers six plants and six spend categories",
                    "Identified target savings: $[TBD]M on addressable spend",
                    "Packaging RFP to launch in March; carrier RFP results in",
                    "Next SteerCo: [TBC]",
                ],
                "notes": "Priya to fill the savings figure from the spend cube Summary tab before sending.",
            },
            {
                "layout": "table",
                "title": "FY2023 spend baseline by category (USD M, all spend)",
                "rows": [["Category", "Spend (USD M)"]] + [[c, f"{v / 1e6:.1f}"] for c, v in totals.items()],
                "notes": "Includes non-addressable energy and dairy contracts.",
            },
            {
                "layout": "bullets",
                "title": "Decisions requested",
                "bullets": ["Approve packaging RFP scope", "Confirm plant visit schedule"],
            },
        ],
        author=PRIYA["name"],
        title="Keystone SteerCo",
    )


def _interim_doc(draft: WorldDraft) -> None:
    blocks = [
        ("heading", "Project Keystone - Interim findings (DRAFT)", 0),
        (
            "para",
            [("Prepared for: ", True), (f"{MARGARET['name']} and {DMITRI['name']}, Halvorsen Foods", False)],
        ),
        ("heading", "1. Context", 1),
        (
            "para",
            "Halvorsen Foods engaged Meridian Partners to reduce third-party spend across its six plants.",
        ),
        (
            "comment",
            [("Baseline is ", False), ("FY2023 actuals", True), (", as exported from SAP Ariba.", False)],
            TOMAS["name"],
            "Confirm the export date with Raúl before this goes out.",
        ),
        ("heading", "2. Spend baseline", 1),
        (
            "table",
            [["Category", "Target savings %"]] + [[c, f"{r:.0%}"] for c, (_s, r) in CATEGORIES.items()],
        ),
        ("heading", "3. Interview themes", 1),
        ("para", INTERVIEW_PLACEHOLDER),
        ("heading", "4. Next steps", 1),
        (
            "bullets",
            ["Launch packaging RFP", "Complete plant visits", "Refine savings model with client finance"],
        ),
    ]
    write_document(draft.fs(INTERIM_DOC), blocks, author=ZOE["name"], title="Keystone interim findings")


def _interviews(draft: WorldDraft) -> None:
    for plant, (path, issues) in INTERVIEWS.items():
        lines = "\n".join(f"- {issue}" for issue in issues)
        draft.text(
            path,
            f"""# {plant} plant - interview notes

Interviewer: {ZOE["name"]}  |  Interviewee: plant manager, {plant}

## Context
Discussed purchasing practices, supplier performance and the FY2023 baseline.

## Top issues raised
{lines}

## Follow-ups
- Share spend cube extract for {plant}
- Schedule site walk with maintenance lead
""",
        )
