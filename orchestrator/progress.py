"""Progress of a run: a live rich line for people, JSON lines for machines, or nothing."""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from atoll.jsonio import dumps_strict
from atoll.trial import Outcome, TrialResult
from orchestrator.executors.evidence import in_flight
from orchestrator.report_trials import costs_known
from orchestrator.stats import bootstrap_mean
from orchestrator.store import Lease, TrialStore


class ProgressView:
    """Receives scheduler events; renders trials done / running / failed of total, the pass
    rate so far with its 95% CI, cost so far and an ETA, and the steps and elapsed time of
    the trials in flight in this process (re-rendered at every refresh, so the line ticks
    while a long trial runs)."""

    def __init__(
        self,
        experiment: str,
        store: TrialStore,
        *,
        quiet: bool = False,
        json_events: bool = False,
        out: TextIO | None = None,
        runs: int = 1,
        seed: int = 0,
    ) -> None:
        self.experiment = experiment
        counts = store.counts(experiment)
        self.total = counts["total"]
        self.already_done = counts["done"]
        self.quiet = quiet
        self.json_events = json_events
        self.out = out or sys.stderr
        self.seed = seed
        self.running = 0
        self.finished = 0
        self.infra_errors = 0
        self.cost = 0.0
        self.unpriced = 0  # trials whose model spent tokens without a price: their cost is unknown
        self.started = time.monotonic()
        self.per_task: dict[str, list[bool]] = defaultdict(list)
        self._live: Live | None = None

    def __enter__(self) -> ProgressView:
        if not self.quiet and not self.json_events:
            console = Console(file=self.out)
            self._live = Live(
                console=console, refresh_per_second=4, transient=False, get_renderable=self._render
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.__exit__(None, None, None)
            if not self._live.console.is_terminal:
                print(file=self.out, flush=True)  # end the status line before what follows

    def event(self, kind: str, lease: Lease, result: TrialResult | None) -> None:
        if kind == "started":
            self.running += 1
        elif kind in ("finished", "lost", "infra_error", "retry", "cancelled"):
            self.running -= 1
            if result is not None:
                self.cost += result.cost_usd
                self.unpriced += not all(costs_known(result))
            if kind == "finished" and result is not None:
                self.finished += 1
                if result.outcome in (Outcome.passed, Outcome.failed):
                    self.per_task[f"{lease.spec.agent_name}/{lease.spec.task_id}"].append(
                        result.outcome is Outcome.passed
                    )
            if kind == "infra_error":
                self.infra_errors += 1
        if self.json_events:
            record = {
                "event": kind,
                "experiment": self.experiment,
                "trial_id": lease.trial_id,
                "task_id": lease.spec.task_id,
                "agent": lease.spec.agent_name,
                "run": lease.spec.run_index,
                "attempt": lease.attempt,
            }
            if result is not None:
                record.update(outcome=result.outcome.value, score=result.score, error=result.error)
            print(dumps_strict(record), file=self.out, flush=True)
        elif self._live is not None:
            self._live.refresh()

    def _render(self) -> Text:
        done = self.already_done + self.finished
        rates = [sum(runs) / len(runs) for runs in self.per_task.values()]
        interval = bootstrap_mean(rates, seed=self.seed, resamples=1000)
        rate = (
            f"pass {interval.value:.0%} [{interval.low:.0%}, {interval.high:.0%}]"
            if interval.tasks
            else "pass —"
        )
        elapsed = time.monotonic() - self.started
        cost = f"${self.cost:.4f}" + (" + unknown" if self.unpriced else "")
        cost = "cost unknown" if self.unpriced and not self.cost else cost
        remaining = self.total - done - self.infra_errors
        eta = f"ETA {remaining * elapsed / self.finished:.0f}s" if self.finished and remaining > 0 else ""
        return Text(
            f"{self.experiment}: {done}/{self.total} done, {self.running} running, "
            f"{self.infra_errors} infra errors · {rate} · {cost} · {elapsed:.0f}s {eta}{self._in_flight()}"
        )

    def _in_flight(self, shown: int = 3) -> str:
        """`` · in flight: step 14 at 93s, step 3 at 12s`` (the longest-running first)."""
        trials = [p for p in in_flight() if p.spec.experiment == self.experiment]
        if not trials:
            return ""
        parts = [f"step {p.steps} at {p.elapsed_s:.0f}s" for p in trials[:shown]]
        more = f", +{len(trials) - shown} more" if len(trials) > shown else ""
        return " · in flight: " + ", ".join(parts) + more
