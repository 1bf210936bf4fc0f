"""The mbox index (atoll/formats/mail/index.py) of files read from disk and from bytes."""

from pathlib import Path

from atoll.formats.mail.index import build_index, read_index


def test_a_file_with_no_from_line_is_one_problem_read_from_disk_as_from_bytes(tmp_path: Path):
    # build_index maps the file (mmap): its text before the first "From " line is the whole map.
    path = tmp_path / "notes.mbox"
    path.write_bytes(b"Subject: not an mbox\n\nno separator line at all\n")
    mapped = build_index(path.open("rb"), path, "notes.mbox")
    read = read_index(path.read_bytes(), "notes.mbox")
    assert mapped.entries == read.entries == []
    assert [p.description for p in mapped.problems] == [p.description for p in read.problems]
    assert [p.description for p in mapped.problems] == ["text before the first 'From ' line ignored"]
