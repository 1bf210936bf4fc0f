"""Project Keystone (Meridian Partners x Halvorsen Foods): the documents of the world."""

from __future__ import annotations

import csv
import io

from atoll.sample._world import WorldDraft
from atoll.sample.documents import write_document
from atoll.sample.pdfs import write_pdf
from atoll.sample.people import (
    AOIFE,
    DMITRI,
    KENJI,
    KEYSTONE_CLIENT,
    KEYSTONE_TEAM,
    MARGARET,
    PRIYA,
    TOMAS,
    ZOE,
)
from atoll.sample.sheets import Sheet, write_workbook
from atoll.sample.slides import write_deck

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
    _other_documents(draft)


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


def _other_documents(draft: WorldDraft) -> None:
    team = "\n".join(f"{p['name']}\t{p['title']}\t{p['email']}" for p in KEYSTONE_TEAM + KEYSTONE_CLIENT)
    draft.text("/Admin/team_roster.txt", f"PROJECT KEYSTONE - TEAM ROSTER\n\n{team}")
    draft.text(
        "/README - folder structure.md",
        "# Keystone shared drive\n\n- Admin/: roster, SOW\n- Data/: raw extracts (do not edit Raw/)\n- Deliverables/: SteerCo decks, reports\n- Research/: interviews and benchmarks",
    )
    write_document(
        draft.fs("/Admin/SOW/Halvorsen_SOW_signed v2 (final).docx"),
        [
            ("heading", "Statement of Work - Project Keystone", 0),
            ("para", [("Client: ", True), ("Halvorsen Foods Inc.", False)]),
            ("para", [("Provider: ", True), ("Meridian Partners LLC", False)]),
            ("heading", "Scope", 1),
            (
                "bullets",
                [
                    "Spend baseline across six plants",
                    "Category strategies for top categories",
                    "Sourcing wave 1 support",
                ],
            ),
            ("heading", "Fees", 1),
            (
                "table",
                [
                    ["Phase", "Weeks", "Fee (USD)"],
                    ["Diagnostic", "6", "420,000"],
                    ["Sourcing wave 1", "10", "680,000"],
                    ["Total", "16", "1,100,000"],
                ],
            ),
            (
                "comment",
                "Fees exclude travel expenses, billed at cost.",
                MARGARET["name"],
                "Cap travel at 8% of fees?",
            ),
        ],
        author=TOMAS["name"],
    )
    write_document(
        draft.fs("/Deliverables/Category strategies/Packaging category strategy (draft).docx"),
        [
            ("heading", "Packaging category strategy", 0),
            (
                "para",
                [("Objective: ", True), ("consolidate corrugate and film suppliers across plants.", False)],
            ),
            ("heading", "Levers", 1),
            (
                "numbered",
                ["SKU harmonisation", "Volume bundling in one RFP", "Index-linked pricing for resin"],
            ),
        ],
        author=AOIFE["name"],
    )
    write_deck(
        draft.fs("/Deliverables/Kickoff/Keystone kickoff deck final.pptx"),
        [
            {
                "layout": "title",
                "title": "Project Keystone kickoff",
                "subtitle": "Halvorsen Foods | 8 January 2024",
            },
            {
                "layout": "bullets",
                "title": "Objectives",
                "bullets": ["Baseline FY2023 spend", "Identify savings", "Launch first sourcing wave"],
                "notes": "Tomás opens.",
            },
            {
                "layout": "table",
                "title": "Team",
                "rows": [["Name", "Role"]] + [[p["name"], p["title"]] for p in KEYSTONE_TEAM],
            },
        ],
        author=TOMAS["name"],
    )
    write_workbook(
        draft.fs("/Admin/Keystone workplan v7.xlsx"),
        [
            Sheet(
                "Workplan",
                [
                    ["Workstream", "Owner", "Start", "Weeks"],
                    ["Baseline", KENJI["name"], "2024-01-08", 4],
                    ["Interviews", ZOE["name"], "2024-02-01", 3],
                    ["Packaging RFP", AOIFE["name"], "2024-03-04", 8],
                    ["Total weeks", "", "", "=SUM(D2:D4)"],
                ],
            ),
            Sheet(
                "Risks",
                [
                    ["Risk", "Mitigation"],
                    ["Data quality of Ariba export", "Reconcile with GL"],
                    ["Plant buy-in", "Site visits"],
                ],
            ),
        ],
        creator=PRIYA["name"],
    )
    write_workbook(
        draft.fs("/Admin/Expenses/Q1 expense tracker.xlsx"),
        [
            Sheet(
                "Expenses",
                [
                    ["Date", "Who", "Item", "USD"],
                    ["2024-01-09", TOMAS["name"], "Flight ORD", 612.4],
                    ["2024-02-06", ZOE["name"], "Hotel Aurora", 389.0],
                    ["Total", "", "", "=SUM(D2:D3)"],
                ],
                {"D": "#,##0.00"},
            )
        ],
        creator=PRIYA["name"],
    )
    suppliers = "supplier_id,supplier_name,category,country\n" + "".join(
        f"S{1000 + i},{name},{cat},{country}\n"
        for i, (name, cat, country) in enumerate(
            [
                ("Ridgeway Corrugated", "Packaging", "US"),
                ("Nordfolie GmbH", "Packaging", "DE"),
                ("Prairie Mills", "Ingredients - Grains", "CA"),
                ("Valley Creamery Co-op", "Ingredients - Dairy", "US"),
                ("Tasman Freight", "Logistics", "US"),
                ("Kraków Logistyka", "Logistics", "PL"),
                ("Apex Bearings", "MRO", "US"),
            ]
        )
    )
    draft.fs("/Data/Raw/supplier_list_export (3).csv").write_text(suppliers, encoding="utf-8")
    draft.fs("/Data/Raw/rfp_timeline.csv").write_text(
        "milestone,date\nRFP issued,2024-03-18\nBids due,2024-04-12\nAward,2024-05-03\n", encoding="utf-8"
    )
    notes = [
        (
            "/Research/Notes/2024-01-10 kickoff notes.md",
            "Kickoff held in Aurora. Client asked for weekly status.",
        ),
        (
            "/Research/Notes/2024-01-24 data request status.txt",
            "Ariba export received; GL mapping pending for Tilburg and Wrocław.",
        ),
        ("/Research/Notes/ideas - parking lot.md", "- Tail spend portal\n- P-card policy review"),
        ("/Admin/status reports/status_wk06.md", "Status week 6: baseline complete; interviews ongoing."),
        ("/Admin/status reports/status_wk07.md", "Status week 7: interviews complete at four plants."),
        (
            "/Admin/status reports/status_wk08 - DRAFT do not send.txt",
            "Status week 8: SteerCo prep; carrier RFP results received.",
        ),
        (
            "/Research/Notes/2024-02-20 SteerCo prep.md",
            "# SteerCo prep\n\n- Walk through baseline\n- Ask for RFP approval",
        ),
    ]
    for path, body in notes:
        draft.text(path, body)
    write_pdf(
        draft.fs("/Research/Industry/Food processing procurement benchmarks 2023.pdf"),
        [
            {
                "title": "Procurement benchmarks - food processing (2023)",
                "lines": [
                    "Median procurement FTE per $100M spend: 4.1",
                    "Top-quartile savings in packaging: 5-8%",
                ],
            },
            {"title": "Logistics", "lines": ["Carrier RFPs typically yield 6-10% on contracted lanes."]},
            {
                "title": "Appendix - scanned survey extract",
                "lines": ["Survey respondents: 48 manufacturers", "MRO savings achieved: median 9%"],
                "scanned": True,
            },
        ],
        title="Benchmarks",
    )
    write_pdf(
        draft.fs("/Research/Industry/Halvorsen annual report 2023 - extract.pdf"),
        [
            {
                "title": "Halvorsen Foods - Annual report 2023 (extract)",
                "lines": ["Net sales: USD 1.42 bn", "Six manufacturing plants in North America and Europe."],
            },
            {"title": "Operations", "lines": ["Capital expenditure focused on the Wrocław line expansion."]},
        ],
        title="Annual report extract",
    )
