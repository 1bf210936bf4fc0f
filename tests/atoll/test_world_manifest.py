"""World manifests and deltas: the archive rebuilt from a manifest and blobs is the very
snapshot the environment writes, and manifests/deltas are read as untrusted input."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from atoll.world_deltas import Delta, read_manifest, write_archive, write_delta
from atoll.world_manifest import Entry, ManifestError, WorldManifest
from environment.populate import WorldRoots
from environment.snapshot import write_snapshot
from tests.atoll.world_factories import manifest_of


def _world(tmp_path: Path) -> WorldRoots:
    roots = WorldRoots(tmp_path / "filesystem", tmp_path / ".apps_data")
    (roots.fs_root / "Reports" / "Q1").mkdir(parents=True)
    (roots.fs_root / "Reports" / "Q1" / "deck.pptx").write_bytes(b"\x00pptx" * 3000)
    (roots.fs_root / "Reports" / "a b.txt").write_text("spaces and ünïcode")
    (roots.fs_root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (roots.fs_root / "run.sh").chmod(0o755)
    (roots.fs_root / ("long-" + "x" * 120) / "nested").mkdir(parents=True)  # a PAX long name
    (roots.fs_root / ("long-" + "x" * 120) / "nested" / "file.csv").write_text("a,b\n1,2\n")
    (roots.fs_root / "empty").mkdir()
    (roots.apps_data_root / "mail").mkdir(parents=True)
    (roots.apps_data_root / "mail" / "sent.mbox").write_text("From x\n\nbody\n")
    return roots


def test_an_archive_rebuilt_from_its_manifest_is_the_snapshot_byte_for_byte(tmp_path: Path) -> None:
    sink = io.BytesIO()
    info = write_snapshot(_world(tmp_path), sink)
    manifest, blobs = manifest_of(sink.getvalue())
    assert any(entry.executable for entry in manifest.entries)

    rebuilt = io.BytesIO()
    size, sha256 = write_archive(manifest, lambda entry: io.BytesIO(blobs[entry.sha256]), rebuilt)

    assert (size, sha256) == (info.size_bytes, info.sha256)
    assert rebuilt.getvalue() == sink.getvalue()
    # The digest names the world: it survives a round trip through JSON and moves with any change.
    again = WorldManifest.from_bytes(manifest.to_bytes(), "test")
    assert again.digest() == manifest.digest()
    changed = manifest.model_copy(update={"entries": [*manifest.entries[:-1]]})
    assert changed.digest() != manifest.digest()


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"path": "filesystem/../etc/passwd", "type": "file", "size": 1, "sha256": "0" * 64}, ".."),
        ({"path": "/etc/passwd", "type": "file", "size": 1, "sha256": "0" * 64}, "absolute"),
        ({"path": "elsewhere/x", "type": "file", "size": 1, "sha256": "0" * 64}, "not a member path"),
        ({"path": "filesystem/x", "type": "file", "size": 1, "sha256": "../../x"}, "hex"),
        ({"path": "filesystem/x", "type": "file", "size": 1}, "no sha256"),
        ({"path": "filesystem/x", "type": "file", "size": -1, "sha256": "0" * 64}, "greater than or equal"),
    ],
)
def test_a_manifest_with_a_bad_entry_is_refused_naming_it(entry: dict, problem: str) -> None:
    data = WorldManifest().model_dump_json().replace('"entries":[]', f'"entries":[{_json(entry)}]').encode()
    with pytest.raises(ManifestError) as refused:
        WorldManifest.from_bytes(data, "upload.json")
    assert "upload.json" in refused.value.message and problem in refused.value.message


def _json(entry: dict) -> str:
    import json

    return json.dumps(entry)


def test_entries_out_of_snapshot_order_or_repeated_are_refused() -> None:
    a = Entry(path="filesystem/a", type="dir")
    b = Entry(path="filesystem/b", type="dir")
    for entries in ([b, a], [a, a], [Entry(path=".apps_data", type="dir"), a]):
        with pytest.raises(ManifestError, match="snapshot order"):
            WorldManifest.from_bytes(WorldManifest(entries=entries).to_bytes(), "m")


def test_the_same_manifest_bytes_parse_once_into_manifests_of_their_own() -> None:
    """Parsed once per content: a second read gives an equal manifest that is not the first
    (changing one leaves the other and later reads alone), with the same digest; a bad
    manifest is refused every time."""
    entries = [
        Entry(path="filesystem", type="dir"),
        Entry(path="filesystem/a.txt", type="file", size=1, sha256="1" * 64),
    ]
    data = WorldManifest(entries=entries).to_bytes()
    first = read_manifest(data, "m")
    second = read_manifest(data, "m")
    assert first == second and first is not second and first.entries is not second.entries
    first.entries.append(Entry(path="filesystem/b", type="dir"))
    first.base = "elsewhere.json"
    third = read_manifest(data, "m")
    assert third == second and third.base is None and len(third.entries) == 2
    assert third.digest() == second.digest() == WorldManifest(entries=entries).digest() != first.digest()
    bad = data.replace(b"1" * 64, b"X" * 64)
    for _ in range(2):
        with pytest.raises(ManifestError, match="hex"):
            read_manifest(bad, "m")


def test_a_delta_holds_its_manifest_and_the_blobs_it_was_given(tmp_path: Path) -> None:
    data = b"changed by the agent"
    digest = hashlib.sha256(data).hexdigest()
    manifest = WorldManifest(
        base="../seed.json",
        entries=[
            Entry(path="filesystem", type="dir"),
            Entry(path="filesystem/out.txt", type="file", size=len(data), sha256=digest),
        ],
    )
    path = tmp_path / "after.delta.tar.gz"
    with path.open("wb") as sink:
        write_delta(manifest, [(digest, io.BytesIO(data), len(data))], sink)

    delta = Delta(path)
    assert delta.manifest == manifest and delta.blob_sizes == {digest: len(data)}
    assert delta.read_blobs({digest, "f" * 64}) == {digest: data}


def test_a_delta_whose_blob_lies_about_its_content_is_refused(tmp_path: Path) -> None:
    lie = "a" * 64
    path = tmp_path / "after.delta.tar.gz"
    with path.open("wb") as sink:
        write_delta(WorldManifest(), [(lie, io.BytesIO(b"not that"), 8)], sink)
    with pytest.raises(ManifestError, match="does not hold its content"):
        Delta(path).read_blobs({lie})


def test_a_file_that_is_not_a_delta_is_refused_naming_it(tmp_path: Path) -> None:
    plain = tmp_path / "world.tar.gz"
    with tarfile.open(plain, "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("filesystem/x"), io.BytesIO())
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"\x1f\x8bnot gzip at all")
    for path in (plain, garbage):
        with pytest.raises(ManifestError, match=path.name):
            Delta(path)
