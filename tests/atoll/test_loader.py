import pytest

from atoll.errors import AtollError
from atoll.loader import load_benchmark, load_task, summarize
from tests.atoll.factories import make_task, world_zip_bytes, write_benchmark


def _error(path, **kwargs) -> str:
    with pytest.raises(AtollError) as caught:
        load_benchmark(path, **kwargs)
    assert caught.value.code == "bad_benchmark"
    return caught.value.message


def test_loads_tasks_worlds_and_keeps_unknown_fields(tmp_path):
    task = make_task(gold_response="Fee cap is $250,000", internal_flag=True)
    task["rubric"][0]["weight"] = 2
    root = write_benchmark(tmp_path / "bench", tasks=[task])
    (root / "task_files" / "task-1" / "filesystem").mkdir(parents=True)
    (root / "task_files" / "task-1" / "filesystem" / "brief.txt").write_text("input")

    benchmark = load_benchmark(root, verify_archives=True)

    loaded = benchmark.task("task-1")
    assert loaded.model_extra == {"gold_response": "Fee cap is $250,000", "internal_flag": True}
    assert loaded.rubric[0].model_extra == {"weight": 2}
    assert benchmark.world_archives["world-a"].endswith("world_files_zipped/world-a.zip")
    assert benchmark.task_overlays == {"task-1": str(root / "task_files" / "task-1")}
    # Unknown fields survive a round trip back to JSON.
    assert loaded.model_dump(exclude_none=True)["internal_flag"] is True


def test_summary_counts(tmp_path):
    tasks = [
        make_task("t1", domain="Law"),
        make_task(
            "t2",
            domain="Investment Banking",
            expected_output="make_new_sheet",
            rubric=[
                {"verifier_id": "a", "criteria": "x"},
                {"verifier_id": "b", "criteria": "y"},
                {"verifier_id": "c", "criteria": "z"},
            ],
        ),
    ]
    root = write_benchmark(tmp_path, tasks=tasks)
    summary = summarize(load_benchmark(root))
    assert summary["tasks"] == 2
    assert summary["tasks_per_domain"] == {"Investment Banking": 1, "Law": 1}
    assert summary["expected_outputs"] == {"make_new_sheet": 1, "message_in_console": 1}
    assert summary["criteria_per_task"] == {"total": 4, "mean": 2.0, "min": 1, "max": 3}
    assert summary["worlds"][0] == {
        "world_id": "world-a",
        "world_name": "Alpha matter",
        "tasks": 2,
        "files": 1,
        "app_data_files": 1,
        "skipped_members": 0,
    }


def test_missing_tasks_file(tmp_path):
    root = write_benchmark(tmp_path)
    (root / "tasks_and_rubrics.json").unlink()
    assert "tasks_and_rubrics.json: missing" in _error(root)


def test_invalid_json_names_line(tmp_path):
    root = write_benchmark(tmp_path)
    (root / "world_descriptions.json").write_text('[{"world_id": "world-a",}]')
    message = _error(root)
    assert "world_descriptions.json: invalid JSON at line 1" in message


def test_missing_world_zip(tmp_path):
    root = write_benchmark(tmp_path, zips={})
    assert "world-a.zip: world archive missing" in _error(root)


def test_truncated_world_zip(tmp_path):
    root = write_benchmark(tmp_path, zips={"world-a": world_zip_bytes()[:40]})
    assert "world-a.zip: corrupt zip archive" in _error(root)


def test_crc_corruption_found_when_verifying(tmp_path):
    content = bytearray(world_zip_bytes({"filesystem/a.txt": b"A" * 1000}))
    # Flip a byte inside the stored data (after the 30-byte local header and the name).
    offset = 30 + len("filesystem/a.txt") + 10
    content[offset] ^= 0xFF
    root = write_benchmark(tmp_path, zips={"world-a": bytes(content)})
    load_benchmark(root)  # the quick check reads only the directory
    assert "member 'filesystem/a.txt' is corrupt" in _error(root, verify_archives=True)


def test_task_pointing_at_unknown_world(tmp_path):
    root = write_benchmark(tmp_path, tasks=[make_task(world_id="world-zzz")])
    message = _error(root)
    assert "task 'task-1' points at unknown world 'world-zzz'" in message


def test_duplicate_task_ids(tmp_path):
    root = write_benchmark(tmp_path, tasks=[make_task("t1"), make_task("t1")])
    assert "duplicate task_id 't1' (records 0 and 1)" in _error(root)


def test_duplicate_world_ids(tmp_path):
    worlds = [{"world_id": "world-a"}, {"world_id": "world-a"}]
    root = write_benchmark(tmp_path, worlds=worlds)
    assert "duplicate world_id 'world-a'" in _error(root)


def test_empty_rubric(tmp_path):
    root = write_benchmark(tmp_path, tasks=[make_task(rubric=[])])
    message = _error(root)
    assert "tasks_and_rubrics.json[0] (task_id='task-1')" in message
    assert "rubric is empty" in message


def test_blank_criterion_text(tmp_path):
    root = write_benchmark(tmp_path, tasks=[make_task(rubric=[{"verifier_id": "v", "criteria": "  "}])])
    assert "criterion text is empty" in _error(root)


def test_repeated_verifier_ids(tmp_path):
    rubric = [{"verifier_id": "v", "criteria": "a"}, {"verifier_id": "v", "criteria": "b"}]
    root = write_benchmark(tmp_path, tasks=[make_task(rubric=rubric)])
    assert "repeats verifier_id 'v'" in _error(root)


@pytest.mark.parametrize(
    ("member", "problem"),
    [
        ("filesystem/../../etc/passwd", "contains '..'"),
        ("/etc/passwd", "is an absolute path"),
        ("notes/readme.txt", "is outside filesystem/ and .apps_data/"),
    ],
)
def test_escaping_archive_members(tmp_path, member, problem):
    content = world_zip_bytes({"filesystem/ok.txt": b"ok", member: b"x"})
    root = write_benchmark(tmp_path, zips={"world-a": content})
    message = _error(root)
    assert problem in message
    assert repr(member) in message


def test_symlink_member_rejected(tmp_path):
    content = world_zip_bytes({"filesystem/ok.txt": b"ok"}, symlinks={"filesystem/link": "/etc/passwd"})
    root = write_benchmark(tmp_path, zips={"world-a": content})
    assert "member 'filesystem/link' is a symbolic link" in _error(root)


def test_overlay_symlink_out_rejected(tmp_path):
    root = write_benchmark(tmp_path)
    overlay = root / "task_files" / "task-1" / "filesystem"
    overlay.mkdir(parents=True)
    (overlay / "escape").symlink_to("/etc")
    assert "symlink pointing outside its folder" in _error(root)


def test_not_a_directory(tmp_path):
    assert "not a directory" in _error(tmp_path / "nope")


def test_hf_offline_gives_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    message = _error("hf://example-org/no-such-dataset")
    assert message.startswith("hf://example-org/no-such-dataset: could not find the dataset in the cache")


def test_load_task_finds_a_task_or_names_the_missing_one(tmp_path):
    root = write_benchmark(tmp_path / "bench", tasks=[make_task()])
    assert load_task(root, "task-1").task_id == "task-1"
    with pytest.raises(AtollError, match=r"--task-id 'task-9': no such task in .*bench") as caught:
        load_task(root, "task-9")
    assert caught.value.code == "bad_input"


AGENT_RUN = [
    "agent",
    "run",
    "--output",
    "o.json",
    "--gateway-url",
    "http://127.0.0.1:9/mcp",
    "--model",
    "openai/x",
]
GRADE = ["grade", "--before", "b.tar.gz", "--after", "a.tar.gz", "--output", "g.json"]


@pytest.mark.parametrize("command", [AGENT_RUN, GRADE], ids=["agent run", "grade"])
def test_commands_taking_a_task_id_name_an_unknown_one(tmp_path, command):
    from typer.testing import CliRunner

    from atoll_cli.cli import app

    root = write_benchmark(tmp_path / "bench", tasks=[make_task()])
    result = CliRunner().invoke(app, [*command, "--benchmark", str(root), "--task-id", "task-9"])
    assert isinstance(result.exception, AtollError), result.output
    assert "--task-id 'task-9': no such task" in result.exception.message
