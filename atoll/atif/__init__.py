"""ATIF, Harbor's Agent Trajectory Interchange Format: atoll trajectories out and in.

- :func:`to_atif` / :func:`atif_json`: an atoll trajectory as ATIF-v1.7 (``atoll export atif``,
  and the ``atif.json`` beside each trial's ``trajectory.json``).
- :func:`from_atif`: an ATIF trajectory (v1.0 to v1.8, from atoll or any harness) as an atoll
  trajectory; :func:`is_atif` tells one by its content. ``grader.inputs.load_trajectory`` reads
  either format (and Archipelago's) through these.
- :mod:`atoll.atif.models`: the ATIF schema as pydantic models.

What maps to what, and what is lost each way: docs/interop.md.
"""

from atoll.atif.export import atif_json, to_atif
from atoll.atif.imports import from_atif, parse_atif
from atoll.atif.models import ATIF_VERSION, AtifTrajectory, is_atif

__all__ = ["ATIF_VERSION", "AtifTrajectory", "atif_json", "from_atif", "is_atif", "parse_atif", "to_atif"]
