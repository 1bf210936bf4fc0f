"""Project Keystone: background documents of the shared drive (admin, kickoff, notes, research PDFs)."""

from __future__ import annotations

from atoll_sample._world import WorldDraft
from atoll_sample.documents import write_document
from atoll_sample.pdfs import write_pdf
from atoll_sample.people import (
    AOIFE,
    KENJI,
    KEYSTONE_CLIENT,
    KEYSTONE_TEAM,
    MARGARET,
    PRIYA,
    TOMAS,
    ZOE,
)
from atoll_sample.sheets import Sheet, write_workbook
from atoll_sample.slides import write_deck


def build_files(draft: WorldDraft) -> None:
    """Write the background documents no task depends on directly."""
    _other_documents(draft)


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
