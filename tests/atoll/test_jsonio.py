"""atoll.jsonio: the one strict JSON writer; a NaN or Infinity fails where it is written."""

from __future__ import annotations

import json
import logging
import math

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from atoll.http import model_reply
from atoll.jsonio import NonFiniteNumber, dumps_strict, loads_strict, model_json
from atoll.logs import JsonFormatter
from atoll.trial import Outcome, TrialResult


def test_plain_data_with_nan_or_infinity_is_refused_naming_where():
    with pytest.raises(NonFiniteNumber, match=r"\$\.metrics\[1\]\.value is nan"):
        dumps_strict({"metrics": [{"value": 1.0}, {"value": float("nan")}]})
    with pytest.raises(NonFiniteNumber, match=r"\$\.low is -inf"):
        dumps_strict({"low": -math.inf})
    assert dumps_strict({"value": None, "undefined": {"value": "no task"}}, sort_keys=True) == (
        '{"undefined": {"value": "no task"}, "value": null}'
    )


def test_a_model_with_nan_is_refused_where_pydantic_would_write_null():
    result = TrialResult(trial_id="t", outcome=Outcome.failed, score=float("inf"))
    assert json.loads(result.model_dump_json())["score"] is None  # silently: what model_json prevents
    with pytest.raises(NonFiniteNumber, match=r"\$\.score is inf"):
        model_json(result)
    finite = result.model_copy(update={"score": 0.5})
    assert json.loads(model_json(finite)) == json.loads(finite.model_dump_json())
    assert json.loads(model_json(finite, indent=2)) == json.loads(finite.model_dump_json(indent=2))


def test_the_strict_reader_refuses_what_node_refuses():
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValueError, match=f"{constant} is not JSON"):
            loads_strict(f'{{"value": {constant}}}')
    assert loads_strict(b'{"value": null}') == {"value": None}


def test_a_model_reply_is_strict_json_or_a_500():
    app = FastAPI()

    @app.get("/result/{score}")
    async def result(score: float) -> object:
        return model_reply(TrialResult(trial_id="t", outcome=Outcome.passed, score=score))

    with TestClient(app, raise_server_exceptions=False) as client:
        assert loads_strict(client.get("/result/0.5").content)["score"] == 0.5
        assert client.get("/result/nan").status_code == 500


def test_a_log_line_with_nan_still_goes_out_as_strict_json():
    record = logging.LogRecord("atoll", logging.WARNING, __file__, 1, "slow", None, None)
    record.rate = float("nan")
    line = loads_strict(JsonFormatter().format(record))
    assert line["message"] == "slow" and line["rate"] == "nan"
