"""Filesystem and mail tools against the two sample worlds (generated once), both modes."""

from __future__ import annotations

import email
import mailbox
import shutil
import tempfile
import zipfile
from email.policy import default as default_policy
from pathlib import Path

import pytest

from tests.mcp_servers.helpers import World, open_session
from tests.shared_sample import fresh_sample_benchmark

pytestmark = pytest.mark.slow

MODES = ["individual", "consolidated"]


@pytest.fixture(scope="module")
def sample_worlds():
    scratch = Path(tempfile.mkdtemp(prefix="atoll-mcp-sample-"))
    try:
        bench = fresh_sample_benchmark(scratch / "bench")
        import json

        users = {w["world_id"]: w for w in json.loads((bench / "world_descriptions.json").read_text())}
        worlds = {}
        for archive in sorted((bench / "world_files_zipped").glob("*.zip")):
            base = scratch / archive.stem
            with zipfile.ZipFile(archive) as bundle:
                bundle.extractall(base)
            worlds[archive.stem] = (
                World(base=base, fs_root=base / "filesystem", apps_root=base / ".apps_data"),
                {
                    "user_email": users[archive.stem].get("user_email"),
                    "user_name": users[archive.stem].get("user_name"),
                },
            )
        yield worlds
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_filesystem_tools_on_sample_worlds(sample_worlds, mode):
    for world, options in sample_worlds.values():
        files = sorted(p for p in world.fs_root.rglob("*") if p.is_file())
        assert files, "sample world has files"
        with open_session("filesystem", world, mode=mode, options=options) as fs:
            tree = fs.ok("get_directory_tree", {"max_depth": 10})
            assert tree["entries"] == len(list(world.fs_root.rglob("*")))
            found = fs.ok("search_files", {"pattern": "*", "max_results": 1000})
            listed_files = sorted(m["path"] for m in found["matches"] if m["type"] == "file")
            assert listed_files == sorted("/" + p.relative_to(world.fs_root).as_posix() for p in files)
            for path in files:
                virtual = "/" + path.relative_to(world.fs_root).as_posix()
                meta = fs.ok("get_file_metadata", {"file_path": virtual})
                assert meta["size"] == path.stat().st_size
                if path.suffix.lower() in (".txt", ".csv", ".md", ".json"):
                    read = fs.ok("read_text_file", {"file_path": virtual, "max_bytes": 1_000_000})
                    assert read["content"] == path.read_text(encoding="utf-8-sig")
                elif path.suffix.lower() in (".png", ".jpg", ".jpeg"):
                    assert fs.ok("read_image_file", {"file_path": virtual})["size"] == path.stat().st_size
            for folder in {p.parent for p in files}:
                virtual = "/" + folder.relative_to(world.fs_root).as_posix()
                listing = fs.ok("list_files", {"path": virtual, "limit": 1000})
                assert sorted(e["name"] for e in listing["entries"]) == sorted(
                    p.name for p in folder.iterdir()
                )


@pytest.mark.parametrize("mode", MODES)
def test_mail_tools_on_sample_worlds(sample_worlds, mode):
    for world, options in sample_worlds.values():
        boxes = sorted((world.apps_root / "mail").rglob("*.mbox"))
        expected = []
        for path in boxes:
            box = mailbox.mbox(
                path, factory=lambda f: email.message_from_binary_file(f, policy=default_policy)
            )
            expected += [m for m in box]
            box.close()
        with open_session("mail", world, mode=mode, options=options) as mail:
            listing = mail.ok("list_mails", {"limit": 100})
            assert listing["total"] == len(expected) and "notices" not in listing
            by_id = {m["Message-ID"].strip("<>"): m for m in expected}
            for item in listing["mails"]:
                read = mail.ok("read_mail", {"mail_id": item["mail_id"]})
                original = by_id[item["mail_id"].strip("<>")]
                assert read["subject"] == str(original["Subject"])
                attachments = [p.get_filename() for p in original.iter_attachments()]
                assert [a["filename"] for a in read["attachments"]] == attachments
            first = listing["mails"][0]
            word = first["subject"].split()[-1]
            assert first["mail_id"] in [
                m["mail_id"] for m in mail.ok("search_mail", {"subject": word})["mails"]
            ]
            sent = mail.ok("reply_all_mail", {"original_mail_id": first["mail_id"], "body": "Noted, thanks."})
            assert options["user_email"].lower() not in str(sent["to"] + sent["cc"]).lower()
            assert mail.ok("list_mails", {"limit": 1})["mails"][0]["mail_id"] == sent["mail_id"]
