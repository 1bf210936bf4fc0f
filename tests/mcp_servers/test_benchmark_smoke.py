"""benchmarks/apps.py keeps working (tiny sizes; no timing is asserted here)."""

from __future__ import annotations

import mailbox

from tests.benchmark_scripts import load_benchmark


def test_generated_mbox_is_standard(tmp_path):
    apps = load_benchmark("apps")
    path = tmp_path / "x.mbox"
    apps.generate_mbox(path, 120)
    box = mailbox.mbox(path)
    assert len(box) == 120 and box[0]["Message-ID"] == "<gen0.7@bench.example>"
    box.close()


def test_mail_section_runs(tmp_path, capsys):
    apps = load_benchmark("apps")
    assert apps.main(["--only", "mail", "--mail-messages", "150", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "list_mails(limit=50)" in out and "search_mail(subject=...)" in out
