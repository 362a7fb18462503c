"""Reads Warrant's artifacts with the reference readers and checks their provenance with an
independent DSSE implementation, given only the public key.

usage: artifacts_check.py DIR PUBKEY_HEX KID

DIR holds brief.docx, sales.xlsx, deck.pptx and report.html (as the CLI test's transcript makes
them), each with NAME.intoto.jsonl beside it. Prints one JSON document of what was read; exits 1
with the reason when anything differs.
"""

import base64
import hashlib
import json
import sys
from pathlib import Path

import docx
import openpyxl
import pptx
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey


def fail(why):
    print(json.dumps({"ok": False, "error": why}))
    sys.exit(1)


def expect(got, want, what):
    if got != want:
        fail(f"{what}: got {got!r}, want {want!r}")


def read_docx(path):
    d = docx.Document(path)
    paras = [(p.style.name if p.style else None, p.text) for p in d.paragraphs if p.text]
    bold = [r.text for p in d.paragraphs for r in p.runs if r.bold]
    italic = [r.text for p in d.paragraphs for r in p.runs if r.italic]
    tables = [[[c.text for c in row.cells] for row in t.rows] for t in d.tables]
    page_breaks = sum(
        1 for p in d.paragraphs for r in p.runs if 'w:br w:type="page"' in r._r.xml
    )
    return {
        "paragraphs": paras,
        "bold": bold,
        "italic": italic,
        "tables": tables,
        "page_breaks": page_breaks,
    }


def read_xlsx(path):
    wb = openpyxl.load_workbook(path)
    ws = wb["Sales"]
    rows = [[c.value for c in row] for row in ws.iter_rows()]
    return {
        "sheets": wb.sheetnames,
        "rows": rows,
        "header_bold": [c.font.bold for c in ws[1]],
        "widths": [ws.column_dimensions[c].width for c in "ABCD"],
        "freeze": ws.freeze_panes,
    }


def read_pptx(path):
    p = pptx.Presentation(path)
    slides = []
    for s in p.slides:
        texts = [
            sh.text_frame.text
            for sh in s.shapes
            if sh.has_text_frame and sh != s.shapes.title
        ]
        tables = [
            [[c.text for c in row.cells] for row in sh.table.rows]
            for sh in s.shapes
            if sh.has_table
        ]
        notes = s.notes_slide.notes_text_frame.text if s.has_notes_slide else None
        slides.append(
            {"title": s.shapes.title.text, "texts": texts, "tables": tables, "notes": notes}
        )
    return slides


def check_envelope(artifact, key):
    side = Path(str(artifact) + ".intoto.jsonl")
    line = side.read_text().strip().splitlines()[-1]
    env = Envelope.from_dict(json.loads(line))
    verified = env.verify([key], 1)
    if key.keyid not in verified:
        fail(f"{side}: not verified by {key.keyid}")
    statement = json.loads(env.payload)
    expect(statement["_type"], "https://in-toto.io/Statement/v1", "statement type")
    digest = hashlib.sha256(artifact.read_bytes()).hexdigest()
    expect(statement["subject"][0]["digest"]["sha256"], digest, f"{artifact.name} digest")
    # One byte of the payload changed: the same verifier refuses it.
    raw = json.loads(line)
    payload = bytearray(base64.b64decode(raw["payload"]))
    payload[10] ^= 0x01
    raw["payload"] = base64.b64encode(bytes(payload)).decode()
    try:
        Envelope.from_dict(raw).verify([key], 1)
    except Exception:  # noqa: BLE001 - any refusal is what we want
        pass
    else:
        fail(f"{side}: a changed payload still verified")
    return {
        "predicateType": statement["predicateType"],
        "tool": statement["predicate"]["tool"],
        "run": statement["predicate"]["run"],
    }


def main():
    root, public_hex, kid = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    key = SSlibKey(kid, "ed25519", "ed25519", {"public": public_hex})
    out = {
        "docx": read_docx(root / "brief.docx"),
        "xlsx": read_xlsx(root / "sales.xlsx"),
        "pptx": read_pptx(root / "deck.pptx"),
        "html": (root / "report.html").read_text(),
        "provenance": {
            name: check_envelope(root / name, key)
            for name in ["brief.docx", "sales.xlsx", "deck.pptx", "report.html"]
        },
    }
    print(json.dumps({"ok": True, "read": out}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
