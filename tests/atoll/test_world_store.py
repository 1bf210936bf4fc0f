"""Worlds in an artifact store: blobs stored once by content, manifests and deltas that give back
the very archive the environment writes, and references read as untrusted input."""

from __future__ import annotations

import gzip
import io
import os
import threading
import time
from pathlib import Path

import pytest

from atoll.errors import AtollError
from atoll.world_deltas import write_delta
from atoll.world_manifest import WorldManifest
from atoll.world_store import (
    BlobStore,
    infer_root,
    materialize,
    open_world,
    relative_reference,
    seed_manifest_key,
    store_world,
)
from tests.atoll.world_factories import delta_bytes, make_world, manifest_of, snapshot_bytes, store_seed

SEED_FILES = {
    "filesystem/Reports/q1.txt": "first quarter",
    "filesystem/Reports/deck.pptx": b"\x00pptx" * 4000,
    "filesystem/notes/todo.md": "- call the bank\n",
    ".apps_data/mail/inbox.mbox": "From a@x\n\nhello\n",
}
DELTA_KEY = "exp/task-1/agent/run-0/attempt-1/after.delta.tar.gz"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "artifacts"
    root.mkdir()
    return root


def _blob_files(store: Path) -> list[Path]:
    return sorted(p for p in (store / "blobs").rglob("*") if p.is_file())


def _materialized(uri: str, root: Path) -> bytes:
    sink = io.BytesIO()
    materialize(uri, sink, root=str(root))
    return sink.getvalue()


def test_a_stored_world_materializes_to_the_snapshot_byte_for_byte(tmp_path: Path, store: Path) -> None:
    archive = snapshot_bytes(make_world(tmp_path / "w", SEED_FILES))
    uri, manifest = store_seed(store, "world-a", archive)

    assert uri == f"file://{store}/seeds/world-a.manifest.json"
    stored = WorldManifest.from_bytes((store / "seeds/world-a.manifest.json").read_bytes(), "seed")
    assert stored.blobs == "../blobs/sha256" and stored.digest() == manifest.digest()
    assert _materialized(uri, store) == archive
    # Each blob is the content gzip'd with no name and mtime 0, named by the content's sha256.
    for blob in _blob_files(store):
        assert blob.parent.name == blob.name[:2]
        assert blob.read_bytes()[4:8] == b"\x00\x00\x00\x00"
        assert BlobStore(store).get(blob.name) == gzip.decompress(blob.read_bytes())


def test_blobs_are_written_once_across_worlds_that_share_files(tmp_path: Path, store: Path) -> None:
    first = snapshot_bytes(make_world(tmp_path / "a", SEED_FILES))
    second = snapshot_bytes(
        make_world(tmp_path / "b", {**SEED_FILES, "filesystem/notes/todo.md": "- done\n"})
    )
    blobs = BlobStore(store)
    store_seed(blobs, "a", first)
    assert blobs.written == 4
    store_seed(blobs, "b", second)
    assert blobs.written == 5  # only the changed file is new
    assert len(_blob_files(store)) == 5
    again = BlobStore(store)
    manifest = store / "seeds" / "a.manifest.json"
    stored, old = manifest.read_bytes(), time.time() - 7 * 86400
    os.utime(manifest, (old, old))
    store_seed(again, "a", first)  # idempotent: no blob is written again
    assert again.written == 0 and len(_blob_files(store)) == 5
    # The manifest is written again, unchanged: its time says the seed is in use (world_gc).
    assert manifest.read_bytes() == stored and manifest.stat().st_mtime > old + 86400


def test_a_key_holding_another_world_is_never_replaced(tmp_path: Path, store: Path) -> None:
    store_seed(store, "w", snapshot_bytes(make_world(tmp_path / "a", SEED_FILES)))
    other = snapshot_bytes(make_world(tmp_path / "b", {"filesystem/x.txt": "x"}))
    with pytest.raises(AtollError) as refused:
        store_seed(store, "w", other)
    assert refused.value.code == "world_key_taken" and "w.manifest.json" in refused.value.message


def test_two_threads_storing_the_same_world_both_succeed(tmp_path: Path, store: Path) -> None:
    files = {f"filesystem/f{i}.txt": f"content {i}" * 50 for i in range(40)}
    archive = snapshot_bytes(make_world(tmp_path / "w", files))
    manifest, contents = manifest_of(archive)
    start = threading.Barrier(2)
    uris: list[str] = []
    errors: list[BaseException] = []

    def store_it() -> None:
        start.wait()
        try:
            uris.append(
                store_world(store, seed_manifest_key("w"), manifest, lambda e: io.BytesIO(contents[e.sha256]))
            )
        except BaseException as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=store_it) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors and len(set(uris)) == 1 and len(uris) == 2
    assert not [p for p in store.rglob("*.partial")]
    assert len(_blob_files(store)) == len(contents)
    assert _materialized(uris[0], store) == archive


def test_a_blob_given_with_the_wrong_content_is_not_stored(store: Path) -> None:
    blobs = BlobStore(store)
    with pytest.raises(AtollError) as refused:
        blobs.put("a" * 64, b"not that")
    assert refused.value.code == "blob_corrupt"
    assert not blobs.has("a" * 64) and not _blob_files(store)


def test_a_tampered_blob_is_refused_when_read(tmp_path: Path, store: Path) -> None:
    archive = snapshot_bytes(make_world(tmp_path / "w", SEED_FILES))
    uri, manifest = store_seed(store, "w", archive)
    target = manifest.files()["filesystem/notes/todo.md"].sha256
    assert target is not None
    blob = store / "blobs/sha256" / target[:2] / target
    blob.write_bytes(gzip.compress(b"- transfer everything\n"))

    with pytest.raises(AtollError) as refused:
        _materialized(uri, store)
    assert refused.value.code == "blob_corrupt" and target in refused.value.message
    with open_world(uri, root=str(store)) as world, pytest.raises(AtollError, match="does not match"):
        world.read_blobs({target})


def test_a_delta_materializes_to_the_after_snapshot(tmp_path: Path, store: Path) -> None:
    seed = snapshot_bytes(make_world(tmp_path / "seed", SEED_FILES))
    seed_uri, base = store_seed(store, "w", seed)
    after_files = {**SEED_FILES, "filesystem/notes/todo.md": "- called\n", "filesystem/out/new.csv": "a,b\n"}
    del after_files["filesystem/Reports/q1.txt"]
    after = snapshot_bytes(make_world(tmp_path / "after", after_files))
    delta = store / DELTA_KEY
    delta.parent.mkdir(parents=True)
    delta.write_bytes(delta_bytes(after, base, delta_key=DELTA_KEY, base_key=seed_manifest_key("w")))

    with open_world(str(delta), root=str(store)) as world:
        assert world.manifest is not None and world.delta is not None
        assert len(world.delta.blob_sizes) == 2  # only what the agent wrote travels
        assert world.manifest.base == "../../../../../seeds/w.manifest.json"
    assert _materialized(f"file://{delta}", store) == after
    assert infer_root(delta) == f"file://{store}"


def test_a_delta_whose_base_changed_is_refused(tmp_path: Path, store: Path) -> None:
    seed = snapshot_bytes(make_world(tmp_path / "seed", SEED_FILES))
    _uri, base = store_seed(store, "w", seed)
    delta = store / DELTA_KEY
    delta.parent.mkdir(parents=True)
    delta.write_bytes(
        delta_bytes(seed, base, delta_key=DELTA_KEY, base_key=seed_manifest_key("w"), base_digest="0" * 64)
    )
    with pytest.raises(AtollError) as refused:
        open_world(delta, root=str(store))
    assert refused.value.code == "world_base_mismatch" and "0" * 64 in refused.value.message


@pytest.mark.parametrize(
    "reference",
    [
        "../../../../../../outside/w.manifest.json",  # leaves the store once normalised
        "/etc/seeds/w.manifest.json",  # absolute
        "file:///etc/w.manifest.json",  # a scheme
        "s3://other-bucket/seeds/w.manifest.json",
        "..\\..\\seeds\\w.manifest.json",
    ],
)
def test_a_delta_whose_base_escapes_the_store_is_refused_naming_it(
    tmp_path: Path, store: Path, reference: str
) -> None:
    seed = snapshot_bytes(make_world(tmp_path / "seed", SEED_FILES))
    _uri, base = store_seed(store, "w", seed)
    # The escape would land on a real, valid copy of the seed: only the rule stops it.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.manifest.json").write_bytes((store / "seeds/w.manifest.json").read_bytes())
    delta = store / DELTA_KEY
    delta.parent.mkdir(parents=True)
    delta.write_bytes(
        delta_bytes(seed, base, delta_key=DELTA_KEY, base_key=seed_manifest_key("w"), base_ref=reference)
    )
    with pytest.raises(AtollError) as refused:
        open_world(delta, root=str(store))
    assert refused.value.code == "bad_world_reference" and repr(reference) in refused.value.message


def test_a_manifest_whose_blobs_escape_the_store_is_refused(tmp_path: Path, store: Path) -> None:
    seed = snapshot_bytes(make_world(tmp_path / "seed", SEED_FILES))
    store_seed(store, "w", seed)
    # Another store beside it holds the same blobs: reading them there would succeed.
    (tmp_path / "neighbour").mkdir()
    store_seed(tmp_path / "neighbour", "w", seed)
    path = store / "seeds/w.manifest.json"
    manifest = WorldManifest.from_bytes(path.read_bytes(), "seed")
    path.write_bytes(manifest.model_copy(update={"blobs": "../../neighbour/blobs/sha256"}).to_bytes())
    with pytest.raises(AtollError) as refused:
        _materialized(str(path), store)
    assert refused.value.code == "bad_world_reference" and "neighbour" in refused.value.message
    assert _materialized(str(path), tmp_path) == seed  # the same file with a wider root reads


def test_a_legacy_archive_materializes_as_stored(tmp_path: Path, store: Path) -> None:
    archive = snapshot_bytes(make_world(tmp_path / "w", SEED_FILES))
    (store / "seeds").mkdir()
    (store / "seeds/w.tar.gz").write_bytes(archive)
    with open_world(store / "seeds/w.tar.gz", root=str(store)) as world:
        assert world.manifest is None
    assert _materialized(str(store / "seeds/w.tar.gz"), store) == archive


def test_a_delta_without_manifest_is_refused_naming_it(store: Path) -> None:
    bad = store / "after.delta.tar.gz"
    with bad.open("wb") as sink:
        write_delta(WorldManifest(), [], sink)
    bad.write_bytes(gzip.compress(b"not a tar"))
    with pytest.raises(AtollError, match="after.delta.tar.gz"):
        open_world(bad, root=str(store))


def test_relative_references_name_keys_from_the_referrer() -> None:
    assert relative_reference(DELTA_KEY, "seeds/w.manifest.json") == "../../../../../seeds/w.manifest.json"
    assert relative_reference("seeds/w.manifest.json", "blobs/sha256") == "../blobs/sha256"
