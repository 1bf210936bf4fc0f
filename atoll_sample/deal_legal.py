"""Project Atlas: the legal documents (contracts register and contracts, SPA, disclosure schedule, PDFs)."""

from __future__ import annotations

import csv
import io

from atoll_sample._world import WorldDraft
from atoll_sample.documents import write_document
from atoll_sample.pdfs import write_pdf
from atoll_sample.people import CATHERINE, NADIA, SOFIA

REGISTER = "/Data Room/03 Material Contracts/Material contracts register.csv"
SPA = "/Legal/SPA/Atlas SPA draft v4 (A&K comments).docx"
SCHEDULE = "/Legal/SPA/Disclosure Schedule - draft v2.docx"
SCHEDULE_PLACEHOLDER = "[Reserved: pending review of data room folder 04 - Litigation]"
DEMAND_LETTER = "/Data Room/04 Litigation/04.3 Alder Fabrication demand letter (scan).pdf"
BASE_PRICE = 410_000_000
ESCROW = 41_000_000
REVERSE_FEE = 16_400_000
OUTSIDE_DATE = "September 30, 2024"
ALDER = {
    "claimant": "Alder Fabrication Inc.",
    "date": "January 15, 2024",
    "amount": "$1,250,000",
    "contract": "Supply Agreement dated March 3, 2021",
}

COUNTERPARTIES = [
    ("Kestrel Aerospace", "Supply agreement", "Termination right"),
    ("Vantor Medical", "Master services agreement", "Consent required"),
    ("Halden Rail", "Framework agreement", "None"),
    ("Osprey Automotive", "Supply agreement", "Consent required"),
    ("Mirelle Energy", "Distribution agreement", "None"),
    ("Castor Robotics", "Development agreement", "Termination right"),
    ("Pellham Foods", "Supply agreement", "None"),
    ("Ridgeline Defense", "Supply agreement", "Consent required"),
    ("Arden Water", "Services agreement", "None"),
    ("Sorensen Marine", "Supply agreement", "None"),
]


def build_files(draft: WorldDraft) -> None:
    """Write the legal files (needs facts revenue); sets fact register."""
    _register(draft, draft.facts["revenue"][2])
    _spa(draft)
    _schedule(draft)
    _pdfs(draft)


def _register(draft: WorldDraft, fy2023_revenue: int) -> None:
    rng = draft.rng
    shares = [rng.uniform(0.03, 0.12) for _ in COUNTERPARTIES]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "counterparty",
            "contract_type",
            "fy2023_revenue_usd_k",
            "expiry",
            "change_of_control",
            "governing_law",
        ]
    )
    register = []
    for (name, kind, coc), share in zip(COUNTERPARTIES, shares, strict=True):
        amount = round(fy2023_revenue * share)
        register.append((name, kind, amount, coc))
        writer.writerow(
            [
                name,
                kind,
                amount,
                f"202{rng.randrange(4, 9)}-12-31",
                coc,
                rng.choice(["New York", "Delaware", "England and Wales"]),
            ]
        )
    draft.fs(REGISTER).write_text(out.getvalue(), encoding="utf-8")
    draft.facts["register"] = register
    for name, kind, _amount, coc in register:
        if coc == "None":
            continue
        clause = (
            "the Customer may terminate this Agreement on 30 days' written notice"
            if coc == "Termination right"
            else "the Supplier shall obtain the Customer's prior written consent, not to be unreasonably withheld"
        )
        write_document(
            draft.fs(f"/Data Room/03 Material Contracts/{name} - {kind}.docx"),
            [
                ("heading", f"{kind.title()} between Lumen Sensors, Inc. and {name}", 0),
                ("heading", "14. Change of Control", 1),
                (
                    "para",
                    [("14.1 ", True), (f"If the Supplier undergoes a Change of Control, {clause}.", False)],
                ),
            ],
            author=SOFIA["name"],
        )


def _spa(draft: WorldDraft) -> None:
    blocks = [
        ("heading", "STOCK PURCHASE AGREEMENT - DRAFT v4", 0),
        (
            "para",
            'by and among Corvane Industrial, Inc. ("Buyer"), the stockholders of Lumen Sensors, Inc. and Lumen Sensors, Inc.',
        ),
        ("heading", "Article 1 - Definitions", 1),
        ("para", [('"Escrow Amount"', True), (f" means ${ESCROW:,}.", False)]),
        ("para", [('"Outside Date"', True), (f" means {OUTSIDE_DATE}.", False)]),
        ("heading", "Article 2 - Purchase Price", 1),
        (
            "comment",
            [
                ("2.1 ", True),
                (
                    f'The aggregate purchase price for the Shares is ${BASE_PRICE:,} (the "Base Purchase Price"), subject to adjustment under Section 2.4.',
                    False,
                ),
            ],
            CATHERINE["name"],
            "Seller asks for a locked-box mechanism instead of completion accounts.",
        ),
        (
            "para",
            "2.2 At Closing, Buyer shall deposit the Escrow Amount with the Escrow Agent for 18 months.",
        ),
        ("heading", "Article 8 - Termination", 1),
        (
            "para",
            "8.1 This Agreement may be terminated by either party if Closing has not occurred by the Outside Date.",
        ),
        (
            "para",
            [
                ("8.3 ", True),
                (
                    f"Buyer shall pay Seller a reverse termination fee of ${REVERSE_FEE:,} if regulatory approval is not obtained.",
                    False,
                ),
            ],
        ),
        ("heading", "Article 11 - Governing Law", 1),
        ("para", "11.1 This Agreement is governed by the laws of the State of Delaware."),
        ("heading", "Key dates", 1),
        (
            "table",
            [
                ["Milestone", "Date"],
                ["Signing (target)", "March 22, 2024"],
                ["HSR filing", "April 5, 2024"],
                ["Outside Date", OUTSIDE_DATE],
            ],
        ),
    ]
    write_document(draft.fs(SPA), blocks, author=CATHERINE["name"], title="Atlas SPA draft v4")


def _schedule(draft: WorldDraft) -> None:
    blocks = [
        ("heading", "Disclosure Schedule to the Stock Purchase Agreement - DRAFT v2", 0),
        ("para", [("Privileged & Confidential - ", True), ("prepared by Ashby & Kell LLP", False)]),
        ("heading", "Schedule 3.9 - Material Contracts", 1),
        ("para", "See the material contracts register in data room folder 03."),
        ("heading", "Schedule 3.12 - Litigation", 1),
        (
            "para",
            "1. Employment claim by a former sales manager (Ontario), settled February 2024 for CAD 85,000.",
        ),
        ("para", "2. Patent opposition EP 3 412 771 filed by Northbeam Photonics, pending."),
        ("para", SCHEDULE_PLACEHOLDER),
        ("heading", "Schedule 3.15 - Environmental Matters", 1),
        ("para", "None."),
    ]
    write_document(draft.fs(SCHEDULE), blocks, author=CATHERINE["name"], title="Disclosure Schedule")


def _pdfs(draft: WorldDraft) -> None:
    write_pdf(
        draft.fs(DEMAND_LETTER),
        [
            {
                "title": "Data room document 04.3",
                "lines": [
                    "Folder: 04 Litigation",
                    "Uploaded by: Lumen Sensors legal",
                    "Description: demand letter received (scanned original follows).",
                ],
            },
            {
                "title": "HOLLOWAY & PRICE LLP - Attorneys at Law",
                "scanned": True,
                "lines": [
                    f"Date: {ALDER['date']}",
                    "To: Lumen Sensors, Inc., Attn: General Counsel",
                    "",
                    f"Re: {ALDER['claimant']} - breach of {ALDER['contract']}",
                    "",
                    f"Our client {ALDER['claimant']} demands payment of {ALDER['amount']}",
                    "for defective sensor assemblies delivered in 2023 and related recall costs.",
                    "Absent payment within 30 days, our client will file suit.",
                    "",
                    "Holloway & Price LLP",
                ],
            },
        ],
        title="Data room 04.3",
    )
    write_pdf(
        draft.fs("/Legal/NDA/Mutual NDA Corvane-Lumen (executed).pdf"),
        [
            {
                "title": "Mutual Non-Disclosure Agreement",
                "lines": [
                    "Between Corvane Industrial, Inc. and Lumen Sensors, Inc.",
                    "Effective date: November 6, 2023",
                    "Term: two years.",
                ],
            },
            {
                "title": "Non-solicitation",
                "lines": ["Neither party shall solicit the other's employees for 12 months."],
            },
            {
                "title": "Signatures",
                "lines": [
                    f"{NADIA['name']}, General Counsel, Corvane Industrial",
                    f"{SOFIA['name']}, CFO, Lumen Sensors",
                ],
            },
        ],
        title="NDA",
    )
    write_pdf(
        draft.fs("/Data Room/01 Corporate/Lumen corporate structure chart.pdf"),
        [
            {
                "title": "Lumen Sensors - group structure",
                "lines": [
                    "Lumen Sensors, Inc. (Delaware)",
                    "- Lumen Sensors Canada Ltd. (Ontario)",
                    "- Lumen Sensors KK (Osaka, Japan)",
                ],
            },
            {
                "title": "Officers",
                "lines": [
                    "CEO: Hiroshi Tanaka",
                    f"CFO: {SOFIA['name']}",
                ],
            },
        ],
        title="Structure chart",
    )
