"""The grader: snapshot diffs, evidence routing, programmatic checks and a fenced LLM judge.

Public API::

    from grader import grade_trial, JudgeConfig, VerdictCache
    grade = await grade_trial(task, "before.tar.gz", "after.tar.gz", trajectory, JudgeConfig(model=...), cache)

See docs/grader.md.
"""

from atoll.judge import PROMPT_VERSION
from grader.cache import VerdictCache
from grader.diff import Artifact, WorldDiff, diff_snapshots
from grader.extract import Extracted, ExtractOptions, extract
from grader.grading import final_answer, grade_trial, grade_trial_sync, open_world
from grader.judge import JudgeConfig
from grader.regrade import RegradeReport, regrade
from grader.snapshot import ManifestSnapshot, Snapshot, open_snapshot

__all__ = [
    "PROMPT_VERSION",
    "Artifact",
    "ExtractOptions",
    "Extracted",
    "JudgeConfig",
    "ManifestSnapshot",
    "RegradeReport",
    "Snapshot",
    "VerdictCache",
    "WorldDiff",
    "diff_snapshots",
    "extract",
    "final_answer",
    "grade_trial",
    "grade_trial_sync",
    "open_snapshot",
    "open_world",
    "regrade",
]
