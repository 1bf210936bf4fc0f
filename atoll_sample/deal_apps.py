"""Project Atlas: the user's mailbox, calendars and Google Chat export."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from atoll_sample._world import WorldDraft, filler_chat, filler_mail
from atoll_sample.calendar import write_calendar
from atoll_sample.chat import write_chat
from atoll_sample.mail import write_mbox
from atoll_sample.people import (
    AISHA,
    BJORN,
    CATHERINE,
    CV,
    ELENA,
    GIDEON,
    HIROSHI,
    JAMES,
    NADIA,
    OWEN,
    ROBERT,
    SOFIA,
)

NEW_YORK = ZoneInfo("America/New_York")
TOKYO = ZoneInfo("Asia/Tokyo")
LONDON = ZoneInfo("Europe/London")
UTC = ZoneInfo("UTC")

MBOX = "mail/All mail Including Spam and Trash.mbox"
DEAL_SPACE = ("Space AAAAatl4sDT", "Project Atlas deal team")
REVISED_PRICE = 435_000_000
SPA_CALL = {
    "date": "2024-03-07",
    "start": "2024-03-07T10:00:00",
    "end": "2024-03-07T11:00:00",
    "zone": "America/New_York",
}

_INSIDERS = [ELENA, ROBERT, NADIA, OWEN, JAMES, AISHA, CATHERINE, BJORN]
_THREADS = [
    ("Atlas - weekly process update", ["Second-round bids are due March 1.", "Thanks James, noted."]),
    ("Data room access for Owen", ["Please add Owen to the data room.", "Added with read-only rights."]),
    (
        "Q&A batch 3",
        ["Uploaded the third Q&A batch.", "Thanks, reviewing tonight.", "Two follow-ups logged."],
    ),
    (
        "Quality of earnings - draft",
        ["The QoE draft is in; adjustments look reasonable.", "Let us walk through them Thursday."],
    ),
    (
        "Osaka site visit logistics",
        ["Flights to Osaka booked for March 18.", "Hotel confirmed near the plant."],
    ),
    (
        "Financing - bank commitments",
        ["Two banks confirmed commitment letters.", "Great, share drafts with Nadia."],
    ),
    (
        "HSR filing timeline",
        ["We can file HSR within 10 business days of signing.", "Good, keep it in the timeline."],
    ),
    (
        "Locked box proposal",
        [
            "Seller prefers a locked box at Dec 31, 2023.",
            "We need leakage protection then.",
            "Agreed, drafting.",
        ],
    ),
    ("Integration planning kickoff", ["Kickoff for integration planning next week?", "Yes, Tuesday works."]),
    ("Insurance diligence", ["Insurance review found no gaps.", "Thanks."]),
    ("Tax structure memo", ["Attached the tax structure memo.", "Reviewed, minor comments."]),
    (
        "Management retention",
        ["Hiroshi asked about retention packages.", "Let us discuss after signing terms."],
    ),
    ("Comps refresh", ["Refreshed comps as of Feb 28 close.", "Thanks Aisha."]),
    ("Environmental report", ["Phase I report shows no recognised conditions.", "Good news."]),
    ("Press release draft", ["First draft of the announcement attached.", "Hold until signing."]),
    (
        "Working capital peg",
        [
            "Seller proposes a peg at the 12-month average.",
            "We prefer the 6-month average.",
            "Noted for the call.",
        ],
    ),
    ("Virtual data room - new uploads", ["New uploads in folder 03 and 04.", "Thanks, Björn is reviewing."]),
]


def build_apps(draft: WorldDraft) -> None:
    _mail(draft)
    _calendar(draft)
    _chat(draft)


def _mail(draft: WorldDraft) -> None:
    messages = filler_mail(
        draft,
        prefix="at",
        threads=_THREADS,
        people=_INSIDERS,
        start=datetime(2024, 1, 15, tzinfo=NEW_YORK),
        span_days=40,
    )
    call_at = datetime(2024, 2, 28, 11, 20, tzinfo=NEW_YORK)
    messages += [
        {
            "key": "at-offer-1",
            "sender": ROBERT,
            "to": [ELENA],
            "cc": [JAMES, NADIA],
            "date": datetime(2024, 2, 29, 18, 5, tzinfo=NEW_YORK),
            "subject": "Board approved revised offer for Lumen",
            "body": (
                "Elena,\n\nThe board approved raising our offer for Lumen to $435M (cash-free, debt-free). "
                "Please update the transaction overview in the March board deck: the price and the implied "
                "multiple of adjusted FY2023 EBITDA (one decimal, same style as the deck).\n\nRobert"
            ),
        },
        {
            "key": "at-call-1",
            "sender": GIDEON,
            "to": [CATHERINE],
            "cc": [ELENA, NADIA],
            "date": call_at,
            "subject": "SPA negotiation call",
            "body": (
                "Catherine,\n\nTo work through the open SPA points (locked box, escrow, reverse termination fee) "
                "we propose a 60-minute call on either Wednesday, March 6 at 2:00 pm ET or Thursday, March 7 at "
                "10:00 am ET.\n\nKind regards,\nGideon Fairweather\nFairweather Lowe LLP"
            ),
        },
        {
            "key": "at-call-2",
            "sender": CATHERINE,
            "to": [GIDEON],
            "cc": [ELENA, NADIA],
            "date": call_at + timedelta(hours=2, minutes=14),
            "subject": "Re: SPA negotiation call",
            "body": (
                "Gideon,\n\nWednesday afternoon does not work for me (I am in court). Thursday works. Elena, could "
                "you please send the invite to Gideon, Nadia and me?\n\nBest,\nCatherine"
            ),
            "reply_to": "at-call-1",
        },
        {
            "key": "at-consents-1",
            "sender": NADIA,
            "to": [ELENA],
            "cc": [],
            "date": datetime(2024, 2, 27, 9, 40, tzinfo=NEW_YORK),
            "subject": "Change-of-control consents",
            "body": (
                "Elena,\n\nCould you send Catherine the list of Lumen contracts where the counterparty's consent "
                "is required on a change of control (see the register in folder 03)? Copy me. Catherine will "
                "prepare the consent request letters.\n\nThanks,\nNadia"
            ),
        },
        {
            "key": "at-process-html",
            "sender": JAMES,
            "to": [ELENA, ROBERT],
            "cc": [AISHA],
            "date": datetime(2024, 2, 26, 7, 30, tzinfo=NEW_YORK),
            "subject": "Atlas - bidder status (Sterling Rowe)",
            "body": "Bidder status: Corvane (round 2), Bidder B (round 2), Bidder C (withdrew).",
            "html": (
                "<html><body><p>Bidder status:</p><table border='1'><tr><th>Bidder</th><th>Status</th></tr>"
                "<tr><td>Corvane</td><td>Round 2</td></tr><tr><td>Bidder B</td><td>Round 2</td></tr>"
                "<tr><td>Bidder C</td><td>Withdrew</td></tr></table></body></html>"
            ),
        },
        {
            "key": "at-qa-fwd",
            "sender": ELENA,
            "to": [OWEN],
            "cc": [BJORN],
            "date": datetime(2024, 2, 23, 15, 2, tzinfo=NEW_YORK),
            "subject": "Fwd: Lumen Q&A responses batch 4",
            "body": (
                "Owen, please log these in the Q&A tracker.\n\n---------- Forwarded message ---------\n"
                f"From: {SOFIA['name']} <{SOFIA['email']}>\nSubject: Lumen Q&A responses batch 4\n\n"
                "Responses to Q31-Q40 are uploaded to the data room."
            ),
        },
    ]
    messages.sort(key=lambda m: m["date"])
    write_mbox(draft.apps(MBOX), messages, domain=CV, user_email=draft.user["email"])
    draft.facts["mail_count"] = len(messages)


def _at(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)


def _calendar(draft: WorldDraft) -> None:
    events = [
        {
            "uid": "atlas-deal-call@corvane.example",
            "summary": "Atlas deal team call",
            "start": _at(date(2024, 1, 16), 9, 0, NEW_YORK),
            "end": _at(date(2024, 1, 16), 9, 45, NEW_YORK),
            "rrule": {"freq": "weekly", "byday": ["TU"], "count": 12},
            "organizer": ELENA,
            "attendees": [JAMES, AISHA, CATHERINE, OWEN],
            "alarm_minutes": 10,
        },
        {
            "uid": "atlas-board@corvane.example",
            "summary": "Corvane board meeting - Atlas approval",
            "start": _at(date(2024, 3, 14), 13, 0, NEW_YORK),
            "end": _at(date(2024, 3, 14), 16, 0, NEW_YORK),
            "location": "Corvane HQ, Boardroom",
            "organizer": ROBERT,
            "attendees": [ELENA, NADIA],
            "alarm_minutes": 60,
        },
        {
            "uid": "atlas-mgmt-pres@corvane.example",
            "summary": "Lumen management presentation",
            "start": date(2024, 2, 14),
            "end": date(2024, 2, 15),
            "location": "Lumen HQ, Boston",
            "attendees": [ELENA, OWEN, JAMES, HIROSHI, SOFIA],
        },
        {
            "uid": "atlas-osaka@corvane.example",
            "summary": "Osaka plant site visit",
            "start": date(2024, 3, 18),
            "end": date(2024, 3, 21),
            "location": "Lumen Sensors KK, Osaka",
            "attendees": [ELENA, OWEN],
        },
        {
            "uid": "atlas-osaka-tour@corvane.example",
            "summary": "Osaka plant tour with plant manager",
            "start": _at(date(2024, 3, 19), 9, 30, TOKYO),
            "end": _at(date(2024, 3, 19), 12, 0, TOKYO),
            "location": "Lumen Sensors KK, Osaka",
            "attendees": [ELENA, OWEN],
            "alarm_minutes": 30,
        },
        {
            "uid": "atlas-signing@corvane.example",
            "summary": "Target signing date (Atlas)",
            "start": date(2024, 3, 22),
            "end": date(2024, 3, 23),
        },
        {
            "uid": "atlas-hsr@corvane.example",
            "summary": "HSR filing deadline",
            "start": date(2024, 4, 5),
            "end": date(2024, 4, 6),
            "alarm_minutes": 1440,
        },
        {
            "uid": "atlas-ak-london@corvane.example",
            "summary": "A&K London tax team call",
            "start": _at(date(2024, 3, 5), 15, 0, LONDON),
            "end": _at(date(2024, 3, 5), 15, 30, LONDON),
            "organizer": BJORN,
            "attendees": [ELENA, CATHERINE],
        },
        {
            "uid": "atlas-rtf-prep@corvane.example",
            "summary": "Prep: reverse termination fee position",
            "start": _at(date(2024, 3, 4), 16, 0, NEW_YORK),
            "end": _at(date(2024, 3, 4), 16, 30, NEW_YORK),
            "organizer": NADIA,
            "attendees": [ELENA],
        },
    ]
    for week in range(7):
        day = date(2024, 1, 19) + timedelta(weeks=week)
        events.append(
            {
                "uid": f"atlas-owen-1on1-{week}@corvane.example",
                "summary": "1:1 Owen / Elena",
                "start": _at(day, 11, 0, NEW_YORK),
                "end": _at(day, 11, 30, NEW_YORK),
                "organizer": ELENA,
                "attendees": [OWEN],
            }
        )
    for week in range(6):
        day = date(2024, 1, 24) + timedelta(weeks=week)
        events.append(
            {
                "uid": f"atlas-qa-review-{week}@corvane.example",
                "summary": "Q&A log review",
                "start": _at(day, 14, 0, NEW_YORK),
                "end": _at(day, 14, 45, NEW_YORK),
                "organizer": ELENA,
                "attendees": [BJORN, AISHA],
                "alarm_minutes": 15,
            }
        )
    write_calendar(draft.apps(f"calendar/{ELENA['email']}.ics"), events, name=ELENA["name"])
    draft.facts["event_count"] = len(events)


_CHAT_LINES = [
    "QoE draft landed, adjustments total looks reasonable.",
    "Can someone check the net debt definition in the SPA draft?",
    "Catherine flagged the locked box point again.",
    "Comps refreshed as of Feb 28 close - file in /Valuation.",
    "Osaka trip: flights booked for the 18th.",
    "Reminder: deal call Tuesday 9am ET.",
    "Q&A batch 4 is up in the data room.",
    "Seller wants the RTF at 3%; we are at 4%.",
    "Board deck needs the revised offer once approved.",
    "Who owns the integration checklist?",
    "Owen does - v0.3 in Notes/Integration.",
    "Insurance diligence came back clean.",
    "HSR timeline: 10 business days after signing.",
    "Great work on the financial summary slide.",
    "Lumen IT call moved to Thursday.",
    "Anyone have the structure chart? Found it, folder 01.",
]


def _chat(draft: WorldDraft) -> None:
    start = datetime(2024, 2, 5, 8, 30, tzinfo=NEW_YORK)
    team = [ELENA, OWEN, JAMES, AISHA, NADIA]
    deal = filler_chat(draft, _CHAT_LINES, team, start, 36)
    deal[9]["deleted"] = True
    legal = filler_chat(draft, _CHAT_LINES[1:] + _CHAT_LINES[:1], [ELENA, NADIA, CATHERINE, BJORN], start, 28)
    groups = [
        {"group_id": DEAL_SPACE[0], "name": DEAL_SPACE[1], "members": team, "messages": deal},
        {
            "group_id": "Space AAAAleg4lWS",
            "name": "Atlas - legal workstream",
            "members": [ELENA, NADIA, CATHERINE, BJORN],
            "messages": legal,
        },
        {
            "group_id": "Space AAAAc0rpDev",
            "name": "Corvane Corp Dev",
            "members": [ELENA, OWEN, ROBERT],
            "messages": filler_chat(draft, _CHAT_LINES[5:], [ELENA, OWEN, ROBERT], start, 18),
        },
        {
            "group_id": "DM 3pLzAAAAE",
            "members": [ELENA, OWEN],
            "messages": filler_chat(draft, _CHAT_LINES[8:], [ELENA, OWEN], start, 12),
        },
        {
            "group_id": "DM 5vNcAAAAE",
            "members": [ELENA, NADIA],
            "messages": filler_chat(draft, _CHAT_LINES[2:], [ELENA, NADIA], start, 10),
        },
    ]
    write_chat(draft.apps("chat/Google Chat"), groups, user=ELENA, user_id="117730485512093847562")
    draft.facts["chat_count"] = sum(len(g["messages"]) for g in groups)
