"""Workers sharing a machine share its seed cache: processes preparing the same seed at once
build it once, and trials populate from it without ever seeing it half-built or removed."""

from __future__ import annotations

import asyncio
import multiprocessing
import tempfile
from pathlib import Path

from orchestrator.executors.local import SeedCache
from orchestrator.executors.seeds import seed_key
from tests.atoll import apex_replica as replica

PROCESSES = 6


def _trial(benchmark_dir: Path):
    return replica.file_task_trial(benchmark_dir, "seeds")


def _worker(seeds: str, benchmark_dir: str, builds: str, barrier, results) -> None:
    """One worker process: prepare the seed at the same moment as the others, then populate a
    fresh world from it (as a trial does) and report the digests it saw."""
    from environment.populate import PopulateSource, Subsystem, WorldRoots, populate
    from environment.snapshot import build_manifest

    benchmark, trial = _trial(Path(benchmark_dir))
    build = SeedCache._build

    def counted(self, *args):
        with open(builds, "a") as log:
            log.write("build\n")
        return build(self, *args)

    SeedCache._build = counted
    barrier.wait()
    try:
        cache = SeedCache(Path(seeds))
        seed = asyncio.run(cache.get(trial, benchmark))
        with tempfile.TemporaryDirectory() as scratch:
            roots = WorldRoots(Path(scratch) / "fs", Path(scratch) / "apps")
            roots.fs_root.mkdir()
            roots.apps_data_root.mkdir()
            populate(
                [PopulateSource(Subsystem.parse("world"), url=seed.folder.as_uri())], roots, mode="replace"
            )
            populated = build_manifest(roots).digest()
        # Its full archive, written on demand by whichever process asks first, is that world too.
        archive = asyncio.run(cache.archive(seed))
        results.put(("ok", seed.digest, populated, archive.is_file()))
    except Exception as exc:  # the race shows up as any error; report it, do not hide it
        results.put(("error", f"{type(exc).__name__}: {exc}", None, None))


def _race(seeds: Path, benchmark_dir: Path, builds: Path) -> list[tuple]:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(PROCESSES), context.Queue()
    processes = [
        context.Process(target=_worker, args=(str(seeds), str(benchmark_dir), str(builds), barrier, results))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    return outcomes


def _builds(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_processes_preparing_one_seed_at_once_build_it_once_and_populate_from_it(tmp_path):
    benchmark_dir = replica.write_v11_directory(tmp_path / "v11")
    seeds, builds = tmp_path / "seeds", tmp_path / "builds.log"
    digests = set()
    for _ in range(2):  # the second wave finds the seed built and must not touch it
        outcomes = _race(seeds, benchmark_dir, builds)
        errors = [outcome[1] for outcome in outcomes if outcome[0] != "ok"]
        assert not errors, errors
        digests |= {digest for _, digest, _, _ in outcomes} | {populated for _, _, populated, _ in outcomes}
        assert all(has_archive for *_, has_archive in outcomes)
    assert len(digests) == 1  # one seed, and every populated world reproduces it
    assert _builds(builds) == 1
    assert not list(seeds.glob(".*"))  # no staging left behind


async def test_a_seed_left_half_built_by_a_crashed_process_is_rebuilt(tmp_path):
    benchmark, trial = _trial(replica.write_v11_directory(tmp_path / "v11"))
    digest = (await SeedCache(tmp_path / "fresh").get(trial, benchmark)).digest
    cache = SeedCache(tmp_path / "seeds")
    folder = cache.root / seed_key(trial)
    (folder / "filesystem").mkdir(parents=True)  # a build killed mid-populate: no digest file
    (folder / "filesystem" / "partial.txt").write_text("half")
    (cache.root / f".{folder.name}.crashed").mkdir()  # and its staging folder
    again = await cache.get(trial, benchmark)
    assert (again.folder, again.digest) == (folder, digest)
    assert not (folder / "filesystem" / "partial.txt").exists()
    assert (folder / "filesystem" / "Contracts" / "supply_agreement.txt").is_file()
    assert not list(cache.root.glob(f".{folder.name}.*"))
