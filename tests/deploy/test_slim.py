"""docker/slim.py, what the images' build stages trim: the pymupdf layout analyzer and what only
it needs go, everything else an image requirement reaches stays, and atoll's PDF handling reads
the same without the analyzer."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from pip._vendor.packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docker"))
import slim  # noqa: E402

INSTALLED = {canonicalize_name(dist.metadata["Name"]): dist for dist in metadata.distributions()}


def _requirements(*extras: str) -> list[str]:
    output = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "requirements.py"), *extras],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return [line for line in output.splitlines() if line]


def test_the_layout_analyzer_and_what_only_it_needs_are_dropped():
    keep = slim.needed(_requirements("grader"), INSTALLED)
    assert {"pymupdf", "numpy", "tabulate", "litellm", "openpyxl"} <= keep  # pymupdf itself needs numpy
    assert not {"onnxruntime", "networkx", "pymupdf-layout", "pymupdf4llm", "flatbuffers"} & keep


def test_everything_else_a_requirement_reaches_is_kept():
    for extras in (["environment"], ["agent"], ["grader"], ["orchestrator", "kubernetes"]):
        roots = _requirements(*extras)
        keep = slim.needed(roots, INSTALLED)
        uncut = slim.needed(roots, INSTALLED, cut=set())
        assert uncut - keep <= {
            "onnxruntime",
            "networkx",
            "pymupdf-layout",
            "pymupdf4llm",
            "flatbuffers",
            "protobuf",
            "coloredlogs",
            "humanfriendly",
            "sympy",
            "mpmath",
        }, extras
        # A root's extras are followed (psycopg[binary] brings psycopg-binary).
        if "orchestrator" in extras:
            assert {"psycopg", "psycopg-binary", "sqlalchemy", "kubernetes"} <= keep


_READ_PDF = """
import hashlib, sys
from pathlib import Path
if sys.argv[1] == "without":
    class NoLayout:
        def find_spec(self, name, path=None, target=None):
            if name == "pymupdf.layout":
                raise ImportError("no layout analyzer in this image")
    sys.meta_path.insert(0, NoLayout())
import pymupdf
from grader.extract import extract
assert ("pymupdf.layout" in sys.modules) == (sys.argv[1] == "with"), "the analyzer was (not) loaded"
document = pymupdf.open(sys.argv[2])
for page in document:
    print(repr(page.get_text("text")), repr(page.get_text("words")), page.get_text("dict")["blocks"][0]["bbox"])
    print(hashlib.sha256(page.get_pixmap(dpi=72).samples).hexdigest())
print(repr(extract("memo.pdf", Path(sys.argv[2]).read_bytes())))
"""


def test_pdfs_read_the_same_without_the_layout_analyzer(tmp_path):
    import pymupdf

    pdf = tmp_path / "memo.pdf"
    document = pymupdf.open()
    for number in range(2):
        page = document.new_page()
        page.insert_text((72, 72), f"Quarterly revenue memo, page {number + 1}", fontsize=14)
        page.insert_text((72, 110), "Revenue grew 12% to $4.2m; EBITDA margin 18%.", fontsize=11)
    document.save(pdf)
    outputs = {}
    for mode in ("with", "without"):
        result = subprocess.run(
            [sys.executable, "-c", _READ_PDF, mode, str(pdf)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        outputs[mode] = result.stdout
    assert "Revenue grew 12%" in outputs["with"]
    assert outputs["with"] == outputs["without"]
