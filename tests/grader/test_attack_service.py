"""Many callers at once against the grading service (issue #26): the grades it works on at
once are bounded by the service, so its memory is (each grade reads up to
``ExtractOptions.max_total_bytes`` of changed files), whatever the number of callers."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from atoll.llm.endpoints import forget_trusted_endpoints
from atoll.testing.scripted_llm import ScriptedLLM
from grader import JudgeConfig
from grader.service import create_app
from tests.grader import factories as f
from tests.served_app import ServedApp

SLOW_MET = {"content": json.dumps({"rationale": "ok", "verdict": "met"}), "delay_s": 0.8}


def test_concurrent_grades_are_bounded_and_all_answered(tmp_path):
    forget_trusted_endpoints()
    with ScriptedLLM([SLOW_MET] * 6) as judge_llm:
        judge = JudgeConfig(model="openai/judge", api_base=judge_llm.api_base, api_key="x")
        served = ServedApp(create_app(judge, max_concurrent=2))
        url = served.url
        before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
        after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/a.txt": "b"})

        def grade(index: int) -> int:
            task = f.task([{"verifier_id": f"v{index}", "criteria": f"a.txt says b ({index})"}])
            with before.open("rb") as b, after.open("rb") as a:
                return httpx.post(
                    f"{url}/grade",
                    data={"task": task.model_dump_json()},
                    files={"before": b, "after": a},
                    timeout=60,
                ).status_code

        with served:
            with ThreadPoolExecutor(6) as pool:
                statuses = list(pool.map(grade, range(6)))
            assert httpx.get(f"{url}/health", timeout=1).status_code == 200
    assert statuses == [200] * 6
    assert len(judge_llm.requests) == 6
    assert judge_llm.max_in_flight <= 2, f"{judge_llm.max_in_flight} grades were worked on at once"
