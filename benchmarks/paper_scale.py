"""Paper scale on a budget (issue 30): what one trial costs in CPU and bytes at APEX's size.

The paper-sized benchmark (``benchmarks/paper_world.py``: 33 worlds of 156 files, ~8 MB
unpacked, 480 tasks) is run with the replay agent, real environments and checks-only grading,
``--concurrency`` trials at a time, as ``atoll run`` in a child process (local executor,
SQLite store, file artifacts, all in a temporary folder). Measured per run:

- wall time, and CPU of the run = user + system time of the child and everything it waited
  for (``RUSAGE_CHILDREN``), plus any descendant still running when it ended, per trial; the run's fixed part is measured apart, as the same
  ``atoll run`` again with nothing left to do (imports, loading, planning, reports), and the
  per-trial figure without it is printed beside;
- peak RSS of the process tree (the sum over the child and its descendants, sampled every
  0.2 s with psutil; pages shared between processes count in each) and of its largest process;
- bytes in the artifact store, total and per trial, by file name, and their ratio to a world
  archive (the mean size of the benchmark's ``world_files_zipped/<world>.zip``);
- the extrapolation to the paper's 30,720 trials (8 agents × 8 runs × 480 tasks): CPU-hours,
  GB stored, and the upload time of those bytes from trial pods at ``--bandwidth-mbit``.

Targets (issue 30): <= 0.4 CPU-s per trial, and artifact bytes per trial <= 5% of a world
archive; each is PASS only when every run meets it. ``--repeat K`` gives ranges over K runs.
The kernel's share of the CPU and the filesystem of the scratch folder (``TMPDIR``) are printed
beside: on ext4 without a journal, creating a file scans the inodes deleted in the last
minutes, so each world laid out costs more the more worlds were just deleted
(docs/performance.md, "Paper scale").

    python benchmarks/paper_scale.py [--tasks 480] [--repeat 1] [--concurrency 4] [--json OUT]
    python benchmarks/paper_scale.py --tasks 40 --benchmark /tmp/paper   # a quick look, benchmark kept
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import loop_cpu_s  # noqa: E402
from benchmarks.paper_world import describe, generate_paper_benchmark  # noqa: E402

PAPER_TRIALS = 30_720
CPU_TARGET_S = 0.4
BYTES_TARGET_SHARE = 0.05


def _ready_benchmark(where: Path, *, worlds: int, tasks: int, seed: int) -> Path:
    """The paper benchmark in ``where``: reused when it was generated with the same arguments."""
    marker = where / "paper_world.json"
    wanted = {"worlds": worlds, "tasks": tasks, "seed": seed}
    if marker.is_file() and json.loads(marker.read_text()) == wanted:
        return where
    marker.unlink(missing_ok=True)  # an interrupted generation is never taken for a finished one
    started = time.perf_counter()
    generate_paper_benchmark(where, worlds=worlds, tasks=tasks, seed=seed)
    marker.write_text(json.dumps(wanted) + "\n")
    print(f"generated in {time.perf_counter() - started:.0f} s: {describe(where)}", flush=True)
    return where


def _experiment(benchmark: Path, scratch: Path, concurrency: int) -> Path:
    import yaml

    spec = {
        "name": "paper-scale",
        "benchmark": str(benchmark),
        "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
        "runs": 1,
        "judge": {"model": None},
        "concurrency": {"trials": concurrency},
        "executor": "local",
        "store": f"sqlite:///{scratch / 'atoll.db'}",
        "artifacts": (scratch / "artifacts").as_uri(),
        "output_dir": str(scratch / "out"),
    }
    path = scratch / "paper-scale.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _tree(process: Any) -> list[Any]:
    import psutil

    try:
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def _rss(members: list[Any]) -> int:
    import psutil

    total = 0
    for member in members:
        with contextlib.suppress(psutil.Error):  # a process that ended between the two calls
            total += member.memory_info().rss
    return total


def _outlived_cpu(seen: dict[tuple[int, float], Any]) -> tuple[float, int]:
    """CPU seconds of descendants still running after the run ended (orphans no one waits
    for, so ``RUSAGE_CHILDREN`` never counts them), and how many there were."""
    import psutil

    cpu, count = 0.0, 0
    for member in seen.values():
        with contextlib.suppress(psutil.Error):
            if member.is_running():
                times = member.cpu_times()
                cpu += times.user + times.system
                count += 1
    return cpu, count


def _timed_run(experiment: Path, cwd: Path) -> dict[str, float]:
    """``atoll run EXPERIMENT`` in a child: wall s, CPU s (child + what it waited for), peak tree RSS."""
    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "atoll_cli", "run", str(experiment), "--quiet"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = largest = 0
    seen: dict[tuple[int, float], Any] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, largest
        process = psutil.Process(child.pid)
        while not done.wait(0.2):
            members = _tree(process)
            sizes = [_rss([member]) for member in members]
            peak, largest = max(peak, sum(sizes)), max([largest, *sizes])
            for member in members[1:]:
                with contextlib.suppress(psutil.Error):
                    seen.setdefault((member.pid, member.create_time()), member)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = child.communicate()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode not in (0, 4):  # 4: finished, but some trials were not graded (checked below)
        raise SystemExit(f"atoll run {experiment} failed ({child.returncode}):\n{output[-4000:]}")
    outlived_cpu, outlived = _outlived_cpu(seen)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + outlived_cpu
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "system_cpu_s": after.ru_stime - before.ru_stime,
        "peak_rss_bytes": peak,
        "largest_rss_bytes": largest,
        "outlived_processes": outlived,
    }


#: Where the artifact store keeps the worlds, stored once per store and shared by every run.
WORLD_STORAGE = ("seeds/", "blobs/")


def _artifact_bytes(root: Path) -> tuple[int, dict[str, int], list[int]]:
    """Total bytes under ``root``, bytes by kind (a trial's file name, or ``seeds/`` and
    ``blobs/`` for the worlds stored once each), and the sizes of every trial's final state."""
    total, by_name, snapshots = 0, defaultdict(int), []
    for path in root.rglob("*"):
        if path.is_file():
            size = path.stat().st_size
            total += size
            parts = path.relative_to(root).parts
            kind = f"{parts[0]}/" if f"{parts[0]}/" in WORLD_STORAGE else path.name
            by_name[kind] += size
            if path.name in ("after.tar.gz", "after.delta.tar.gz"):
                snapshots.append(size)
    return total, dict(sorted(by_name.items(), key=lambda item: -item[1])), snapshots


def measure_once(benchmark: Path, concurrency: int) -> dict[str, Any]:
    """One paper-scale run in a fresh temporary store and artifact folder."""
    with tempfile.TemporaryDirectory(prefix="atoll-paper-scale-") as scratch:
        root = Path(scratch)
        experiment = _experiment(benchmark, root, concurrency)
        load_before = os.getloadavg()[0]
        run = _timed_run(experiment, root)
        load_after = os.getloadavg()[0]
        fixed = _timed_run(experiment, root)  # nothing left to do: the run's fixed part
        report = json.loads((root / "out" / "paper-scale" / "report.json").read_text())
        overall = report["metrics"]["overall"]["oracle"]
        trials = report["trials"]["done"]
        not_passed = [_why_not_passed(row) for row in report["trial_rows"] if row.get("outcome") != "pass"]
        total, by_name, snapshots = _artifact_bytes(root / "artifacts")
    return {
        "trials": trials,
        "passed": overall["trials_passed"],
        "graded": overall["trials_graded"],
        "wall_s": run["wall_s"],
        "cpu_s": run["cpu_s"],
        "cpu_s_per_trial": run["cpu_s"] / trials,
        "system_cpu_s_per_trial": run["system_cpu_s"] / trials,
        "fixed_cpu_s": fixed["cpu_s"],
        "cpu_s_per_trial_without_fixed": max(run["cpu_s"] - fixed["cpu_s"], 0.0) / trials,
        "peak_rss_bytes": run["peak_rss_bytes"],
        "largest_process_rss_bytes": run["largest_rss_bytes"],
        "outlived_processes": run["outlived_processes"],
        "artifact_bytes": total,
        "artifact_bytes_per_trial": total / trials,
        "world_bytes": sum(by_name.get(kind, 0) for kind in WORLD_STORAGE),
        "trial_bytes_per_trial": (total - sum(by_name.get(kind, 0) for kind in WORLD_STORAGE)) / trials,
        "artifact_bytes_by_name": by_name,
        "after_snapshot_bytes_median": statistics.median(snapshots) if snapshots else None,
        "load_average": [load_before, load_after],
        "not_passed": not_passed,
    }


def _why_not_passed(row: dict[str, Any]) -> str:
    """A trial the replay agent did not pass, named with what its report row says of it (the
    run's folder is gone once the run is measured)."""
    parts = [row["trial_id"], f"outcome {row.get('outcome')}", f"score {row.get('score')}"]
    if row.get("checks_total"):
        parts.append(f"checks {row.get('checks_met')}/{row['checks_total']}")
    if row.get("error"):
        parts.append(f"error {str(row['error'])[:300]}")
    return ", ".join(parts)


def scratch_filesystem(path: Path) -> str:
    """The filesystem ``path`` is on, e.g. ``ext4 on / (/dev/vda, no journal)``: the kernel's
    part of a trial's CPU (creating and deleting each world's files) depends on it; ext4
    without a journal scans its recently deleted inodes at every file it creates."""
    import psutil

    resolved = str(path.resolve())
    mounts = [
        m
        for m in psutil.disk_partitions(all=True)
        if resolved == m.mountpoint or resolved.startswith(m.mountpoint.rstrip("/") + "/")
    ]
    if not mounts:
        return "unknown"
    mount = max(mounts, key=lambda m: len(m.mountpoint))
    described = f"{mount.fstype} on {mount.mountpoint} ({mount.device}"
    journal = Path("/sys/fs/ext4") / Path(mount.device).name / "journal_task"
    if mount.fstype == "ext4" and journal.is_file():
        described += ", no journal" if journal.read_text().strip() == "<none>" else ", journal"
    return described + ")"


def world_archive_bytes(benchmark: Path) -> float:
    """The mean size of the benchmark's world zips (what one world costs as one archive)."""
    sizes = [path.stat().st_size for path in (benchmark / "world_files_zipped").glob("*.zip")]
    return sum(sizes) / len(sizes)


def _range(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    if len(values) == 1 or fmt.format(low) == fmt.format(high):
        return fmt.format(low)
    return f"{fmt.format(low)}–{fmt.format(high)} (median {fmt.format(statistics.median(values))})"


def summarise(runs: list[dict[str, Any]], archive: float, bandwidth_mbit: float) -> dict[str, Any]:
    """Ranges over ``runs``, the ratio to a world archive, the 30,720-trial extrapolation and
    the targets (met only when every run meets them)."""
    cpu = [run["cpu_s_per_trial"] for run in runs]
    # What a trial costs where the worlds are stored once for every run of the store (the
    # paper's 30,720 trials share 33 worlds): its own folder, plus its share of the worlds.
    per_trial = [run["trial_bytes_per_trial"] + run["world_bytes"] / PAPER_TRIALS for run in runs]
    share = [value / archive for value in per_trial]
    return {
        "world_archive_bytes": archive,
        "artifact_share_of_world_archive": share,
        "this_run_share_of_world_archive": [run["artifact_bytes_per_trial"] / archive for run in runs],
        "paper": {
            "trials": PAPER_TRIALS,
            "cpu_hours": [value * PAPER_TRIALS / 3600 for value in cpu],
            "gigabytes": [value * PAPER_TRIALS / 1e9 for value in per_trial],
            "bandwidth_mbit_s": bandwidth_mbit,
            "upload_s_per_trial": [value * 8 / (bandwidth_mbit * 1e6) for value in per_trial],
            "upload_hours": [value * 8 / (bandwidth_mbit * 1e6) * PAPER_TRIALS / 3600 for value in per_trial],
        },
        "targets": {
            "cpu_s_per_trial": {"target": CPU_TARGET_S, "met": max(cpu) <= CPU_TARGET_S},
            "artifact_share_of_world_archive": {
                "target": BYTES_TARGET_SHARE,
                "met": max(share) <= BYTES_TARGET_SHARE,
            },
        },
    }


def print_report(runs: list[dict[str, Any]], summary: dict[str, Any], concurrency: int) -> None:
    def values(key: str, scale: float = 1.0) -> list[float]:
        return [run[key] * scale for run in runs]

    mb = 1e-6
    passed = ", ".join(f"{run['passed']}/{run['trials']}" for run in runs)
    loads = ", ".join(f"{run['load_average'][0]:.1f}→{run['load_average'][1]:.1f}" for run in runs)
    print(
        f"paper scale: {len(runs)} run(s) of {runs[0]['trials']} trials, {concurrency} at a time; passed {passed}"
    )
    print(f"  load average (1 min) before→after each run: {loads}; {os.cpu_count()} CPUs")
    print(f"  wall time                 {_range(values('wall_s'), '{:.0f} s')}")
    print(
        f"  CPU per trial             {_range(values('cpu_s_per_trial'), '{:.2f} s')} "
        f"(without the run's fixed {_range(values('fixed_cpu_s'), '{:.1f} s')}: "
        f"{_range(values('cpu_s_per_trial_without_fixed'), '{:.2f} s')})"
    )
    print(
        f"    of which the kernel's  {_range(values('system_cpu_s_per_trial'), '{:.2f} s')} "
        f"(scratch: {scratch_filesystem(Path(tempfile.gettempdir()))})"
    )
    outlived = max(values("outlived_processes"))
    if outlived:
        print(f"    ({outlived:.0f} descendant process(es) outlived a run; their CPU until then is counted)")
    print(
        f"  peak RSS                  {_range(values('peak_rss_bytes', mb), '{:.0f} MB')} (process tree, "
        f"shared pages counted in each process); largest process {_range(values('largest_process_rss_bytes', mb), '{:.0f} MB')}"
    )
    print(
        f"  artifacts                 {_range(values('artifact_bytes', mb), '{:.1f} MB')} in all: "
        f"{_range(values('trial_bytes_per_trial', 1e-3), '{:.1f} kB')} per trial in its folder, and the "
        f"worlds stored once {_range(values('world_bytes', mb), '{:.1f} MB')} (this run: "
        f"{_range(values('artifact_bytes_per_trial', mb), '{:.3f} MB')} per trial)"
    )
    names = runs[0]["artifact_bytes_by_name"]
    trials = runs[0]["trials"]
    print(
        "    by file (first run, per trial): "
        + ", ".join(f"{n} {b / trials / 1e3:.1f} kB" for n, b in names.items())
    )
    archive = summary["world_archive_bytes"]
    snapshot = runs[0]["after_snapshot_bytes_median"]
    snapshot_note = f"; a trial's final state median {snapshot * 1e-3:.1f} kB" if snapshot else ""
    print(f"  world archive             {archive * mb:.2f} MB (mean world zip){snapshot_note}")
    print(
        f"  artifacts per trial / world archive  {_range(summary['artifact_share_of_world_archive'], '{:.1%}')} "
        f"(its folder + its share of the worlds over {PAPER_TRIALS:,} trials; this run alone: "
        f"{_range(summary['this_run_share_of_world_archive'], '{:.1%}')})"
    )
    paper = summary["paper"]
    print(
        f"  at {PAPER_TRIALS:,} trials: {_range(paper['cpu_hours'], '{:.1f}')} CPU-hours, "
        f"{_range(paper['gigabytes'], '{:.1f}')} GB stored, upload at {paper['bandwidth_mbit_s']:g} Mbit/s "
        f"{_range(paper['upload_s_per_trial'], '{:.2f}')} s per trial = {_range(paper['upload_hours'], '{:.1f}')} "
        f"pod-hours"
    )
    targets = summary["targets"]
    cpu = targets["cpu_s_per_trial"]
    share = targets["artifact_share_of_world_archive"]
    print(
        f"  target CPU per trial <= {cpu['target']} s: {'PASS' if cpu['met'] else 'FAIL'}; "
        f"target artifacts per trial <= {share['target']:.0%} of a world archive: {'PASS' if share['met'] else 'FAIL'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=480, help="tasks (= trials) per run; default 480")
    parser.add_argument("--worlds", type=int, default=33)
    parser.add_argument("--repeat", type=int, default=1, help="runs, for ranges")
    parser.add_argument("--concurrency", type=int, default=4, help="trials at a time")
    parser.add_argument("--bandwidth-mbit", type=float, default=100.0, help="a pod's upload bandwidth")
    parser.add_argument(
        "--benchmark", type=Path, help="keep the generated benchmark here (reused when it fits)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="atoll-paper-") as scratch:
        where = args.benchmark or Path(scratch) / "paper"
        benchmark = _ready_benchmark(where, worlds=args.worlds, tasks=args.tasks, seed=args.seed)
        print(describe(benchmark), flush=True)
        loop_s = loop_cpu_s()
        print(
            f"machine: ten million CPython additions take {loop_s:.2f} CPU-s (benchmarks/machine.py)",
            flush=True,
        )
        runs = []
        for number in range(args.repeat):
            runs.append(measure_once(benchmark, args.concurrency))
            run = runs[-1]
            print(
                f"run {number + 1}/{args.repeat}: {run['trials']} trials in {run['wall_s']:.0f} s, "
                f"{run['cpu_s_per_trial']:.2f} CPU-s per trial, {run['artifact_bytes_per_trial'] / 1e6:.3f} MB per trial",
                flush=True,
            )
        summary = summarise(runs, world_archive_bytes(benchmark), args.bandwidth_mbit)
    print_report(runs, summary, args.concurrency)
    per_trial = [run["cpu_s_per_trial"] for run in runs]
    print(
        f"  CPU per trial / the machine's loop  {min(per_trial) / loop_s:.2f}–{max(per_trial) / loop_s:.2f}"
    )
    if args.json:
        payload = {
            "machine": {
                "loop_cpu_s": loop_s,
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "scratch_filesystem": scratch_filesystem(Path(tempfile.gettempdir())),
            },
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "arguments": {
                "tasks": args.tasks,
                "worlds": args.worlds,
                "repeat": args.repeat,
                "concurrency": args.concurrency,
                "seed": args.seed,
            },
            "runs": runs,
            **summary,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    not_passed = [run for run in runs if run["passed"] != run["trials"]]
    for number, run in enumerate(runs, 1):
        for why in run["not_passed"]:
            print(f"  run {number}: not passed: {why}")
    if not_passed:
        print(
            f"paper scale: the replay agent did not pass every trial ({not_passed[0]['passed']} of {not_passed[0]['trials']})"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
