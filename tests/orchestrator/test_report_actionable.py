"""Reports a user can act on: per-trial rows with links, the outcome and the failures first,
a banner for a run that stopped early, no chart without information, "unknown" cost."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.report import build_report, render_markdown, write_report
from orchestrator.report_html import render_html
from orchestrator.store import TrialStore

# (task, agent, run) -> (outcome, run_status, error, prompt tokens, agent cost); None = unfinished
PLAN = {
    ("t1", "alpha", 0): (Outcome.passed, "completed", None, 100, 0.01),
    ("t1", "alpha", 1): (Outcome.failed, "completed", None, 100, 0.01),
    ("t2", "alpha", 0): (Outcome.failed, "max_steps", None, 100, 0.01),
    ("t2", "alpha", 1): (Outcome.infra_error, None, "infrastructure: environment /apps: HTTP 500", 0, 0.0),
    ("t1", "beta", 0): (Outcome.passed, "completed", None, 50, 0.0),  # beta's model has no price
    ("t1", "beta", 1): (
        Outcome.ungradeable,
        "completed",
        "c2: judge_unavailable: judge answered 503",
        50,
        0.0,
    ),
    ("t2", "beta", 0): (Outcome.passed, "completed", None, 50, 0.0),
    ("t2", "beta", 1): None,
}


def _spec(task, agent, run) -> TrialSpec:
    return TrialSpec(
        experiment="exp",
        task_id=task,
        world_id="w",
        world_digest="d",
        agent_name=agent,
        agent="react",
        model=f"m-{agent}",
        run_index=run,
        domain="Law",
    )


def _store(tmp_path, plan=PLAN, runs=2) -> TrialStore:
    store = TrialStore(f"sqlite:///{tmp_path / 'atoll.db'}")
    store.save_experiment("exp", {"name": "exp", "runs": runs, "benchmark": None})
    specs = {key: _spec(*key) for key in plan}
    store.enqueue([spec for key, spec in specs.items() if plan[key] is not None])
    by_id = {spec.trial_id: key for key, spec in specs.items()}
    for lease in store.lease("w", limit=100, lease_s=60):
        key = by_id[lease.trial_id]
        outcome, status, error, tokens, cost = plan[key]
        folder = (tmp_path / "artifacts" / "exp" / key[0] / key[1] / f"run-{key[2]}" / "attempt-1").as_uri()
        result = TrialResult(
            trial_id=lease.trial_id,
            outcome=outcome,
            score=1.0 if outcome is Outcome.passed else 0.5,
            run_status=status,
            error=error,
            steps=4,
            tool_calls=3,
            prompt_tokens=tokens,
            completion_tokens=tokens // 10,
            agent_cost_usd=cost,
            duration_s=2.5,
            trajectory_uri=None if outcome is Outcome.infra_error else f"{folder}/trajectory.json",
            grade_uri=None if outcome is Outcome.infra_error else f"{folder}/grade.json",
        )
        if outcome is Outcome.infra_error:
            store.fail_infra(lease, "w", error, max_attempts=1, result=result)
        else:
            store.complete(lease, "w", result)
    store.enqueue([spec for key, spec in specs.items() if plan[key] is None])  # left pending
    return store


@pytest.fixture
def store(tmp_path):
    store = _store(tmp_path)
    yield store
    store.dispose()


def _rows(report):
    return {(r["task_id"], r["agent"], r["run_index"]): r for r in report["trial_rows"]}


def test_report_json_has_one_row_per_trial_with_ids_outcome_and_artifact_links(store, tmp_path):
    report = build_report(store, "exp")
    rows = _rows(report)
    assert set(rows) == set(PLAN)
    failed = rows[("t1", "alpha", 1)]
    assert failed["trial_id"] == _spec("t1", "alpha", 1).trial_id
    assert (
        failed["outcome"],
        failed["end_reason"],
        failed["attempt"],
        failed["steps"],
        failed["tool_calls"],
    ) == ("fail", "completed", 1, 4, 3)
    assert failed["prompt_tokens"] == 100 and failed["cost_usd"] == pytest.approx(0.01)
    folder = (tmp_path / "artifacts" / "exp" / "t1" / "alpha" / "run-1" / "attempt-1").as_uri()
    assert failed["artifacts"]["folder"] == folder + "/"
    assert failed["artifacts"]["trajectory"] == folder + "/trajectory.json"
    assert failed["link"] == folder + "/" and failed["viewer_url"] is None
    assert failed["failure"] == "fail: criteria not met"
    unfinished = rows[("t2", "beta", 1)]
    assert unfinished["outcome"] is None and unfinished["state"] in ("pending", "leased")
    assert unfinished["failure"] is None  # not ended: not a failure
    json.dumps(report)  # all of it is JSON


def test_unpriced_trials_have_unknown_cost_everywhere(store):
    report = build_report(store, "exp")
    rows = _rows(report)
    assert rows[("t1", "beta", 0)]["cost_usd"] is None and rows[("t1", "beta", 0)]["agent_cost_usd"] is None
    assert rows[("t2", "alpha", 1)]["cost_usd"] == 0.0  # an infra error spent nothing: that is known
    assert (
        report["agents"]["beta"]["mean_cost_usd"] is None and report["agents"]["beta"]["unpriced_trials"] == 3
    )
    assert report["cost"] == {"known_usd": pytest.approx(0.03), "unpriced_trials": 3, "finished_trials": 7}
    markdown = render_markdown(report)
    assert "cost $0.0300 + unknown (3 unpriced trials)" in markdown.split("\n## ")[0]
    trials = markdown.split("## Trials", 1)[1].split("\n## ", 1)[0]
    beta_rows = [line for line in trials.splitlines() if line.startswith("| t1 | beta | 0 |")]
    assert beta_rows and "| unknown |" in beta_rows[0] and "$0.0000" not in beta_rows[0]


def test_markdown_opens_with_outcome_a_headline_per_agent_then_the_leaderboard(store):
    report = build_report(store, "exp")
    markdown = render_markdown(report)
    lines = markdown.splitlines()
    assert lines[0] == "# exp"
    outcome = next(line for line in lines if line.startswith("**Outcome:**"))
    assert outcome == (  # no pass rate pooled over agents: each agent has its own below
        "**Outcome:** 2 agents × 2 tasks × 2 runs: 7 of 8 trials finished · "
        "cost $0.0300 + unknown (3 unpriced trials) · not finished"
    )
    headlines = lines[lines.index(outcome) + 2 : lines.index(outcome) + 4]
    assert headlines == [
        "- **beta** (m-beta): pass rate 100.0% (2 of 2 graded) · 3 of 4 finished · unknown",
        "- **alpha** (m-alpha): pass rate 33.3% (1 of 3 graded) · 4 of 4 finished · $0.0300",
    ]
    assert [(h["agent"], h["passes"], h["graded"]) for h in report["headline"]] == [
        ("beta", 2, 2),
        ("alpha", 1, 3),
    ]
    order = [
        markdown.index(heading)
        for heading in (
            "**Outcome:**",
            "- **beta**",
            "## Leaderboard",
            "## Failures",
            "## Agents × tasks",
            "## Pass@k and Pass^k",
            "## Per domain",
            "## Trials",
            "## Exclusions",
        )
    ]
    assert order == sorted(order)
    html = render_html(report, markdown)  # the leaderboard and its chart before the failures
    assert html.index("<h2>Leaderboard</h2>") < html.index("<svg") < html.index("<h2>Failures</h2>")
    assert "prefers-color-scheme: dark" in html


def test_failures_are_grouped_by_why_with_each_trial_linked(store, tmp_path):
    report = build_report(store, "exp")
    groups = {group["reason"]: group for group in report["failures"]}
    assert set(groups) == {
        "fail: criteria not met",
        "fail: run ended max_steps",
        "infra_error: environment /apps: HTTP 500",
        "ungradeable: judge_unavailable: judge answered 503",
    }  # the pending trial has not ended: not a failure
    assert groups["infra_error: environment /apps: HTTP 500"]["error_kind"] == "infrastructure"
    assert groups["ungradeable: judge_unavailable: judge answered 503"]["error_kind"] == "judge_unavailable"
    assert groups["fail: criteria not met"]["trials"] == [_spec("t1", "alpha", 1).trial_id]
    section = render_markdown(report).split("## Failures", 1)[1].split("\n## ", 1)[0]
    line = next(line for line in section.splitlines() if line.startswith("| fail: criteria not met"))
    folder = (tmp_path / "artifacts" / "exp" / "t1" / "alpha" / "run-1" / "attempt-1").as_uri()
    assert f"[t1 · alpha · run 1]({folder}/)" in line


def test_report_md_and_html_group_the_failures_as_the_viewer_does_each_trial_linked(store, tmp_path):
    """report.md / .html show report.json's failure_analysis (the viewer's groups, one function):
    per dimension, each group with exactly its trials, each linked."""
    from atoll.grade import CriterionVerdict, Grade

    failed_id = _spec("t1", "alpha", 1).trial_id
    folder = tmp_path / "artifacts" / "exp" / "t1" / "alpha" / "run-1" / "attempt-1"
    folder.mkdir(parents=True)
    missed = CriterionVerdict(verifier_id="c1", criterion="Total is right", verdict="not_met")
    (folder / "grade.json").write_text(
        Grade(task_id="t1", trial_id=failed_id, passed=False, score=0.0, criteria=[missed]).model_dump_json()
    )
    report = build_report(store, "exp")
    markdown = render_markdown(report)
    section = markdown.split("## Failure analysis", 1)[1].split("\n## ", 1)[0]
    by_title = {
        block.split("\n", 1)[0]: block for block in section.split("### ")[1:]
    }  # one sub-section per dimension
    assert list(by_title) == [
        "By failed criterion",
        "By grading target kind",
        "By end reason",
        "By error kind",
        "By outcome",
    ]
    rows = _rows(report)

    def linked(key):
        return f"[{' · '.join([key[0], key[1], f'run {key[2]}'])}]({rows[key]['link']})"

    criterion = next(line for line in by_title["By failed criterion"].splitlines() if line.startswith("| c1"))
    assert criterion == f"| c1: Total is right | 1 | {linked(('t1', 'alpha', 1))} |"
    for group in report["failure_analysis"]["end_reason"]:
        line = next(
            line for line in by_title["By end reason"].splitlines() if line.startswith(f"| {group['key']} |")
        )
        listed = re.findall(r"\]\(([^)]*)\)", line)
        by_id = {row["trial_id"]: row for row in report["trial_rows"]}
        # (an infra_error trial kept no artifacts: named, not linked)
        assert listed == [by_id[t]["link"] for t in group["trials"] if by_id[t]["link"]], group
        assert line.split(" | ")[1] == str(len(group["trials"]))
    assert "| max_steps | 1 |" in by_title["By end reason"]
    html = render_html(report, markdown)
    assert "<h2>Failure analysis</h2>" in html and "<h3>By error kind</h3>" in html
    assert html.index("<h2>Failures</h2>") < html.index("<h2>Failure analysis</h2>")
    assert f'<a href="{rows[("t1", "alpha", 1)]["link"]}">t1 · alpha · run 1</a>' in html


def test_a_run_recorded_without_task_names_reads_them_from_a_local_benchmark_only(tmp_path):
    from orchestrator.report import task_names
    from tests.atoll.factories import make_task, write_benchmark

    benchmark = write_benchmark(tmp_path / "bench", tasks=[make_task("t1")])
    assert task_names({"task_names": {"t1": "Stored name"}, "benchmark": str(benchmark)}) == {
        "t1": "Stored name"
    }
    assert task_names({"benchmark": str(benchmark)}) == {"t1": "Task t1"}
    assert task_names({"benchmark": "hf://org/never-downloaded"}) == {}  # a report downloads nothing
    assert task_names({"benchmark": str(tmp_path / "gone")}) == {}


def test_matrix_counts_passes_over_graded_runs_per_agent_and_task(store):
    report = build_report(store, "exp")
    cells = report["matrix"]["cells"]
    assert cells["alpha"]["t1"] == {"passes": 1, "graded": 2, "runs": 2, "excluded": 0, "unfinished": 0}
    assert cells["beta"]["t2"] == {"passes": 1, "graded": 1, "runs": 2, "excluded": 0, "unfinished": 1}
    section = render_markdown(report).split("## Agents × tasks", 1)[1].split("\n## ", 1)[0]
    assert "| t2 | Law | 0/1 · 1 excluded | 1/1 · 1 unfinished |" in section


def test_with_a_viewer_url_trials_link_to_pages_the_viewer_serves(store, tmp_path):
    """The link is the viewer's own trial page: its API answers for the same trial and run."""
    from fastapi.testclient import TestClient

    from orchestrator.viewer import create_app

    report = build_report(store, "exp", viewer_url="http://127.0.0.1:8090")
    failed = _rows(report)[("t1", "alpha", 1)]
    trial_id = failed["trial_id"]
    assert failed["viewer_url"] == failed["link"] == f"http://127.0.0.1:8090/trials/{trial_id}?run=exp"
    assert f"](http://127.0.0.1:8090/trials/{trial_id}?run=exp)" in render_markdown(report)
    path = failed["link"].removeprefix("http://127.0.0.1:8090")
    with TestClient(create_app(store)) as client:
        page = client.get(path)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        api = client.get("/api" + path)
        assert api.status_code == 200, api.text
        assert api.json()["trial"]["trial_id"] == trial_id


def test_an_aborted_run_opens_with_a_banner_naming_the_cause(store):
    store.record_stop(
        "exp", "infra_error_rate", "5 of 6 attempts failed in atoll's own infrastructure (threshold 50%)"
    )
    report = build_report(store, "exp")
    assert report["banner"]["kind"] == "aborted" and report["banner"]["reason"] == "infra_error_rate"
    lines = render_markdown(report).splitlines()
    assert re.match(
        r"> \*\*ABORTED\*\* \(at [0-9T:+-]+\): 5 of 6 attempts failed in atoll's own infrastructure "
        r"\(threshold 50%\)\. 1 trial\(s\) not finished\.",
        lines[2],
    ), lines[2]
    assert "1 trial(s) not finished" in lines[2] and "resume" in lines[2]
    assert report["outcome"].endswith("· aborted")
    html = render_html(report, render_markdown(report))
    assert html.index("<div class='banner'>") < html.index("<h2>")
    # Starting the run again clears it: the banner is about the latest attempt to run it.
    store.save_experiment("exp", {"name": "exp", "runs": 2})
    assert store.run_record("exp").stop is None


def test_a_run_with_unfinished_trials_and_no_recorded_stop_says_so(store):
    report = build_report(store, "exp")
    assert report["banner"]["kind"] == "not finished"
    assert "1 of 8 trials are not finished" in render_markdown(report).splitlines()[2]


def test_a_complete_run_has_no_banner(tmp_path):
    plan = {key: value for key, value in PLAN.items() if value is not None and key[2] == 0}
    store = _store(tmp_path, plan, runs=1)
    try:
        report = build_report(store, "exp")
    finally:
        store.dispose()
    markdown = render_markdown(report)
    assert report["banner"] is None and "> **" not in markdown
    assert report["outcome"].endswith("· complete")


class _Figures(HTMLParser):
    def __init__(self):
        super().__init__()
        self.captions, self._in = [], False

    def handle_starttag(self, tag, attrs):
        self._in = tag == "figcaption"

    def handle_data(self, data):
        if self._in:
            self.captions.append(data)
            self._in = False


def _captions(report) -> list[str]:
    parser = _Figures()
    parser.feed(render_html(report, render_markdown(report)))
    return parser.captions


def test_charts_without_information_are_not_drawn(tmp_path):
    # One run per task, nothing priced, no steps: only the leaderboard chart carries anything.
    plan = {
        ("t1", "alpha", 0): (Outcome.passed, "completed", None, 0, 0.0),
        ("t2", "alpha", 0): (Outcome.failed, "completed", None, 0, 0.0),
    }
    store = _store(tmp_path, plan, runs=1)
    try:
        report = build_report(store, "exp")
        for trial in report["agents"].values():
            trial["mean_steps"] = trial["mean_tool_calls"] = 0.0
        assert _captions(report) == ["Leaderboard (Pass@1 with 95% CI)"]
        assert "## Pass@k and Pass^k" not in render_markdown(report)
    finally:
        store.dispose()


def test_informative_charts_are_drawn(store):
    captions = _captions(build_report(store, "exp"))
    assert "Pass@k and Pass^k against k" in captions  # two runs per task: k = 1, 2
    assert any(caption.startswith("Mean cost per priced trial") for caption in captions)


def test_a_cost_panel_is_left_out_when_every_cost_is_zero_or_unknown(tmp_path):
    plan = {key: value for key, value in PLAN.items() if key[1] == "beta" and value is not None}
    store = _store(tmp_path, plan)
    try:
        captions = _captions(build_report(store, "exp"))
    finally:
        store.dispose()
    usage = [caption for caption in captions if "steps" in caption]
    assert usage == ["Mean steps, mean tool calls"]


def test_html_links_are_anchors_and_hostile_names_stay_text(tmp_path):
    plan = {("<script>x</script>", "alpha", 0): (Outcome.failed, "completed", None, 10, 0.01)}
    store = _store(tmp_path, plan, runs=1)
    try:
        report = build_report(store, "exp", viewer_url="http://127.0.0.1:8090")
    finally:
        store.dispose()
    html = render_html(report, render_markdown(report))
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    trial_id = report["trial_rows"][0]["trial_id"]
    assert f'<a href="http://127.0.0.1:8090/trials/{trial_id}?run=exp">' in html


def test_write_report_passes_the_viewer_url_to_every_file(store, tmp_path):
    paths = write_report(store, "exp", tmp_path / "out", viewer_url="http://viewer.example:8090")
    written = json.loads(Path(paths["json"]).read_text())
    assert all(row["link"].startswith("http://viewer.example:8090/trials/") for row in written["trial_rows"])
    assert len(re.findall(r"\]\(http://viewer\.example:8090/trials/", paths["md"].read_text())) >= len(PLAN)
    assert 'href="http://viewer.example:8090/trials/' in paths["html"].read_text()


def test_without_a_viewer_url_trials_link_to_their_artifacts_by_a_relative_path(store, tmp_path):
    paths = write_report(store, "exp", tmp_path / "out")
    folder = "../artifacts/exp/t1/alpha/run-1/attempt-1/"
    written = json.loads(Path(paths["json"]).read_text())
    row = next(
        r for r in written["trial_rows"] if (r["task_id"], r["agent"], r["run_index"]) == ("t1", "alpha", 1)
    )
    assert row["link"] == folder and row["artifacts"]["folder"].startswith("file://")  # the store's URI kept
    assert f"[t1 · alpha · run 1]({folder})" in paths["md"].read_text()
    html = paths["html"].read_text()
    assert f'<a href="{folder}">' in html and 'href="file://' not in html
    assert (tmp_path / "out" / folder).resolve() == tmp_path / "artifacts/exp/t1/alpha/run-1/attempt-1"


def test_html_links_only_to_web_pages_files_and_relative_paths():
    from orchestrator.report_html import _inline

    assert _inline("[a](../x/y/)") == '<a href="../x/y/">a</a>'
    assert _inline("[a](javascript:alert(1))").startswith("a (javascript:")
    assert "href" not in _inline("[a](data:text/html,x)") and "href" not in _inline("[a](//evil.example/)")


def test_cli_refuses_a_viewer_url_that_is_not_http(tmp_path):
    from atoll.errors import AtollError
    from atoll_cli.commands.run import _viewer_url

    assert _viewer_url("http://127.0.0.1:8090/") == "http://127.0.0.1:8090"
    with pytest.raises(AtollError, match=r"--viewer-url '127.0.0.1:8090': give the http\(s\) URL") as info:
        _viewer_url("127.0.0.1:8090")
    assert info.value.code == "invalid_option"  # the documented code of a bad option, as a server's


def test_atoll_report_with_a_viewer_url_links_trials_and_refuses_a_bad_url(store, tmp_path):
    import os
    import subprocess
    import sys

    def atoll(*args):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "atoll_cli",
                "report",
                "exp",
                "--store",
                store.url,
                "--output",
                str(tmp_path / "out"),
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )

    done = atoll("--viewer-url", "http://127.0.0.1:8090/")
    assert done.returncode == 0, done.stderr
    trial_id = _spec("t1", "alpha", 1).trial_id
    assert (
        f"(http://127.0.0.1:8090/trials/{trial_id}?run=exp)" in (tmp_path / "out" / "report.md").read_text()
    )
    refused = atoll("--viewer-url", "127.0.0.1:8090")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: --viewer-url '127.0.0.1:8090': give the http(s) URL `atoll view` serves, e.g. http://127.0.0.1:8090"
    ]


def test_failed_trials_are_named_by_task_alone_when_one_agent_ran_each_task_once(tmp_path):
    plan = {
        ("t1", "alpha", 0): (Outcome.failed, "completed", None, 10, 0.01),
        ("t2", "alpha", 0): (Outcome.passed, "completed", None, 10, 0.01),
    }
    store = _store(tmp_path, plan, runs=1)
    try:
        section = render_markdown(build_report(store, "exp")).split("## Failures", 1)[1].split("\n## ", 1)[0]
    finally:
        store.dispose()
    folder = (tmp_path / "artifacts" / "exp" / "t1" / "alpha" / "run-0" / "attempt-1").as_uri()
    assert f"| fail: criteria not met | 1 | [t1]({folder}/) |" in section
