"""Project Atlas (Corvane Industrial acquires Lumen Sensors): financials, valuation and board documents."""

from __future__ import annotations

import csv
import io

from atoll_sample._world import WorldDraft
from atoll_sample.deal_legal import BASE_PRICE, COUNTERPARTIES
from atoll_sample.people import AISHA, ELENA, SOFIA
from atoll_sample.sheets import Sheet, write_workbook
from atoll_sample.slides import write_deck

FINANCIALS = "/Data Room/02 Financials/Lumen_Financials_FY2021-FY2023.xlsx"
COMPS = "/Valuation/Atlas comps v3 (SR).xlsx"
BOARD_DECK = "/Board/Atlas Board Update - March 2024.pptx"
PRECEDENTS_INPUT = "/Inputs/precedent_transactions_SR_2024-03-01.csv"


COMPANIES = [
    "Veritas Instruments",
    "Kallisto Controls",
    "Northbeam Photonics",
    "Orrin Measurement",
    "Sablewood Sensing",
    "Tern Automation",
    "Quillon Devices",
    "Brightmoor Systems",
]


def build_files(draft: WorldDraft) -> None:
    """Write the financial and valuation files; sets facts revenue, EBITDA, comps, precedents."""
    rng = draft.rng
    revenue = [
        rng.randrange(1400, 1500) * 100,
        rng.randrange(1580, 1680) * 100,
        rng.randrange(1780, 1880) * 100,
    ]
    draft.facts["revenue"] = revenue
    _financials(draft, revenue)
    _comps(draft)
    _board_deck(draft)
    _other_documents(draft)


def _financials(draft: WorldDraft, revenue: list[int]) -> None:
    rng = draft.rng
    cogs = [round(r * rng.uniform(0.55, 0.58)) for r in revenue]
    sga = [round(r * rng.uniform(0.16, 0.18)) for r in revenue]
    rnd = [round(r * rng.uniform(0.085, 0.095)) for r in revenue]
    dna = [round(r * 0.03) for r in revenue]
    rows = [
        ["USD thousands", "FY2021", "FY2022", "FY2023"],
        ["Revenue", *revenue],
        ["Cost of goods sold", *cogs],
    ]
    rows.append(["Gross profit", "=B2-B3", "=C2-C3", "=D2-D3"])
    rows += [["SG&A", *sga], ["R&D", *rnd]]
    rows.append(["EBITDA (reported)", "=B4-B5-B6", "=C4-C5-C6", "=D4-D5-D6"])
    rows += [["D&A", *dna], ["EBIT", "=B7-B8", "=C7-C8", "=D7-D8"]]
    ebitda = revenue[2] - cogs[2] - sga[2] - rnd[2]
    adjustments = [
        ("Litigation costs (Alder Fabrication, one-off)", rng.randrange(6, 14) * 100),
        ("CEO severance", rng.randrange(5, 10) * 100),
        ("Losses of discontinued LX-200 line", rng.randrange(3, 8) * 100),
        ("Sponsor management fee", 500),
    ]
    adjust_rows = [
        ["FY2023 EBITDA bridge (USD thousands)", "Amount"],
        ["EBITDA (reported)", "='Income Statement'!D7"],
    ]
    adjust_rows += [[label, amount] for label, amount in adjustments]
    adjust_rows.append(["Adjusted EBITDA", f"=SUM(B2:B{len(adjust_rows)})"])
    draft.facts["ebitda_reported"] = ebitda
    draft.facts["adjustments"] = adjustments
    draft.facts["ebitda_adjusted"] = ebitda + sum(a for _l, a in adjustments)
    balance = [
        ["USD thousands", "Dec 31, 2023"],
        ["Cash", rng.randrange(180, 260) * 100],
        ["Term loan", 64_000],
        ["Revolver drawn", 8_500],
        ["Net debt", "=B3+B4-B2"],
    ]
    write_workbook(
        draft.fs(FINANCIALS),
        [
            Sheet("Income Statement", rows, {c: "#,##0;(#,##0)" for c in "BCD"}, bold_rows=[4, 7]),
            Sheet("EBITDA Adjustments", adjust_rows, {"B": "#,##0"}, bold_rows=[len(adjust_rows)]),
            Sheet("Balance Sheet", balance, {"B": "#,##0"}),
        ],
        creator=SOFIA["name"],
    )


def _comps(draft: WorldDraft) -> None:
    rng = draft.rng
    rows = [
        [
            "Company",
            "Market cap (USD M)",
            "Net debt (USD M)",
            "Enterprise value (USD M)",
            "LTM revenue (USD M)",
            "LTM EBITDA (USD M)",
            "EV / LTM EBITDA",
            "EV / LTM revenue",
        ]
    ]
    comps = []
    for i, name in enumerate(COMPANIES, start=2):
        ebitda = round(rng.uniform(40, 260), 1)
        multiple = rng.uniform(8.0, 14.5)
        net_debt = round(rng.uniform(-50, 300), 1)
        market_cap = round(ebitda * multiple - net_debt, 1)
        revenue = round(ebitda / rng.uniform(0.14, 0.24), 1)
        comps.append((name, market_cap, net_debt, revenue, ebitda))
        rows.append(
            [name, market_cap, net_debt, f"=B{i}+C{i}", revenue, ebitda, f"=D{i}/F{i}", f"=D{i}/E{i}"]
        )
    last = len(rows)
    rows.append(["Median", "", "", "", "", "", f"=MEDIAN(G2:G{last})", f"=MEDIAN(H2:H{last})"])
    draft.facts["comps"] = comps
    write_workbook(
        draft.fs(COMPS),
        [
            Sheet(
                "Comps",
                rows,
                {
                    "B": "#,##0.0",
                    "C": "#,##0.0",
                    "D": "#,##0.0",
                    "E": "#,##0.0",
                    "F": "#,##0.0",
                    "G": '0.0"x"',
                    "H": '0.00"x"',
                },
                bold_rows=[len(rows)],
            ),
            Sheet(
                "Notes",
                [
                    ["Note", "Value"],
                    ["Market data as of 2024-02-28 close.", None],
                    ["Net debt includes leases.", None],
                    ["Precedents tab moved to a separate file (AR).", None],
                    [
                        "Corvane share price (live, Google Sheets)",
                        '=IFERROR(__xludf.DUMMYFUNCTION("GOOGLEFINANCE(""NYSE:CVI"",""price"")"),48.17)',
                    ],
                ],
                {"B": '"$"#,##0.00'},
                cached={"B5": "48.17"},
            ),
        ],
        creator=AISHA["name"],
    )
    precedents = []
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["announced", "acquirer", "target", "ev_usd_m", "target_ltm_ebitda_usd_m"])
    for i, (acquirer, target) in enumerate(
        [
            ("Tern Automation", "Lyra Gauges"),
            ("Hollis Group", "Fenwick Optics"),
            ("Quillon Devices", "Marlow Sense"),
            ("Brightmoor Systems", "Ecliptic Labs"),
            ("Garnet Capital", "Ostrava Metrology"),
            ("Veritas Instruments", "Calder Probes"),
        ]
    ):
        ebitda = round(rng.uniform(12, 60), 1)
        ev = round(ebitda * rng.uniform(9.5, 15.0), 1)
        precedents.append((acquirer, target, ev, ebitda))
        writer.writerow([f"202{1 + i // 2}-0{1 + i}-15", acquirer, target, ev, ebitda])
    draft.facts["precedents"] = precedents
    draft.facts["precedents_csv"] = out.getvalue()


def multiple_text(price_m: float, ebitda_k: int) -> str:
    """An EV/EBITDA multiple as the board deck writes it (``9.6x``)."""
    return f"{price_m / (ebitda_k / 1000):.1f}x"


def _board_deck(draft: WorldDraft) -> None:
    multiple = multiple_text(BASE_PRICE / 1e6, draft.facts["ebitda_adjusted"])
    draft.facts["board_multiple"] = multiple
    write_deck(
        draft.fs(BOARD_DECK),
        [
            {
                "layout": "title",
                "title": "Project Atlas - Board update",
                "subtitle": "Corvane Industrial | March 2024 | Strictly confidential",
            },
            {
                "layout": "bullets",
                "title": "Transaction overview",
                "bullets": [
                    f"Proposed offer: $410M ({multiple} adj. FY2023 EBITDA)",
                    "Structure: 100% stock purchase, cash consideration",
                    "Target signing: March 22, 2024",
                ],
                "notes": "Robert to present. Update price if the board approves the revised offer.",
            },
            {
                "layout": "table",
                "title": "Lumen Sensors - financial summary (USD M)",
                "rows": [
                    ["", "FY2021", "FY2022", "FY2023"],
                    ["Revenue"] + [f"{r / 1000:.1f}" for r in draft.facts["revenue"]],
                ],
            },
            {
                "layout": "bullets",
                "title": "Key risks",
                "bullets": [
                    "Customer change-of-control consents",
                    "Alder Fabrication claim",
                    "Integration of Osaka plant",
                ],
            },
        ],
        author=ELENA["name"],
        title="Atlas board update",
    )


def _other_documents(draft: WorldDraft) -> None:
    """The files computed from constants and facts; the rest of the notes and trackers are
    data (worlds/atlas_background.yaml)."""
    draft.fs("/Valuation/lumen_top_customers_FY2023.csv").write_text(
        "rank,customer,share_of_revenue\n"
        + "".join(f"{i + 1},{name},see register\n" for i, (name, _k, _c) in enumerate(COUNTERPARTIES[:5])),
        encoding="utf-8",
    )
    draft.fs("/Data Room/02 Financials/monthly_revenue_FY2023.csv").write_text(
        "month,revenue_usd_k\n"
        + "".join(f"2023-{m:02d},{round(draft.facts['revenue'][2] / 12)}\n" for m in range(1, 13)),
        encoding="utf-8",
    )
