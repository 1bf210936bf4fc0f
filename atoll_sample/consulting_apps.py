"""Project Keystone: the user's mailbox, calendars and Google Chat export."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from atoll_sample._world import WorldDraft, filler_chat, filler_mail
from atoll_sample.calendar import write_calendar
from atoll_sample.chat import write_chat
from atoll_sample.mail import write_mbox
from atoll_sample.people import (
    AOIFE,
    DMITRI,
    KENJI,
    KEYSTONE_CLIENT,
    KEYSTONE_TEAM,
    LINNEA,
    MARGARET,
    MP,
    PRIYA,
    RAUL,
    TOMAS,
    ZOE,
)

CHICAGO = ZoneInfo("America/Chicago")
NEW_YORK = ZoneInfo("America/New_York")
AMSTERDAM = ZoneInfo("Europe/Amsterdam")
LONDON = ZoneInfo("Europe/London")
UTC = ZoneInfo("UTC")

MBOX = "mail/All mail Including Spam and Trash.mbox"
CORE_SPACE = ("Space AAAAk3yst0N", "Keystone core team")
MACON_LOCATION = "Halvorsen Foods Macon plant, 4100 Riverside Industrial Pkwy, Macon, GA"
STEERCO_UID = "keystone-steerco@meridianpartners.example"

_THREADS = [
    (
        "Ariba export - GL mapping",
        ["The Tilburg and Wrocław cost centres still need mapping.", "Mapped now, see the updated cube."],
    ),
    (
        "Travel for Aurora visit",
        ["Booked the 7:05 flight from LGA for Tuesday.", "Thanks, I will join from Chicago."],
    ),
    (
        "Interview guide v2",
        ["Attached comments on the interview guide.", "Incorporated, sending the final.", "Looks good."],
    ),
    (
        "Weekly status - week 6",
        ["Baseline is complete; interviews are running.", "Noted, thanks for the clear summary."],
    ),
    ("Packaging SKU list", ["Can you pull the SKU list per plant?", "Shared in the analytics space."]),
    (
        "Freight invoices 2023",
        ["Do we have the 2023 freight invoices for Fresno?", "Raúl is sending them tomorrow."],
    ),
    (
        "SteerCo logistics",
        ["The room in Aurora is booked for the SteerCo.", "Great, please add dial-in details."],
    ),
    ("Data room access", ["Can you grant Kenji access to the client data room?", "Done."]),
    ("Timesheets reminder", ["Please submit timesheets by Friday.", "Submitted."]),
    (
        "MRO spares pilot",
        [
            "Linnea suggested a spares pilot in Macon.",
            "Good idea, let us raise it at the SteerCo.",
            "Added to the agenda.",
        ],
    ),
    (
        "Benchmarks source",
        ["Where do the packaging benchmarks come from?", "From our 2023 survey, see Research/Industry."],
    ),
    (
        "Dairy quota question",
        ["Is Lethbridge dairy spend negotiable at all?", "No, it is under the provincial quota system."],
    ),
    (
        "Energy contracts in EU plants",
        [
            "Tilburg and Wrocław energy are fixed-price until 2025.",
            "So we exclude them from addressable spend.",
        ],
    ),
    ("Team dinner", ["Team dinner on Thursday after the SteerCo?", "Count me in!"]),
    ("Expense policy", ["Reminder: client travel is capped at 8% of fees.", "Understood."]),
    (
        "Plant visit schedule",
        ["Can we fit Tilburg into the week of 18 March?", "Yes, the 20th works for the plant.", "Booked."],
    ),
    (
        "Savings model review",
        ["Tomás wants to review the savings model on Monday.", "I will prepare a walkthrough."],
    ),
]

_CHAT_LINES = [
    "Morning all - pushing the latest spend cube to the drive now.",
    "Can someone check the Wrocław GL mapping? Numbers look off.",
    "Fixed, it was a currency issue (PLN vs USD).",
    "Interview guide is final, thanks everyone.",
    "Heads up: client IT is patching Ariba tonight.",
    "I'll take the Fresno follow-ups.",
    "Packaging SKU count per plant is in the analytics folder.",
    "Who is joining the Thursday SteerCo in person?",
    "Me, flying in Wednesday evening.",
    "Reminder: timesheets due Friday.",
    "The freight invoices for Fresno arrived.",
    "Nice work on the baseline deck!",
    "Can we move the internal sync to 2pm?",
    "Sure, updated the invite.",
    "Benchmarks PDF is in Research/Industry.",
    "Does anyone have the Halvorsen org chart?",
    "Shared it in the drive under Admin.",
    "Lunch order going in at 12:15.",
]


def build_apps(draft: WorldDraft) -> None:
    _mail(draft)
    _calendar(draft)
    _chat(draft)


def _mail(draft: WorldDraft) -> None:
    people = KEYSTONE_TEAM + KEYSTONE_CLIENT
    messages = filler_mail(
        draft,
        prefix="ks",
        threads=_THREADS,
        people=people,
        start=datetime(2024, 1, 9, tzinfo=NEW_YORK),
        span_days=45,
    )
    targets_at = datetime(2024, 2, 27, 16, 42, tzinfo=CHICAGO)
    messages += [
        {
            "key": "ks-targets-1",
            "sender": DMITRI,
            "to": [PRIYA],
            "cc": [TOMAS, RAUL],
            "date": targets_at,
            "subject": "Revised savings targets after carrier RFP",
            "body": (
                "Hi Priya,\n\nFollowing the carrier RFP results we agreed internally to raise the Logistics "
                "target savings from 7% to 9%. We also want to lower the MRO target from 10% to 8%, because the "
                "spares programme is out of scope this year. All other category targets stay as they are.\n\n"
                "Please update the Assumptions tab of the spend cube so the SteerCo numbers reflect this, and "
                "note the source as 'CPO email 27 Feb'.\n\nThanks,\nDmitri"
            ),
        },
        {
            "key": "ks-targets-2",
            "sender": PRIYA,
            "to": [DMITRI],
            "cc": [TOMAS, RAUL],
            "date": targets_at + timedelta(hours=1, minutes=5),
            "subject": "Re: Revised savings targets after carrier RFP",
            "body": "Hi Dmitri,\n\nUnderstood - we will update the model before the next SteerCo.\n\nBest,\nPriya",
            "reply_to": "ks-targets-1",
        },
        {
            "key": "ks-headcount-1",
            "sender": MARGARET,
            "to": [PRIYA],
            "cc": [],
            "date": datetime(2024, 2, 28, 9, 12, tzinfo=CHICAGO),
            "subject": "Procurement headcount across plants",
            "body": (
                "Priya,\n\nFor the board pack I need the total number of procurement FTEs across all six plants "
                "(January headcount file), and which plant has the most procurement staff. Please reply by "
                "email and copy Tomás.\n\nMargaret"
            ),
            "html": (
                "<html><body><p>Priya,</p><p>For the board pack I need the <b>total number of procurement FTEs "
                "across all six plants</b> (January headcount file), and which plant has the most procurement "
                "staff. Please reply by email and copy Tomás.</p><p>Margaret</p></body></html>"
            ),
        },
        {
            "key": "ks-shortlist-1",
            "sender": DMITRI,
            "to": [PRIYA],
            "cc": [RAUL],
            "date": datetime(2024, 2, 26, 11, 0, tzinfo=CHICAGO),
            "subject": "Packaging supplier shortlist",
            "body": "Priya,\n\nShortlist for the packaging RFP: Ridgeway Corrugated, Nordfolie GmbH, Sunbelt Films.\n\nDmitri",
            "attachment": (
                "shortlist.csv",
                b"supplier,country\nRidgeway Corrugated,US\nNordfolie GmbH,DE\nSunbelt Films,US\n",
                "text/csv",
            ),
        },
        {
            "key": "ks-shortlist-2",
            "sender": PRIYA,
            "to": [AOIFE],
            "cc": [ZOE],
            "date": datetime(2024, 2, 26, 12, 30, tzinfo=NEW_YORK),
            "subject": "Fwd: Packaging supplier shortlist",
            "body": (
                "Aoife - for the RFP long list.\n\n---------- Forwarded message ---------\nFrom: Dmitri Sokolov "
                f"<{DMITRI['email']}>\nSubject: Packaging supplier shortlist\n\nShortlist for the packaging RFP: "
                "Ridgeway Corrugated, Nordfolie GmbH, Sunbelt Films."
            ),
        },
        {
            "key": "ks-macon-1",
            "sender": LINNEA,
            "to": [PRIYA],
            "cc": [ZOE, KENJI],
            "date": datetime(2024, 2, 22, 14, 3, tzinfo=CHICAGO),
            "subject": "Macon plant visit",
            "body": "Priya,\n\nConfirming the Macon visit on 12 March; I sent you the calendar invite with the address.\n\nLinnea",
        },
    ]
    messages.sort(key=lambda m: m["date"])
    write_mbox(draft.apps(MBOX), messages, domain=MP, user_email=draft.user["email"])
    draft.facts["mail_count"] = len(messages)


def _at(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)


def _calendar(draft: WorldDraft) -> None:
    steerco_people = [MARGARET, DMITRI, LINNEA, TOMAS]
    events = [
        {
            "uid": STEERCO_UID,
            "summary": "Keystone SteerCo",
            "start": _at(date(2024, 1, 18), 10, 0, CHICAGO),
            "end": _at(date(2024, 1, 18), 11, 30, CHICAGO),
            "rrule": {"freq": "weekly", "interval": 2, "count": 8},
            "location": "Halvorsen HQ, Aurora - Boardroom 3",
            "organizer": PRIYA,
            "attendees": steerco_people,
            "alarm_minutes": 30,
            "description": "Biweekly steering committee.",
        },
        {
            "uid": "keystone-standup@meridianpartners.example",
            "summary": "Keystone team stand-up",
            "start": _at(date(2024, 1, 8), 8, 30, NEW_YORK),
            "end": _at(date(2024, 1, 8), 8, 45, NEW_YORK),
            "rrule": {
                "freq": "weekly",
                "byday": ["MO", "TU", "WE", "TH", "FR"],
                "until": datetime(2024, 4, 30, 23, 59, tzinfo=UTC),
            },
            "organizer": PRIYA,
            "attendees": [TOMAS, ZOE, KENJI, AOIFE],
            "alarm_minutes": 5,
        },
        {
            "uid": "macon-visit@meridianpartners.example",
            "summary": "Macon plant visit",
            "start": date(2024, 3, 12),
            "end": date(2024, 3, 13),
            "location": MACON_LOCATION,
            "organizer": LINNEA,
            "attendees": [PRIYA, ZOE, KENJI],
            "description": "Site walk with the plant manager and maintenance lead.",
        },
        {
            "uid": "aurora-visit@meridianpartners.example",
            "summary": "Aurora plant visit",
            "start": date(2024, 2, 6),
            "end": date(2024, 2, 7),
            "location": "Halvorsen Foods Aurora plant",
            "attendees": [ZOE, PRIYA],
        },
        {
            "uid": "tilburg-workshop@meridianpartners.example",
            "summary": "Tilburg packaging workshop",
            "start": _at(date(2024, 3, 20), 9, 0, AMSTERDAM),
            "end": _at(date(2024, 3, 20), 16, 0, AMSTERDAM),
            "location": "Halvorsen Tilburg plant",
            "organizer": AOIFE,
            "attendees": [PRIYA, DMITRI],
            "alarm_minutes": 60,
        },
        {
            "uid": "london-partner-sync@meridianpartners.example",
            "summary": "Partner sync (London)",
            "start": _at(date(2024, 3, 6), 15, 0, LONDON),
            "end": _at(date(2024, 3, 6), 15, 30, LONDON),
            "organizer": TOMAS,
            "attendees": [PRIYA],
        },
        {
            "uid": "offsite@meridianpartners.example",
            "summary": "Meridian offsite",
            "start": date(2024, 3, 28),
            "end": date(2024, 3, 30),
            "location": "Lake Geneva, WI",
        },
    ]
    for week in range(8):
        day = date(2024, 1, 10) + timedelta(weeks=week)
        who = [DMITRI, RAUL, LINNEA][week % 3]
        events.append(
            {
                "uid": f"client-checkin-{week}@meridianpartners.example",
                "summary": f"Check-in with {who['name']}",
                "start": _at(day, 13, 0, CHICAGO),
                "end": _at(day, 13, 30, CHICAGO),
                "organizer": PRIYA,
                "attendees": [who],
                "alarm_minutes": 10,
            }
        )
    for week, person in enumerate([ZOE, KENJI, AOIFE, ZOE, KENJI, AOIFE]):
        day = date(2024, 1, 12) + timedelta(weeks=week)
        events.append(
            {
                "uid": f"one-on-one-{week}@meridianpartners.example",
                "summary": f"1:1 {person['name'].split()[0]} / Priya",
                "start": _at(day, 16, 0, NEW_YORK),
                "end": _at(day, 16, 30, NEW_YORK),
                "organizer": PRIYA,
                "attendees": [person],
            }
        )
    write_calendar(draft.apps(f"calendar/{PRIYA['email']}.ics"), events, name=PRIYA["name"])
    holidays = [
        {
            "uid": "hol-pres-day@meridianpartners.example",
            "summary": "Presidents' Day (office closed)",
            "start": date(2024, 2, 19),
            "end": date(2024, 2, 20),
        },
        {
            "uid": "hol-good-friday@meridianpartners.example",
            "summary": "Good Friday (office closed)",
            "start": date(2024, 3, 29),
            "end": date(2024, 3, 30),
        },
    ]
    write_calendar(draft.apps("calendar/Meridian US holidays.ics"), holidays, name="Meridian US holidays")
    draft.facts["event_count"] = len(events) + len(holidays)


def _chat(draft: WorldDraft) -> None:
    start = datetime(2024, 2, 12, 8, 30, tzinfo=NEW_YORK)
    core = filler_chat(draft, _CHAT_LINES, KEYSTONE_TEAM, start, 34)
    core[5]["deleted"] = True
    core.append(
        {
            "author": KENJI,
            "at": datetime(2024, 2, 29, 15, 20, tzinfo=UTC),
            "text": "Does anyone know when exactly the Macon plant visit is, and where we meet? I need to book travel.",
        }
    )
    core.append(
        {
            "author": ZOE,
            "at": datetime(2024, 2, 29, 15, 31, tzinfo=UTC),
            "text": "Not sure - Priya has the invite.",
            "topic": len(core) - 1,
        }
    )
    groups = [
        {"group_id": CORE_SPACE[0], "name": CORE_SPACE[1], "members": KEYSTONE_TEAM, "messages": core},
        {
            "group_id": "Space AAAAan4lyt1",
            "name": "Keystone analytics",
            "members": [PRIYA, KENJI, ZOE],
            "messages": filler_chat(draft, _CHAT_LINES[6:] + _CHAT_LINES[:6], [PRIYA, KENJI, ZOE], start, 30),
        },
        {
            "group_id": "Space AAAAchi0ffc",
            "name": "Meridian Chicago office",
            "members": KEYSTONE_TEAM,
            "messages": filler_chat(draft, _CHAT_LINES[12:] + _CHAT_LINES[:12], KEYSTONE_TEAM, start, 20),
        },
        {
            "group_id": "DM 7tQmAAAAE",
            "members": [PRIYA, TOMAS],
            "messages": filler_chat(draft, _CHAT_LINES[3:], [PRIYA, TOMAS], start, 12),
        },
        {
            "group_id": "DM 9kWxAAAAE",
            "members": [PRIYA, KENJI],
            "messages": filler_chat(draft, _CHAT_LINES[8:], [PRIYA, KENJI], start, 12),
        },
    ]
    write_chat(draft.apps("chat/Google Chat"), groups, user=PRIYA, user_id="104857392017463829101")
    draft.facts["chat_count"] = sum(len(g["messages"]) for g in groups)
