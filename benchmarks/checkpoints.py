"""What trial checkpoints cost a trial's wall time at the default interval (issue 31).

One ``react_toolbelt`` trial of ``--steps`` steps on the sample benchmark's first task, through
the real local executor (in-process environment, grading, artifact store on disk), its model the
scripted OpenAI-compatible server answering each step after ``--model-s`` seconds (a stand-in
for a real model's latency; the agent sends a mail at step 2, then lists files). The same trial
runs with checkpoints off and at the default interval (every 10 steps or 300 s), alternating,
``--repeats`` times each, in this one process; reported: the median wall time of each, the
overhead, and the agent's pause per checkpoint (the world's delta taken while it waits; the
files are stored in the background), measured inside the executor.

    .venv/bin/python benchmarks/checkpoints.py [--steps 40] [--model-s 0.5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("ATOLL_LOG_LEVEL", "WARNING")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from atoll.loader import load_benchmark  # noqa: E402
from atoll.testing.scripted_llm import ScriptedLLM  # noqa: E402
from orchestrator.executors import checkpoints, local, trial_phases  # noqa: E402
from orchestrator.planner import plan_trials  # noqa: E402
from tests.orchestrator.checkpoint_trial import StepModel, spec  # noqa: E402

PAUSES: list[float] = []
STORE_S: list[float] = []


class _Measured(checkpoints.CheckpointWriter):
    async def __call__(self, checkpoint):  # type: ignore[no-untyped-def]
        await super().__call__(checkpoint)
        PAUSES.append(self.pause_s[-1])

    def _store_files(self, *args):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return super()._store_files(*args)
        finally:
            STORE_S.append(time.perf_counter() - started)


trial_phases.CheckpointWriter = _Measured  # type: ignore[misc]


async def _trial(folder: Path, api_base: str, steps: int, checkpoint) -> float:  # type: ignore[no-untyped-def]
    experiment = spec(folder, api_base, steps=steps, checkpoint=checkpoint)
    benchmark = load_benchmark(experiment.benchmark)
    (trial,) = plan_trials(benchmark, experiment)
    executor = local.LocalExecutor(benchmark, experiment)
    try:
        await executor.run(trial, attempt=1)  # warm: the seed extracted, the environment started
        # Its checkpoints would be resumed from: the timed attempt starts from the seed too.
        shutil.rmtree(folder / "artifacts" / checkpoints.checkpoint_folder(trial), ignore_errors=True)
        started = time.perf_counter()
        result = await executor.run(trial, attempt=2)
        elapsed = time.perf_counter() - started
        assert result.steps == steps and result.run_status == "completed", result.error
        return elapsed
    finally:
        await executor.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--model-s", type=float, default=0.5, help="the scripted model's latency per step")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {"off": [], "default": []}
    with (
        ScriptedLLM(StepModel(args.steps, delay_s=args.model_s)) as llm,
        tempfile.TemporaryDirectory() as scratch,
    ):
        for repeat in range(args.repeats):
            for name, setting in (("off", "off"), ("default", {"every_steps": 10, "every_s": 300.0})):
                folder = Path(scratch) / f"{name}-{repeat}"
                folder.mkdir()
                walls[name].append(asyncio.run(_trial(folder, llm.api_base, args.steps, setting)))
    off, on = statistics.median(walls["off"]), statistics.median(walls["default"])
    print(f"trial: {args.steps} steps, model latency {args.model_s} s/step, {args.repeats} repeats each")
    print(f"  checkpoints off:      median {off:.3f} s  ({', '.join(f'{w:.3f}' for w in walls['off'])})")
    print(f"  default (10 steps):   median {on:.3f} s  ({', '.join(f'{w:.3f}' for w in walls['default'])})")
    paired = statistics.median(100 * (b - a) / a for a, b in zip(walls["off"], walls["default"], strict=True))
    print(f"  overhead:             {100 * (on - off) / off:+.2f} % of the trial's wall time (medians)")
    print(f"                        {paired:+.2f} % (median of the paired runs)")
    if PAUSES:
        pauses = sorted(PAUSES)
        print(
            f"  agent pause per checkpoint: median {1000 * statistics.median(pauses):.1f} ms, "
            f"max {1000 * pauses[-1]:.1f} ms ({len(pauses)} checkpoints)"
        )
        print(f"  background store per checkpoint: median {1000 * statistics.median(STORE_S):.1f} ms")


if __name__ == "__main__":
    main()
