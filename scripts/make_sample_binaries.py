"""Build the PDF and DOCX documents in data/sample_corpus/.

The PDF and DOCX files are committed to the repository, so this script only
needs to be run again if the document text below is changed and the
binaries have to be regenerated.

Requirements (install them in a throwaway virtual environment, they are not
dependencies of the project itself):

    python3 -m venv /tmp/samplegen
    /tmp/samplegen/bin/pip install fpdf2 python-docx
    /tmp/samplegen/bin/python scripts/make_sample_binaries.py

Output:

    data/sample_corpus/public/customer-privacy-notice.pdf
    data/sample_corpus/restricted/board/board-minutes-2025-03-27.pdf
    data/sample_corpus/internal/hr/onboarding-guide.docx
    data/sample_corpus/restricted/security/vulnerability-register.docx

PDFs use the core Helvetica font, so all PDF text must be Latin-1. Creation
dates and ZIP timestamps are fixed so that re-running the script produces
the same content.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

from docx import Document
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt
from fpdf import FPDF

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "data" / "sample_corpus"
FIXED_DATE = dt.datetime(2025, 3, 31, 9, 0, 0, tzinfo=dt.UTC)
ORG = "Coldmere Valley Water Authority"

# ---------------------------------------------------------------------------
# Document text. Each document is a list of blocks:
#   ("h1" | "h2" | "h3" | "p", text)
#   ("bullets", [text, ...])
#   ("table", [header cells], [[row cells], ...][, relative column widths])
# ---------------------------------------------------------------------------

PRIVACY_NOTICE = [
    ("h1", "Customer Privacy Notice"),
    (
        "p",
        "Version 3.1, effective 1 January 2025. This notice explains how "
        "Coldmere Valley Water Authority collects, uses and protects personal "
        "information about the people we supply with water and wastewater "
        "services, and what choices you have.",
    ),
    ("h2", "1. Who we are"),
    (
        "p",
        "Coldmere Valley Water Authority is the controller of the personal "
        "information described in this notice. Our registered office is "
        "Levenside House, 14 Mill Lane, Coldmere. Our Data Protection Officer "
        "can be contacted at dpo@coldmere-water.example or by writing to the "
        "Data Protection Officer at the same address.",
    ),
    ("h2", "2. The information we collect"),
    (
        "p",
        "We collect information that you give us and information that we "
        "create while providing our services. This includes:",
    ),
    (
        "bullets",
        [
            "your name, postal address, telephone numbers and email address;",
            "your account number, billing history, payment method and bank details if you pay by Direct Debit;",
            "meter readings and the amount of water used at your property;",
            "recordings of telephone calls to our Customer Contact Centre;",
            "details of any additional needs you tell us about so that we can "
            "support you, for example if you rely on water for a medical "
            "condition, have limited mobility or need information in another "
            "format;",
            "images from CCTV cameras at our treatment works, depots and Levenside House reception;",
            "information from credit reference agencies when you open an account.",
        ],
    ),
    ("h2", "3. How we use your information"),
    (
        "p",
        "We use personal information to supply water and remove wastewater, "
        "to bill you and collect payment, to read and maintain meters, to "
        "contact you about planned work and emergencies, to deal with "
        "enquiries and complaints, to offer help if you are struggling to "
        "pay, and to prevent and detect fraud. We also use anonymised and "
        "aggregated data to plan our network and reduce leakage.",
    ),
    (
        "p",
        "We may invite you to take part in customer surveys. You can ask us "
        "not to contact you for surveys at any time and this will not "
        "affect your service.",
    ),
    ("h2", "4. Our legal basis"),
    (
        "p",
        "Most of our processing is necessary to carry out our statutory "
        "duties as a water undertaker or to perform our contract with you. "
        "We rely on your explicit consent to hold health information on the "
        "Priority Services Register, and you can withdraw that consent at "
        "any time. We use legitimate interests for fraud prevention, CCTV "
        "and improving our services.",
    ),
    ("h2", "5. Who we share it with"),
    ("p", "We never sell personal information. We share it only where necessary with:"),
    (
        "bullets",
        [
            "contractors who carry out work at your property or on our behalf, "
            "such as meter installers and printers, under written contracts;",
            "credit reference agencies and our debt collection partner, "
            "Brookvale Collections Ltd, if an account falls into arrears;",
            "your local electricity and gas network operators, with your consent, "
            "so that your Priority Services Register details are shared across "
            "utilities;",
            "regulators, the police and other public bodies where the law requires or allows it.",
        ],
    ),
    ("h2", "6. How long we keep it"),
    (
        "table",
        ["Information", "How long we keep it"],
        [
            ["Customer account and billing records", "6 years after the account is closed"],
            ["Recordings of telephone calls", "90 days, or 12 months if linked to a complaint"],
            ["CCTV images", "31 days unless needed for an investigation"],
            ["Priority Services Register details", "Until you ask us to remove them, or 2 years after you leave"],
            ["Survey responses", "2 years"],
        ],
    ),
    ("h2", "7. Your rights"),
    ("p", "Data protection law gives you the following rights. You can ask us:"),
    (
        "bullets",
        [
            "for a copy of the personal information we hold about you and details "
            "of how we use it (the right of access);",
            "to correct information that is wrong or incomplete;",
            "to delete information where we no longer have a reason to keep it;",
            "to restrict or object to how we use your information, including for surveys and marketing;",
            "to give you information you provided in a machine-readable format.",
        ],
    ),
    (
        "p",
        "Some rights do not apply in every case. For example, we cannot "
        "delete your account details while you are still receiving a "
        "supply, because we have a legal duty to bill for it.",
    ),
    ("h2", "8. How to make a request"),
    (
        "p",
        "Use the form on our website, email dpo@coldmere-water.example or "
        "write to the Data Protection Officer. We may ask for proof of "
        "identity before releasing information. We will respond within one "
        "month, and there is normally no charge. If your request is complex "
        "we may extend this by up to two further months and will tell you "
        "why within the first month.",
    ),
    ("h2", "9. Complaints"),
    (
        "p",
        "If you are unhappy with how we have handled your information, "
        "please contact our Data Protection Officer first. You also have "
        "the right to complain to the Information Commissioner's Office.",
    ),
    ("h2", "10. Changes to this notice"),
    (
        "p",
        "We review this notice every year and whenever we change how we use "
        "personal information. The latest version is always on our website "
        "and printed copies are available from our Customer Contact Centre "
        "on 01632 960100.",
    ),
]

BOARD_MINUTES = [
    ("h1", "Minutes of the Board Meeting - 27 March 2025"),
    (
        "p",
        "RESTRICTED - CONFIDENTIAL BOARD BUSINESS. Part B minutes, not for "
        "publication under the publication scheme. Held at Levenside House, "
        "14:00 to 17:10.",
    ),
    ("h2", "Present"),
    (
        "p",
        "Alistair Penrose-Mbeki (Chair); Marguerite Oyelaran (Chief "
        "Executive); Callum Stroud (Director of Finance); Dr Yasmin "
        "Fairholme; Henrik Dalgaard; Joanna Trelawney; Sunil Varadarajan; "
        "Beatrix Holmcroft. In attendance: Priya Venkataraman (Company "
        "Secretary, minutes); Ruairi Gallacher, Carrow Whitlock LLP (item "
        "4 only).",
    ),
    ("h2", "1. Apologies and declarations of interest"),
    (
        "p",
        "Apologies were received from Rev. Thomas Ashdown. Henrik Dalgaard "
        "declared that a former colleague is a minority shareholder in "
        "Fellside Aqua Services Ltd; the Board agreed that this was not a "
        "material interest and that he could take part in item 4.",
    ),
    ("h2", "2. Minutes of the previous meeting"),
    ("p", "The Part B minutes of the meeting held on 30 January 2025 were approved as a correct record."),
    ("h2", "3. Project Heronsgate briefing"),
    (
        "p",
        "The Director of Finance gave a confidential briefing on the "
        "proposed consolidation of two depots. The Board noted the "
        "proposal and asked for a full paper, including the equality "
        "impact assessment, before consultation begins. No decision was "
        "required.",
    ),
    ("h2", "4. Project Bittern - proposed acquisition of Fellside Aqua Services Ltd"),
    ("h3", "4.1 Background"),
    (
        "p",
        "The Chief Executive introduced the paper. Fellside Aqua Services "
        "Ltd is a privately owned company based in Kirkby Fellside that "
        "provides accredited water testing, meter installation and "
        "backflow prevention surveys to water companies and large "
        "businesses in the north of the region. It employs 38 people and "
        "reported revenue of £6.2 million and operating profit of £910,000 "
        "in the year to 31 December 2024. Acquiring the company would bring "
        "its laboratory and meter teams in-house, reduce the Authority's "
        "outsourced testing costs by an estimated £640,000 a year, and "
        "provide capacity for the new metering programme.",
    ),
    ("h3", "4.2 Due diligence findings"),
    (
        "p",
        "Ruairi Gallacher of Carrow Whitlock LLP presented the findings of "
        "financial and legal due diligence. The main issues were:",
    ),
    (
        "bullets",
        [
            "a defined benefit pension scheme with a deficit of about £740,000 on the buyer's valuation basis;",
            "an employment tribunal claim by a former laboratory manager, "
            "with a maximum exposure estimated at £120,000;",
            "laboratory accreditation due for renewal in August 2025, with two minor non-conformities still open;",
            "customer concentration: 41% of revenue comes from a single "
            "neighbouring water company, whose contract can be ended on a "
            "change of control.",
        ],
    ),
    (
        "p",
        "Mr Gallacher advised that the pension deficit and tribunal claim "
        "should be covered by a price adjustment and a specific indemnity "
        "rather than a general warranty.",
    ),
    ("h3", "4.3 Price and funding"),
    (
        "p",
        "The sellers have indicated that they would accept an enterprise "
        "value of £14.6 million on a cash-free, debt-free basis. The "
        "Director of Finance proposed funding the purchase from £9.1 "
        "million of reserves and a 20-year fixed-rate loan of £5.5 million. "
        "Dr Fairholme questioned whether the reserves could still cover "
        "the drought resilience programme; the Director of Finance "
        "confirmed that minimum reserves of £12 million would be "
        "maintained.",
    ),
    ("h3", "4.4 Resolution"),
    (
        "p",
        "The Board resolved to: (a) authorise the Chief Executive to submit "
        "a non-binding offer at an enterprise value of up to £15.2 million, "
        "subject to the adjustments described above; (b) agree a period of "
        "exclusivity with the sellers until 30 June 2025; (c) delegate "
        "approval of the final sale and purchase agreement to a committee "
        "of the Chair, the Chief Executive and Joanna Trelawney, with a "
        "target completion date of 30 September 2025. Sunil Varadarajan "
        "asked that his opposition to the funding structure be recorded.",
    ),
    ("h3", "4.5 Confidentiality"),
    (
        "p",
        "The Company Secretary reminded members that Project Bittern is "
        "subject to a non-disclosure agreement and that an insider list is "
        "being maintained. The 38 Fellside employees would transfer to the "
        "Authority under TUPE on completion; they are not yet aware of the "
        "approach and no contact may be made with them.",
    ),
    ("h2", "5. Chief Executive's confidential update"),
    (
        "p",
        "The Chief Executive reported that the drinking water regulator "
        "had requested further information following the precautionary "
        "notice considered on 12 March. A full report would be brought to "
        "the May meeting.",
    ),
    ("h2", "6. Actions"),
    (
        "table",
        ["No.", "Action", "Owner", "Due"],
        [
            ["B25-07", "Submit non-binding offer for Fellside Aqua Services Ltd", "Chief Executive", "4 April 2025"],
            [
                "B25-08",
                "Agree pension indemnity wording with Carrow Whitlock LLP",
                "Director of Finance",
                "30 April 2025",
            ],
            ["B25-09", "Full Heronsgate paper with equality impact assessment", "Director of Finance", "22 May 2025"],
            ["B25-10", "Update insider list for Project Bittern", "Company Secretary", "Ongoing"],
        ],
        (14, 52, 22, 18),
    ),
    ("h2", "7. Date of next meeting"),
    ("p", "Thursday 22 May 2025 at 14:00, Levenside House."),
]

ONBOARDING_GUIDE = [
    ("h1", "New Starter Induction Guide"),
    (
        "p",
        "Welcome to Coldmere Valley Water Authority. This guide explains "
        "what to expect from the moment you accept our offer until the end "
        "of your probation. Keep it to hand, and ask your buddy or your "
        "line manager if anything is unclear.",
    ),
    ("h2", "Before you join"),
    (
        "p",
        "Once you have accepted your offer, the Recruitment Team will send "
        "your contract and ask you to complete your pre-employment checks "
        "online. These include two references, a basic criminal record "
        "check and, for roles that involve work on drinking water assets, "
        "a health questionnaire. You cannot start until all checks are "
        "complete, and the Recruitment Team will confirm your start date "
        "in writing.",
    ),
    ("h2", "When you arrive"),
    (
        "p",
        "Office-based colleagues should come to the Reception desk at "
        "Levenside House at 09:00. Operational colleagues should report to "
        "their depot supervisor at 07:30. Please bring with you:",
    ),
    (
        "bullets",
        [
            "your passport, or another original document that proves your right "
            "to work in the UK, if it was not checked at interview;",
            "your P45 from your previous employer, or a completed starter checklist if you do not have one;",
            "your bank account details for salary payments;",
            "your full driving licence, if your role involves driving;",
            "the name and phone number of a person we should contact in an emergency.",
        ],
    ),
    (
        "p",
        "Reception will take your photograph for your building pass and "
        "introduce you to your buddy, an experienced colleague from "
        "another team who will help you find your way around for your "
        "first few months. You will also be given a locker and, for "
        "operational roles, your personal protective equipment.",
    ),
    ("h2", "Your induction week"),
    (
        "p",
        "Every new colleague follows a structured programme in their "
        "opening week. Your manager will adjust it to your role.",
    ),
    (
        "table",
        ["Day", "Morning", "Afternoon"],
        [
            [
                "Day 1",
                "Welcome from your manager, building tour, IT set-up",
                "Meet your team and buddy; health and safety briefing",
            ],
            [
                "Day 2",
                "Corporate induction with the Chief Executive (monthly, Levenside House)",
                "Information security and data protection e-learning",
            ],
            ["Day 3", "Visit to Rookwood treatment works and the control room", "Shadowing a colleague in your team"],
            ["Day 4", "Role-specific training", "Code of conduct and customer care e-learning"],
            ["Day 5", "Agree your probation objectives with your manager", "Review of the week with your buddy"],
        ],
    ),
    ("h2", "Mandatory training"),
    (
        "p",
        "The following courses in the Learning Hub must be completed within "
        "30 days of joining, and information security must be repeated "
        "every year:",
    ),
    (
        "bullets",
        [
            "Information security and phishing awareness",
            "Data protection essentials",
            "Health and safety at work",
            "Supporting customers in vulnerable circumstances",
            "Employee code of conduct",
        ],
    ),
    (
        "p",
        "Colleagues who will work on pipes, reservoirs or treatment plant "
        "that carry drinking water must also hold a Water Hygiene "
        "Certificate before starting that work. The one-day course is "
        "booked by your manager.",
    ),
    ("h2", "Probation"),
    (
        "p",
        "All new employees serve a probation period of six months. Your "
        "manager will hold formal reviews at the end of your first, third "
        "and fifth months, and will confirm in writing before the end of "
        "the sixth month whether your appointment is confirmed. If more "
        "time is needed, probation may be extended once by up to three "
        "months, with clear objectives. Support is always offered before "
        "any decision not to confirm an appointment.",
    ),
    ("h2", "IT equipment and accounts"),
    (
        "p",
        "Your laptop and phone are prepared before you arrive and handed "
        "to you by the IT Service Desk on the ground floor. You will set a "
        "new password and register the Authenticator app for "
        "multi-factor sign-in before leaving the desk. PeopleHub is where "
        "you will book leave, submit expenses and view payslips.",
    ),
    ("h2", "Getting to Levenside House"),
    (
        "p",
        "Parking at Levenside House is limited. Spaces are allocated by "
        "Facilities, with priority for Blue Badge holders and car sharers. "
        "Secure cycle storage, showers and lockers are on the lower ground "
        "floor. Bus routes 14 and 22 stop on Mill Lane, and Coldmere "
        "station is a ten-minute walk away.",
    ),
    ("h2", "Who to contact"),
    (
        "table",
        ["Question about", "Contact"],
        [
            ["Contract, pay or pre-employment checks", "Recruitment Team, extension 4120"],
            ["Your laptop, phone or passwords", "IT Service Desk, extension 4400"],
            ["Building pass or parking", "Facilities, extension 4300"],
            ["Anything else", "Your line manager or buddy"],
        ],
    ),
]

VULNERABILITY_REGISTER = [
    ("h1", "Security Vulnerability Register - Quarter 1 2025"),
    (
        "p",
        "RESTRICTED. Cyber Security team, Operational Technology team and "
        "the Audit and Risk Committee only. This register lists known "
        "weaknesses in Authority systems that have not yet been fixed. "
        "Disclosure would help an attacker and could put water supply at "
        "risk.",
    ),
    ("h2", "Summary"),
    (
        "p",
        "At 31 March 2025 the register held 23 open findings: 2 critical, "
        "8 high, 8 medium and 5 low. The February 2025 penetration test by "
        "Stannary Security Ltd added 8 findings. Three findings are past "
        "their target date and are reported to the Audit and Risk "
        "Committee by exception.",
    ),
    ("h2", "Open critical and high findings"),
    (
        "table",
        ["Ref", "System", "Finding", "Severity", "Owner", "Target"],
        [
            [
                "VR-25-004",
                "Tarnside booster station HMI",
                "Unsupported operating system; vendor remote support modem (Quillon RTX-400) "
                "reachable from the internet",
                "Critical",
                "Leif Marchbank",
                "30 April 2025",
            ],
            [
                "VR-25-006",
                "Hollins Beck treatment works PLCs",
                "Firmware four versions behind; engineering workstation shares credentials with the corporate domain",
                "Critical",
                "Leif Marchbank",
                "31 May 2025",
            ],
            [
                "VR-25-007",
                "Telemetry outstations",
                "Around 340 outstations still accept the factory maintenance PIN 4417",
                "High",
                "Platform Engineering Lead",
                "30 June 2025",
            ],
            [
                "VR-25-011",
                "Legacy billing server GRANITE",
                "Operating system unpatched since 2021; cannot be patched without vendor support",
                "High",
                "Head of Customer Systems",
                "Accepted until Project Osprey Ledger go-live",
            ],
            [
                "VR-25-013",
                "Depot workstations",
                "Same local administrator password on 212 depot workstations",
                "High",
                "Head of IT Operations",
                "15 May 2025",
            ],
            [
                "VR-25-015",
                "Telemetry deployment runbook",
                "Break-glass database password, archive keys and SSH key stored in plain text "
                "in the runbook (OPS-4471)",
                "High",
                "Platform Engineering Lead",
                "30 April 2025",
            ],
            [
                "VR-25-018",
                "Oxley backup vault",
                "Billing database restore took 31 hours in Exercise Stormcrow against a 12 hour target",
                "High",
                "Head of IT Operations",
                "30 September 2025",
            ],
            [
                "VR-25-020",
                "Customer portal",
                "Password reset page reveals whether an email address is registered",
                "High",
                "Head of Customer Systems",
                "30 April 2025",
            ],
            [
                "VR-25-021",
                "Out-of-band contact list",
                "6 of 19 incident team mobile numbers out of date",
                "High",
                "Head of Cyber Security",
                "Closed 10 March 2025, awaiting verification",
            ],
        ],
    ),
    ("h2", "Accepted risks"),
    (
        "p",
        "VR-25-011 has been formally accepted by the Director of Finance "
        "until the replacement billing system under Project Osprey Ledger "
        "goes live, currently planned for November 2025. Compensating "
        "controls are in place: GRANITE has been moved to an isolated "
        "network segment, only four named administrators can reach it, "
        "and all sessions are recorded.",
    ),
    ("h2", "Remediation notes"),
    ("h3", "VR-25-004 Tarnside booster station"),
    (
        "p",
        "Stannary Security Ltd reached the Quillon RTX-400 modem login page "
        "from the internet during the penetration test and were able to "
        "view the HMI in read-only mode using the default vendor account. "
        "As an interim measure the modem is now powered off except during "
        "booked vendor sessions, and the Operational Technology team has "
        "ordered a replacement HMI with a supported operating system. "
        "Until the replacement is installed, the site is checked daily by "
        "the control room.",
    ),
    ("h3", "VR-25-007 Outstation maintenance PIN"),
    (
        "p",
        "The PIN can only be changed on site, so it is being changed during "
        "routine maintenance visits. 810 of the 1,150 outstations have been "
        "updated. The remaining visits are scheduled by region, with the "
        "Tarnside and Hollins Beck catchments first.",
    ),
    ("h3", "VR-25-015 Credentials in the deployment runbook"),
    (
        "p",
        "The runbook still contains break-glass credentials pending the "
        "vault migration. Until they are removed and rotated, access to the "
        "engineering folder is limited to the Platform Engineering team and "
        "every read of the file is logged.",
    ),
    ("h2", "Review"),
    (
        "p",
        "The register is reviewed every fortnight by the Head of Cyber "
        "Security and the Operational Technology lead, and every quarter "
        "by the Audit and Risk Committee in private session.",
    ),
]


# ---------------------------------------------------------------------------
# PDF
# ---------------------------------------------------------------------------


class _PolicyPDF(FPDF):
    def __init__(self, header_text: str) -> None:
        super().__init__(format="A4")
        self.header_text = header_text

    def header(self) -> None:
        self.set_font("Helvetica", "", 8)
        self.set_text_color(90, 90, 90)
        self.cell(0, 5, self.header_text, align="R")
        self.ln(9)
        self.set_text_color(0, 0, 0)

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("Helvetica", "", 8)
        self.set_text_color(90, 90, 90)
        self.cell(0, 5, f"Page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0, 0, 0)


def build_pdf(blocks: list, path: Path, title: str, header_text: str) -> None:
    pdf = _PolicyPDF(header_text)
    pdf.set_title(title)
    pdf.set_author(ORG)
    pdf.set_creator(ORG)
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_margins(22, 20, 22)
    pdf.set_auto_page_break(True, margin=22)
    pdf.add_page()
    for block in blocks:
        kind = block[0]
        if kind == "h1":
            pdf.set_font("Helvetica", "B", 17)
            pdf.multi_cell(0, 9, block[1], new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
        elif kind == "h2":
            pdf.ln(3)
            pdf.set_font("Helvetica", "B", 13)
            pdf.multi_cell(0, 7, block[1], new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif kind == "h3":
            pdf.ln(1)
            pdf.set_font("Helvetica", "B", 11)
            pdf.multi_cell(0, 6, block[1], new_x="LMARGIN", new_y="NEXT")
        elif kind == "p":
            pdf.set_font("Helvetica", "", 11)
            pdf.multi_cell(0, 6, block[1], new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        elif kind == "bullets":
            pdf.set_font("Helvetica", "", 11)
            for item in block[1]:
                pdf.set_x(pdf.l_margin + 4)
                pdf.multi_cell(0, 6, "- " + item, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        elif kind == "table":
            header, rows = block[1], block[2]
            widths = block[3] if len(block) > 3 else None
            pdf.set_font("Helvetica", "", 10)
            with pdf.table(line_height=5.5, text_align="LEFT", col_widths=widths, first_row_as_headings=True) as table:
                for cells in [header, *rows]:
                    row = table.row()
                    for cell in cells:
                        row.cell(cell)
            pdf.ln(3)
        else:
            raise ValueError(kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))


# ---------------------------------------------------------------------------
# DOCX
# ---------------------------------------------------------------------------


def _mark_header_row(row) -> None:
    tr_pr = row._tr.get_or_add_trPr()
    el = OxmlElement("w:tblHeader")
    el.set(qn("w:val"), "true")
    tr_pr.append(el)


def build_docx(blocks: list, path: Path, title: str, subject: str) -> None:
    doc = Document()
    style = doc.styles["Normal"]
    style.font.name = "Calibri"
    style.font.size = Pt(11)
    props = doc.core_properties
    props.title = title
    props.subject = subject
    props.comments = subject
    props.author = ORG
    props.last_modified_by = ORG
    props.created = FIXED_DATE.replace(tzinfo=None)
    props.modified = FIXED_DATE.replace(tzinfo=None)
    props.revision = 1
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            doc.add_heading(block[1], level=int(kind[1]))
        elif kind == "p":
            doc.add_paragraph(block[1])
        elif kind == "bullets":
            for item in block[1]:
                doc.add_paragraph(item, style="List Bullet")
        elif kind == "table":
            header, rows = block[1], block[2]
            table = doc.add_table(rows=1, cols=len(header))
            table.style = "Table Grid"
            for cell, text in zip(table.rows[0].cells, header, strict=True):
                cell.text = ""
                run = cell.paragraphs[0].add_run(text)
                run.bold = True
            _mark_header_row(table.rows[0])
            for values in rows:
                cells = table.add_row().cells
                for cell, text in zip(cells, values, strict=True):
                    cell.text = text
            doc.add_paragraph()
        else:
            raise ValueError(kind)
    buffer = io.BytesIO()
    doc.save(buffer)
    _write_zip_with_fixed_times(buffer.getvalue(), path)


def _write_zip_with_fixed_times(data: bytes, path: Path) -> None:
    """Rewrite the DOCX archive so entry timestamps do not change per run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(2025, 3, 31, 9, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = info.external_attr
            dst.writestr(fixed, src.read(info.filename))


def main() -> None:
    build_pdf(
        PRIVACY_NOTICE,
        CORPUS / "public" / "customer-privacy-notice.pdf",
        title="Customer Privacy Notice",
        header_text=f"{ORG} - Customer Privacy Notice - Public",
    )
    build_pdf(
        BOARD_MINUTES,
        CORPUS / "restricted" / "board" / "board-minutes-2025-03-27.pdf",
        title="Minutes of the Board Meeting - 27 March 2025 (Part B)",
        header_text=f"{ORG} - Board minutes Part B - RESTRICTED",
    )
    build_docx(
        ONBOARDING_GUIDE,
        CORPUS / "internal" / "hr" / "onboarding-guide.docx",
        title="New Starter Induction Guide",
        subject="Induction information for new employees",
    )
    build_docx(
        VULNERABILITY_REGISTER,
        CORPUS / "restricted" / "security" / "vulnerability-register.docx",
        title="Security Vulnerability Register - Quarter 1 2025",
        subject="Open security findings and remediation status",
    )
    for rel in (
        "public/customer-privacy-notice.pdf",
        "restricted/board/board-minutes-2025-03-27.pdf",
        "internal/hr/onboarding-guide.docx",
        "restricted/security/vulnerability-register.docx",
    ):
        print("wrote", CORPUS / rel)


if __name__ == "__main__":
    main()
