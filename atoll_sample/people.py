"""The fictional people and companies of the sample worlds (all invented; ``.example`` domains)."""

from __future__ import annotations


def person(name: str, email: str, title: str, company: str) -> dict[str, str]:
    return {"name": name, "email": email, "title": title, "company": company}


# --- world 1: Meridian Partners x Halvorsen Foods (Project Keystone) ---------------------------

MERIDIAN = "Meridian Partners"
HALVORSEN = "Halvorsen Foods"
MP = "meridianpartners.example"
HF = "halvorsenfoods.example"

PRIYA = person("Priya Raman", f"priya.raman@{MP}", "Engagement Manager", MERIDIAN)
TOMAS = person("Tomás Herrera", f"tomas.herrera@{MP}", "Partner", MERIDIAN)
ZOE = person("Zoë Lindqvist", f"zoe.lindqvist@{MP}", "Consultant", MERIDIAN)
KENJI = person("Kenji Watanabe", f"kenji.watanabe@{MP}", "Business Analyst", MERIDIAN)
AOIFE = person("Aoife Ní Bhriain", f"aoife.nibhriain@{MP}", "Senior Consultant", MERIDIAN)
MARGARET = person("Margaret Okonkwo", f"margaret.okonkwo@{HF}", "Chief Financial Officer", HALVORSEN)
DMITRI = person("Dmitri Sokolov", f"dmitri.sokolov@{HF}", "Chief Procurement Officer", HALVORSEN)
LINNEA = person("Linnea Berg", f"linnea.berg@{HF}", "VP Manufacturing Operations", HALVORSEN)
RAUL = person("Raúl Domínguez", f"raul.dominguez@{HF}", "Procurement Analyst", HALVORSEN)

KEYSTONE_TEAM = [PRIYA, TOMAS, ZOE, KENJI, AOIFE]
KEYSTONE_CLIENT = [MARGARET, DMITRI, LINNEA, RAUL]

# --- world 2: Corvane Industrial acquires Lumen Sensors (Project Atlas) ------------------------

CORVANE = "Corvane Industrial"
LUMEN = "Lumen Sensors"
STERLING = "Sterling Rowe Capital"
ASHBY = "Ashby & Kell LLP"
FAIRWEATHER = "Fairweather Lowe LLP"
CV = "corvane.example"
SR = "sterlingrowe.example"
AK = "ashbykell.example"
LS = "lumensensors.example"
FL = "fairweatherlowe.example"

ELENA = person("Elena Varga", f"elena.varga@{CV}", "Director, Corporate Development", CORVANE)
ROBERT = person("Robert Haines", f"robert.haines@{CV}", "Chief Executive Officer", CORVANE)
NADIA = person("Nadia Petrović", f"nadia.petrovic@{CV}", "General Counsel", CORVANE)
OWEN = person("Owen Castellano", f"owen.castellano@{CV}", "Corporate Development Analyst", CORVANE)
JAMES = person("James Whitford", f"james.whitford@{SR}", "Managing Director", STERLING)
AISHA = person("Aisha Rahman", f"aisha.rahman@{SR}", "Associate", STERLING)
CATHERINE = person("Catherine Moreau", f"catherine.moreau@{AK}", "Partner", ASHBY)
BJORN = person("Björn Eriksen", f"bjorn.eriksen@{AK}", "Associate", ASHBY)
HIROSHI = person("Hiroshi Tanaka", f"hiroshi.tanaka@{LS}", "Chief Executive Officer", LUMEN)
SOFIA = person("Sofía Castellanos", f"sofia.castellanos@{LS}", "Chief Financial Officer", LUMEN)
GIDEON = person("Gideon Fairweather", f"gideon.fairweather@{FL}", "Partner (seller's counsel)", FAIRWEATHER)
