"""The personas format (.apps_data/coworkers/personas.json) and the APEX loader reading it."""

from __future__ import annotations

import json

import pytest

from atoll.coworkers import MAX_PERSONAS_BYTES, Persona, coworker_messages, parse_personas, reply_key
from atoll.errors import AtollError
from atoll.loader import load_benchmark
from tests.atoll.factories import world_zip_bytes, write_benchmark

CLIENT = {
    "name": "Margaret Chen",
    "email": "margaret@client.example",
    "role": "CFO",
    "knows": ["The target is 7.5%."],
    "channels": ["chat", "mail"],
    "reply_delay_s": 5,
}


def _zip_with(personas: bytes) -> bytes:
    return world_zip_bytes(
        {
            "filesystem/a.txt": b"a",
            ".apps_data/coworkers/personas.json": personas,
            ".apps_data/mail/inbox.mbox": b"",
        }
    )


def test_the_loader_lists_a_worlds_personas_without_what_they_know(tmp_path):
    root = write_benchmark(tmp_path / "b", zips={"world-a": _zip_with(json.dumps([CLIENT]).encode())})
    benchmark = load_benchmark(root)
    (summary,) = benchmark.world_personas["world-a"]
    assert (summary.name, summary.email, summary.role, summary.channels) == (
        "Margaret Chen",
        "margaret@client.example",
        "CFO",
        ["chat", "mail"],
    )
    assert "7.5%" not in benchmark.model_dump_json()  # the facts only she holds stay in the world


@pytest.mark.parametrize(
    ("personas", "problem"),
    [
        (b"{", "not valid JSON"),
        (b'{"name": "x"}', "expected a list of personas"),
        (json.dumps([CLIENT | {"email": "not-an-address"}]).encode(), "persona 0"),
        (
            json.dumps([CLIENT, CLIENT | {"name": "Twin"}]).encode(),
            "two personas use margaret@client.example",
        ),
        (json.dumps([CLIENT | {"channels": ["fax"]}]).encode(), "channels"),
        (json.dumps([CLIENT | {"reply_delay_s": -1}]).encode(), "reply_delay_s"),
        (json.dumps([CLIENT | {"secret_key": "x"}]).encode(), "secret_key"),
        (b" " * (MAX_PERSONAS_BYTES + 1), "more than"),
    ],
)
def test_a_bad_personas_file_is_refused_naming_the_file_and_the_problem(tmp_path, personas, problem):
    root = write_benchmark(tmp_path / "b", zips={"world-a": _zip_with(personas)})
    with pytest.raises(AtollError, match="personas.json") as raised:
        load_benchmark(root)
    assert raised.value.code == "bad_benchmark" and problem in raised.value.message


def test_the_prompt_holds_only_this_persona_and_the_conversation():
    client, other = parse_personas(
        json.dumps(
            [CLIENT, {"name": "Tomas Berg", "email": "t@firm.example", "knows": ["TOMAS-ONLY"]}]
        ).encode()
    )
    messages = coworker_messages(client, [("Priya", "What is the target?")])
    text = json.dumps(messages)
    assert "The target is 7.5%." in text and "What is the target?" in text
    assert "TOMAS-ONLY" not in text and "Tomas" not in text


def test_the_reply_key_ignores_nothing_that_changes_the_reply():
    persona = Persona.model_validate(CLIENT)
    base = reply_key(persona, "chat", [("Priya", "hi")], seed=1, model="m")
    assert base == reply_key(persona, "chat", [("Priya", "hi")], seed=1, model="m")
    assert base != reply_key(persona, "chat", [("Priya", "hi")], seed=2, model="m")
    assert base != reply_key(persona, "mail", [("Priya", "hi")], seed=1, model="m")
    assert base != reply_key(persona, "chat", [("Priya", "hello")], seed=1, model="m")
    assert base != reply_key(
        persona.model_copy(update={"knows": ["other"]}), "chat", [("Priya", "hi")], seed=1, model="m"
    )


def _v11_with_personas(root, personas: bytes):
    import io
    import tarfile

    from tests.atoll import apex_replica as replica

    folder = replica.write_v11_directory(root)
    seed = folder / "worlds" / replica.LAW_WORLD / "apps_data.tar.gz"
    members = {"mail/inbox.mbox": b"", "coworkers/personas.json": personas}
    with tarfile.open(seed, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return folder, replica.LAW_WORLD


def test_the_v11_loader_lists_the_personas_of_a_worlds_app_data_seed(tmp_path):
    folder, world = _v11_with_personas(tmp_path / "v11", json.dumps([CLIENT]).encode())
    assert [p.name for p in load_benchmark(folder).world_personas[world]] == ["Margaret Chen"]
    bad, _ = _v11_with_personas(tmp_path / "bad", b"[{}]")
    with pytest.raises(AtollError, match="personas.json: persona 0") as raised:
        load_benchmark(bad)
    assert raised.value.code == "bad_benchmark"
