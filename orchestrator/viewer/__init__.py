"""``atoll view``: a web viewer over the trial store and the artifact store.

Importing this package starts nothing; :func:`create_app` builds the FastAPI app and the
functions of :mod:`orchestrator.viewer.data` and :mod:`orchestrator.viewer.trial` give the
same data without HTTP.
"""

from orchestrator.viewer.app import create_app
from orchestrator.viewer.data import list_runs, run_detail, run_trials
from orchestrator.viewer.trial import trial_detail

__all__ = ["create_app", "list_runs", "run_detail", "run_trials", "trial_detail"]
