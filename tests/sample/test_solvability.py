"""Each task's gold answer and check values, re-derived independently from the generated world files.

Nothing here imports the generator's data: numbers come from parsing the xlsx/csv/docx/pptx/
mbox/ics/chat files an agent would see, so a task whose answer is not in its world fails.
"""

from __future__ import annotations

import csv
import json
import mailbox
import re
import statistics
from collections import Counter
from datetime import date, datetime
from email.header import decode_header, make_header
from zoneinfo import ZoneInfo

import docx
import icalendar
import openpyxl
import pytest
from dateutil.rrule import rrulestr
from pptx import Presentation

from .conftest import CONSULTING, DEAL, answer_number_met, checks, fs

TODAY = datetime(2024, 3, 1, tzinfo=ZoneInfo("UTC"))
SPEND_CUBE = "/Data/Raw/Halvorsen spend cube FY2023 (final_v3).xlsx"


# --- readers (independent of the generator) ---------------------------------------------------


def _mail(root) -> list[dict]:
    out = []
    for box in (root / ".apps_data" / "mail").rglob("*.mbox"):
        for message in mailbox.mbox(box):
            body = next(p for p in message.walk() if p.get_content_type() == "text/plain")
            out.append(
                {
                    "subject": str(make_header(decode_header(message["Subject"]))),
                    "from": message["From"],
                    "cc": message["Cc"] or "",
                    "body": body.get_payload(decode=True).decode("utf-8"),
                }
            )
    return out


def _mail_with(root, subject: str) -> dict:
    return next(m for m in _mail(root) if m["subject"] == subject)


def _events(root) -> list[icalendar.Event]:
    events = []
    for path in (root / ".apps_data" / "calendar").rglob("*.ics"):
        events += icalendar.Calendar.from_ical(path.read_bytes()).walk("VEVENT")
    return events


def _spend(root):
    workbook = openpyxl.load_workbook(fs(root, SPEND_CUBE))
    rows = list(workbook["Spend by Plant"].iter_rows(min_row=2, values_only=True))
    rates = {
        r[0]: r[1]
        for r in workbook["Assumptions"].iter_rows(min_row=2, values_only=True)
        if r[0] and isinstance(r[1], float)
    }
    return [r for r in rows if r[5] == "Y"], rates


def _doc_text(path) -> str:
    document = docx.Document(str(path))
    parts = [p.text for p in document.paragraphs]
    parts += [cell.text for table in document.tables for row in table.rows for cell in row.cells]
    return "\n".join(parts)


def _deck_text(path) -> str:
    deck = Presentation(str(path))
    parts = []
    for slide in deck.slides:
        for shape in slide.shapes:
            if shape.has_text_frame:
                parts.append(shape.text_frame.text)
            if shape.has_table:
                parts += [cell.text for row in shape.table.rows for cell in row.cells]
    return "\n".join(parts)


def _contains_met(check: dict, text: str) -> bool:
    return all(needle.lower() in text.lower() for needle in check.get("contains", []))


def _cell(path, sheet, cell):
    return openpyxl.load_workbook(path, data_only=False)[sheet][cell].value


def _gold(sample_dir, task, index=0):
    files = sorted(p for p in (sample_dir / "gold_files" / task["task_id"]).rglob("*") if p.is_file())
    return files[index]


def _steps(task, tool):
    return [s["arguments"] for s in task["reference_solution"]["steps"] if s["tool"] == tool]


def _reference_answer_meets_answer_checks(task):
    answer = task["reference_solution"]["final_answer"]
    if task["gold_response_type"] == "text":
        assert answer == task["gold_response"]
    for check in checks(task, "answer_number"):
        assert answer_number_met(check, answer), (task["task_id"], check)
    for check in checks(task, "answer_regex"):
        flags = 0 if check.get("case_sensitive") else re.IGNORECASE
        assert re.search(check["pattern"], answer, flags), (task["task_id"], check)


def test_every_reference_final_answer_meets_its_answer_checks(tasks):
    for task in tasks.values():
        _reference_answer_meets_answer_checks(task)


# --- Project Keystone -------------------------------------------------------------------------


def _category_savings(root):
    addressable, rates = _spend(root)
    return {c: sum(r[3] for r in addressable if r[0] == c) * rate for c, rate in rates.items()}


def _next_steerco(root) -> datetime:
    event = next(e for e in _events(root) if str(e["SUMMARY"]) == "Keystone SteerCo")
    rule = rrulestr(event["RRULE"].to_ical().decode(), dtstart=event.decoded("DTSTART"))
    return rule.after(TODAY)


def test_keystone_packaging_baseline(tasks, worlds):
    addressable, rates = _spend(worlds[CONSULTING])
    packaging = sum(r[3] for r in addressable if r[0] == "Packaging")
    values = [c["value"] for c in checks(tasks["keystone-01-packaging-baseline"], "answer_number")]
    assert values == [pytest.approx(packaging), pytest.approx(packaging * rates["Packaging"])]


def test_keystone_targets_follow_the_cpo_email(sample_dir, tasks, worlds):
    task = tasks["keystone-02-update-targets"]
    email = _mail_with(worlds[CONSULTING], "Revised savings targets after carrier RFP")
    changes = {
        m[0]: int(m[2]) / 100
        for m in re.findall(r"(Logistics|MRO) target(?: savings)? from (\d+)% to (\d+)%", email["body"])
    }
    assert changes == {"Logistics": 0.09, "MRO": 0.08}
    sheet = openpyxl.load_workbook(fs(worlds[CONSULTING], SPEND_CUBE))["Assumptions"]
    rows = {sheet[f"A{r}"].value: r for r in range(2, sheet.max_row + 1)}
    expected = {f"B{rows[c]}": v for c, v in changes.items()}
    assert {c["cell"]: c["value"] for c in checks(task, "cell_value")} == expected
    gold = _gold(sample_dir, task)
    for cell, value in expected.items():
        assert _cell(gold, "Assumptions", cell) == value
    operations = _steps(task, "spreadsheets_edit_spreadsheet")[0]["operations"]
    assert {op["cell"]: op["value"] for op in operations if op["cell"].startswith("B")} == expected


def test_keystone_savings_by_plant(sample_dir, tasks, worlds):
    task = tasks["keystone-03-savings-by-plant"]
    addressable, rates = _spend(worlds[CONSULTING])
    savings = Counter()
    for category, plant, _region, amount, _n, _flag in addressable:
        savings[plant] += amount * rates[category]
    top, top_value = savings.most_common(1)[0]
    by_cell = {c["cell"]: c["value"] for c in checks(task, "cell_value")}
    assert by_cell["A2"] == top
    assert by_cell["C2"] == pytest.approx(top_value, abs=0.01)
    assert by_cell[f"C{len(savings) + 2}"] == pytest.approx(sum(savings.values()), abs=0.01)
    gold = openpyxl.load_workbook(_gold(sample_dir, task))["By Plant"]
    assert gold["A2"].value == top and gold["C2"].value == pytest.approx(top_value, abs=0.01)
    rows = _steps(task, "spreadsheets_create_spreadsheet")[0]["sheets"][0]["rows"]
    assert rows[0][0] == top and rows[-1][2] == pytest.approx(sum(savings.values()), abs=0.05)


def test_keystone_next_steerco_is_derived_from_the_recurrence(worlds):
    nxt = _next_steerco(worlds[CONSULTING])
    assert nxt.date() == date(2024, 3, 14)


def test_keystone_preread_deck(sample_dir, tasks, worlds):
    task = tasks["keystone-04-steerco-preread"]
    total = sum(_category_savings(worlds[CONSULTING]).values())
    (check,) = checks(task, "file_exists")
    assert check["contains"] == [f"${total / 1e6:.1f}M"]
    text = _deck_text(_gold(sample_dir, task))
    assert _contains_met(check, text)
    assert _next_steerco(worlds[CONSULTING]).strftime("%B %-d, %Y") in text


def test_keystone_fill_steerco_draft(sample_dir, tasks, worlds):
    task = tasks["keystone-05-fill-steerco-draft"]
    path = "/Deliverables/SteerCo/Keystone SteerCo 2024-02-29 DRAFT.pptx"
    before = _deck_text(fs(worlds[CONSULTING], path))
    (check,) = checks(task, "file_exists")
    assert not _contains_met(check, before)
    for op in _steps(task, "presentations_edit_slides")[0]["operations"]:
        assert op["search"] in before
    total = sum(_category_savings(worlds[CONSULTING]).values())
    assert check["contains"] == [f"${total / 1e6:.1f}M"]
    after = _deck_text(_gold(sample_dir, task))
    assert _contains_met(check, after) and "[TBC]" not in after and "[TBD]" not in after


def test_keystone_interview_summary(sample_dir, tasks, worlds):
    task = tasks["keystone-06-interview-summary"]
    interviews = [
        p for p in (worlds[CONSULTING] / "filesystem" / "Research" / "Interviews").rglob("*") if p.is_file()
    ]
    plants = [re.match(r"# (\w+) plant", p.read_text()).group(1) for p in interviews]
    issues = Counter(
        line[2:]
        for p in interviews
        for line in p.read_text().split("## Top issues raised")[1].split("##")[0].splitlines()
        if line.startswith("- ")
    )
    (check,) = checks(task, "file_exists")
    assert sorted(check["contains"]) == sorted(plants)
    path = "/Deliverables/Interim Report/Keystone_interim_findings_DRAFT (jm edits).docx"
    paragraphs = docx.Document(str(fs(worlds[CONSULTING], path))).paragraphs
    index = int(_steps(task, "documents_edit_content_text")[0]["identifier"].rsplit(".", 1)[1])
    assert paragraphs[index].text.startswith("[") and paragraphs[index - 1].text == "3. Interview themes"
    gold_text = _doc_text(_gold(sample_dir, task))
    assert _contains_met(check, gold_text)
    top, count = issues.most_common(1)[0]
    assert f"{top} ({count} of 4 plants)" in gold_text


def test_keystone_headcount_email(tasks, worlds):
    task = tasks["keystone-07-headcount-email"]
    with fs(worlds[CONSULTING], "/Data/Raw/plant_headcount_Jan2024.csv").open(encoding="utf-8") as handle:
        procurement = {
            r["plant"]: int(r["fte"]) for r in csv.DictReader(handle) if r["function"] == "Procurement"
        }
    total, top = sum(procurement.values()), max(procurement, key=procurement.get)
    assert sorted(procurement.values())[-1] > sorted(procurement.values())[-2]
    request = _mail_with(worlds[CONSULTING], "Procurement headcount across plants")
    assert "copy Tom" in request["body"]
    first, second = checks(task, "email_sent")
    assert first["body_contains"] == [str(total)] and second["body_contains"] == [top]
    sent = _steps(task, "mail_send_mail")[0]
    assert set(first["to"]) <= {sent["to_email"], *sent["cc"]}
    assert all(s in sent["body"] for s in first["body_contains"] + second["body_contains"])


def test_keystone_macon_visit(tasks, worlds):
    task = tasks["keystone-08-macon-visit-chat"]
    visit = next(e for e in _events(worlds[CONSULTING]) if str(e["SUMMARY"]) == "Macon plant visit")
    assert visit.decoded("DTSTART") == date(2024, 3, 12)
    space = worlds[CONSULTING] / ".apps_data" / "chat" / "Google Chat" / "Groups"
    (check,) = checks(task, "chat_posted")
    info = [json.loads(p.read_text()) for p in space.glob("*/group_info.json")]
    assert check["channel"] in [i.get("name") for i in info]
    posted = _steps(task, "chat_post_message")[0]
    messages = json.loads((space / posted["channel_id"] / "messages.json").read_text())["messages"]
    assert any("Macon" in m["text"] and m["creator"]["name"].startswith("Kenji") for m in messages)
    assert str(visit["LOCATION"]) in posted["message"] and all(
        s in posted["message"] for s in check["contains"]
    )


# --- Project Atlas ----------------------------------------------------------------------------


def _adjusted_ebitda_m(root) -> float:
    workbook = openpyxl.load_workbook(
        fs(root, "/Data Room/02 Financials/Lumen_Financials_FY2021-FY2023.xlsx")
    )
    lines = {r[0]: r[3] for r in workbook["Income Statement"].iter_rows(min_row=2, values_only=True)}
    reported = lines["Revenue"] - lines["Cost of goods sold"] - lines["SG&A"] - lines["R&D"]
    adjustments = [
        r[1]
        for r in workbook["EBITDA Adjustments"].iter_rows(min_row=3, values_only=True)
        if isinstance(r[1], int)
    ]
    return (reported + sum(adjustments)) / 1000


def _fy2023_revenue(root) -> int:
    workbook = openpyxl.load_workbook(
        fs(root, "/Data Room/02 Financials/Lumen_Financials_FY2021-FY2023.xlsx")
    )
    return next(r[3] for r in workbook["Income Statement"].iter_rows(values_only=True) if r[0] == "Revenue")


def _comp_multiples(root) -> list[float]:
    sheet = openpyxl.load_workbook(fs(root, "/Valuation/Atlas comps v3 (SR).xlsx"))["Comps"]
    return [(r[1] + r[2]) / r[5] for r in sheet.iter_rows(min_row=2, values_only=True) if r[0] != "Median"]


def _register(root) -> list[dict]:
    with fs(root, "/Data Room/03 Material Contracts/Material contracts register.csv").open(
        encoding="utf-8"
    ) as handle:
        return list(csv.DictReader(handle))


def test_atlas_comps_implied_ev(tasks, worlds):
    task = tasks["atlas-01-comps-implied-ev"]
    median = statistics.median(_comp_multiples(worlds[DEAL]))
    values = [c["value"] for c in checks(task, "answer_number")]
    assert values == [
        pytest.approx(median, abs=0.001),
        pytest.approx(median * _adjusted_ebitda_m(worlds[DEAL]), abs=0.01),
    ]


def test_atlas_football_field_uses_world_comps_and_task_precedents(sample_dir, tasks, worlds):
    task = tasks["atlas-02-football-field"]
    overlay = sample_dir / "task_files" / task["task_id"] / "filesystem"
    (input_file,) = [p for p in overlay.rglob("*") if p.is_file()]
    input_path = "/" + input_file.relative_to(overlay).as_posix()
    with input_file.open() as handle:
        precedents = [
            float(r["ev_usd_m"]) / float(r["target_ltm_ebitda_usd_m"]) for r in csv.DictReader(handle)
        ]
    assert not fs(worlds[DEAL], input_path).exists(), "precedents come only with the task"
    ebitda = _adjusted_ebitda_m(worlds[DEAL])
    expected = {}
    for row, multiples in ((2, _comp_multiples(worlds[DEAL])), (3, precedents)):
        q1, _q2, q3 = statistics.quantiles(multiples, n=4, method="inclusive")
        expected[f"D{row}"], expected[f"E{row}"] = q1 * ebitda, q3 * ebitda
    by_cell = {c["cell"]: c for c in checks(task, "cell_value")}
    for cell, value in expected.items():
        assert by_cell[cell]["value"] == pytest.approx(value, abs=0.05)
        assert (
            abs(_cell(_gold(sample_dir, task), "Football Field", cell) - by_cell[cell]["value"])
            <= by_cell[cell]["tolerance"]
        )


def test_atlas_board_deck_offer(sample_dir, tasks, worlds):
    task = tasks["atlas-03-board-deck-offer"]
    email = _mail_with(worlds[DEAL], "Board approved revised offer for Lumen")
    price = int(re.search(r"\$(\d+)M", email["body"]).group(1))
    multiple = f"{price / _adjusted_ebitda_m(worlds[DEAL]):.1f}x"
    assert [c["contains"] for c in checks(task, "file_exists")] == [[f"${price}M"], [multiple]]
    before = _deck_text(fs(worlds[DEAL], "/Board/Atlas Board Update - March 2024.pptx"))
    assert f"${price}M" not in before
    for op in _steps(task, "presentations_edit_slides")[0]["operations"]:
        assert op["search"] in before
    after = _deck_text(_gold(sample_dir, task))
    assert f"${price}M" in after and multiple in after


def test_atlas_change_of_control(tasks, worlds):
    task = tasks["atlas-04-change-of-control"]
    flagged = [r for r in _register(worlds[DEAL]) if r["change_of_control"] != "None"]
    share = 100 * sum(int(r["fy2023_revenue_usd_k"]) for r in flagged) / _fy2023_revenue(worlds[DEAL])
    assert checks(task, "answer_number")[0]["value"] == pytest.approx(share, abs=0.001)
    (regex,) = checks(task, "answer_regex")
    names = [r["counterparty"] for r in flagged]
    assert re.search(regex["pattern"], "; ".join(names))
    for missing in names:
        assert not re.search(regex["pattern"], "; ".join(n for n in names if n != missing))
    contracts = worlds[DEAL] / "filesystem" / "Data Room" / "03 Material Contracts"
    for row in flagged:
        (path,) = contracts.glob(f"{row['counterparty']} - *.docx")
        assert "Change of Control" in _doc_text(path)


def test_atlas_spa_memo(sample_dir, tasks, worlds):
    task = tasks["atlas-05-spa-key-terms-memo"]
    spa = _doc_text(fs(worlds[DEAL], "/Legal/SPA/Atlas SPA draft v4 (A&K comments).docx"))
    needles = [
        re.search(r"purchase price for the Shares is \$([\d,]+)", spa).group(1),
        re.search(r"\"Escrow Amount\" means \$([\d,]+)", spa).group(1),
        re.search(r"\"Outside Date\" means ([A-Z][a-z]+ \d+, \d{4})", spa).group(1),
        re.search(r"reverse termination fee of \$([\d,]+)", spa).group(1),
        re.search(r"laws of the State of (\w+)", spa).group(1),
    ]
    contains = [n for c in checks(task, "file_exists") for n in c["contains"]]
    assert sorted(contains) == sorted(needles)
    memo = _doc_text(_gold(sample_dir, task))
    assert all(n in memo for n in needles)


def test_atlas_disclosure_schedule(sample_dir, tasks, worlds):
    task = tasks["atlas-06-disclosure-schedule"]
    (check,) = checks(task, "file_exists")
    path = "/Legal/SPA/Disclosure Schedule - draft v2.docx"
    paragraphs = docx.Document(str(fs(worlds[DEAL], path))).paragraphs
    index = int(_steps(task, "documents_edit_content_text")[0]["identifier"].rsplit(".", 1)[1])
    assert paragraphs[index].text.startswith("[Reserved")
    assert [p.text for p in paragraphs[:index] if p.text.startswith("Schedule 3.12")]
    # The facts sit only in the scanned page (the OCR itself is tested in test_files_readable).
    assert not _contains_met(check, _doc_text(fs(worlds[DEAL], path)))
    assert _contains_met(check, _doc_text(_gold(sample_dir, task)))


def test_atlas_consent_email(tasks, worlds):
    task = tasks["atlas-07-consent-email"]
    consent = [
        r["counterparty"] for r in _register(worlds[DEAL]) if r["change_of_control"] == "Consent required"
    ]
    request = _mail_with(worlds[DEAL], "Change-of-control consents")
    assert "Catherine" in request["body"] and "Copy me" in request["body"]
    (check,) = checks(task, "email_sent")
    assert check["body_contains"] == consent
    sent = _steps(task, "mail_send_mail")[0]
    assert set(check["to"]) <= {sent["to_email"], *sent["cc"]}
    assert all(name in sent["body"] for name in consent)


def test_atlas_spa_call_slot(tasks, worlds):
    task = tasks["atlas-08-spa-call-invite"]
    proposal = _mail_with(worlds[DEAL], "SPA negotiation call")["body"]
    reply = _mail_with(worlds[DEAL], "Re: SPA negotiation call")["body"]
    slots = re.findall(
        r"(Monday|Tuesday|Wednesday|Thursday|Friday), (March \d+) at (\d+:\d+ [ap]m) ET", proposal
    )
    works = [s for s in slots if f"{s[0]} works" in reply]
    assert len(slots) == 2 and len(works) == 1
    day, when, at = works[0]
    start = datetime.strptime(f"{when} 2024 {at}", "%B %d %Y %I:%M %p")
    (check,) = checks(task, "event_created")
    assert check["date"] == start.date().isoformat()
    created = _steps(task, "calendar_create_event")[0]
    assert (
        created["start"]["dateTime"] == start.isoformat()
        and created["start"]["timeZone"] == "America/New_York"
    )
    invited = {a["email"] for a in created["attendees"]}
    assert set(check["attendees"]) == invited
    for name in ("Gideon", "Catherine", "Nadia"):
        assert any(email.startswith(name.lower()) for email in invited)


def test_atlas_offer_vs_market_cap_from_the_market_data(tasks, worlds):
    task = tasks["atlas-09-offer-vs-market-cap"]
    market = worlds[DEAL] / ".apps_data" / "market_data"
    with (market / "quotes.csv").open() as handle:
        close = next(float(r["close"]) for r in csv.DictReader(handle) if r["date"] == "2024-02-29")
    with (market / "profiles.csv").open() as handle:
        shares = float(next(csv.DictReader(handle))["shares_outstanding"])
    market_cap_m = close * shares / 1e6
    values = [c["value"] for c in checks(task, "answer_number")]
    assert values == [
        pytest.approx(close),
        pytest.approx(market_cap_m, abs=0.01),
        pytest.approx(435 / market_cap_m * 100, abs=0.01),
    ]
    _reference_answer_meets_answer_checks(task)


def test_keystone_budget_cap_is_known_only_to_the_client(tasks, worlds):
    """The cap is in no file, mail or chat of the world: only Margaret's persona knows it."""
    task = tasks["keystone-10-ask-client-budget-cap"]
    root = worlds[CONSULTING]
    (cap,) = checks(task, "answer_number")
    personas = json.loads((root / ".apps_data" / "coworkers" / "personas.json").read_text())
    margaret = next(p for p in personas if p["name"].startswith("Margaret"))
    assert any(f"{cap['value']:,.0f}" in fact for fact in margaret["knows"])
    (contacted,) = checks(task, "coworker_contacted")
    assert contacted["persona"] == margaret["email"] and contacted["channel"] in margaret["channels"]
    for path in root.rglob("*"):
        if path.is_file() and "coworkers" not in path.parts:
            data = path.read_bytes()
            assert b"1.85M" not in data and b"1,850,000" not in data, path
