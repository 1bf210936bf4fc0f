"""benchmarks/apps.py keeps working (tiny sizes; no timing is asserted here)."""

from __future__ import annotations

import mailbox
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_mbox_is_standard(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import apps
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    path = tmp_path / "x.mbox"
    apps.generate_mbox(path, 120)
    box = mailbox.mbox(path)
    assert len(box) == 120 and box[0]["Message-ID"] == "<gen0.7@bench.example>"
    box.close()


def test_mail_section_runs(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import apps
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert apps.main(["--only", "mail", "--mail-messages", "150", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "list_mails(limit=50)" in out and "search_mail(subject=...)" in out
