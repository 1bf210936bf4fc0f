"""World storage on S3 (a real SeaweedFS on loopback): blobs written once, a delta downloaded to
a temporary file that goes when the world is closed, and references kept inside the store."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import s3fs

from atoll.errors import AtollError
from atoll.world_store import BlobStore, materialize, open_world, seed_manifest_key
from grader.snapshot import ManifestSnapshot, open_snapshot
from tests.atoll.world_factories import delta_bytes, make_world, snapshot_bytes, store_seed
from tests.environment.seaweed import SeaweedS3

pytestmark = pytest.mark.slow

FILES = {
    "filesystem/Reports/q1.txt": "first quarter",
    "filesystem/data.bin": bytes(range(256)) * 400,
    ".apps_data/mail/inbox.mbox": "From a@x\n\nhello\n",
}
DELTA_KEY = "exp/t/agent/run-0/attempt-1/after.delta.tar.gz"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    with SeaweedS3(tmp_path_factory.mktemp("seaweed")) as server:
        # One bucket for every store: SeaweedFS gives each bucket volumes of its own, and this
        # server has few.
        s3fs.S3FileSystem(**server.storage_options).mkdir("shared")
        yield server


def test_worlds_on_s3_share_blobs_and_read_back_byte_for_byte(s3: SeaweedS3, tmp_path: Path) -> None:
    fs = s3fs.S3FileSystem(**s3.storage_options)
    root = "s3://shared/store"
    seed = snapshot_bytes(make_world(tmp_path / "seed", FILES))
    after = snapshot_bytes(make_world(tmp_path / "after", {**FILES, "filesystem/Reports/q1.txt": "revised"}))

    blobs = BlobStore(root, storage_options=s3.storage_options)
    seed_uri, base = store_seed(blobs, "w", seed)
    store_seed(blobs, "w-again", after)  # shares two of its three files with the seed
    assert blobs.written == 4
    assert len(fs.find("shared/store/blobs")) == 4
    assert seed_uri == "s3://shared/store/seeds/w.manifest.json"
    fs.pipe(
        f"shared/store/{DELTA_KEY}",
        delta_bytes(after, base, delta_key=DELTA_KEY, base_key=seed_manifest_key("w")),
    )
    delta_uri = f"{root}/{DELTA_KEY}"

    for uri, expected in ((seed_uri, seed), (delta_uri, after)):
        sink = io.BytesIO()
        materialize(uri, sink, root=root, storage_options=s3.storage_options)
        assert sink.getvalue() == expected

    with open_world(delta_uri, root=root, storage_options=s3.storage_options) as world:
        downloaded = world.delta.path if world.delta else None
        assert downloaded is not None and downloaded.is_file()
    assert not downloaded.exists()  # the temporary copy went with the world

    snapshot = open_snapshot(delta_uri, root=root, storage_options=s3.storage_options)
    with snapshot:
        assert isinstance(snapshot, ManifestSnapshot)
        assert snapshot.read("filesystem/Reports/q1.txt") == b"revised"


def test_a_reference_out_of_the_store_is_refused(s3: SeaweedS3, tmp_path: Path) -> None:
    fs = s3fs.S3FileSystem(**s3.storage_options)
    seed = snapshot_bytes(make_world(tmp_path / "seed", FILES))
    _uri, base = store_seed(BlobStore("s3://shared/elsewhere", storage_options=s3.storage_options), "w", seed)
    # "../" past the store's root reaches the other store's seed, which is valid and readable.
    fs.pipe(
        f"shared/home/{DELTA_KEY}",
        delta_bytes(
            seed,
            base,
            delta_key=DELTA_KEY,
            base_key=seed_manifest_key("w"),
            base_ref="../../../../../../elsewhere/seeds/w.manifest.json",
        ),
    )
    home = "s3://shared/home"
    with pytest.raises(AtollError) as refused:
        open_world(f"{home}/{DELTA_KEY}", root=home, storage_options=s3.storage_options)
    assert refused.value.code == "bad_world_reference" and "elsewhere" in refused.value.message
    # The same delta read with the bucket as its root is fine: only the root decides.
    with open_world(f"{home}/{DELTA_KEY}", root="s3://shared", storage_options=s3.storage_options) as world:
        assert world.manifest is not None and world.manifest.digest() == base.digest()
