from pathlib import Path

import jsonschema

from atoll.schemas import render_schemas

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def test_committed_schemas_are_current():
    rendered = render_schemas()
    committed = {path.name: path.read_text(encoding="utf-8") for path in SCHEMA_DIR.glob("*.schema.json")}
    stale = sorted(name for name in rendered if committed.get(name) != rendered[name])
    extra = sorted(set(committed) - set(rendered))
    assert not stale and not extra, (
        f"docs/schemas is out of date (stale: {stale}, extra: {extra}); "
        "run: python -m atoll_cli.commands.openapi docs/schemas"
    )


def test_schemas_are_valid_json_schema():
    import json

    for text in render_schemas().values():
        jsonschema.Draft202012Validator.check_schema(json.loads(text))  # raises naming the fault


def test_task_schema_accepts_an_apex_task():
    import json

    schema = json.loads(render_schemas()["task.schema.json"])
    task = {
        "task_id": "t1",
        "world_id": "w1",
        "prompt": "Do it",
        "extra_field": 1,
        "rubric": [
            {
                "verifier_id": "v1",
                "criteria": "Mentions X",
                "check": {"kind": "answer_number", "value": 3.5, "tolerance": 0.1},
            }
        ],
    }
    jsonschema.validate(task, schema)
    task["rubric"][0]["check"] = {"kind": "answer_number"}
    try:
        jsonschema.validate(task, schema)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a check without its value must not validate")
