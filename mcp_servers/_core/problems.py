"""Data problems of a server's app data (a broken file, a link out of it), logged once each."""

from __future__ import annotations

import logging
import threading


class ProblemLog:
    """Logs each distinct problem once, as a warning on ``logger``.

    Listings meet the same bad file again and again; the log should name it once per
    server. Safe to use from several threads.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def report(self, problem: str) -> None:
        """Log ``problem`` unless it was already logged."""
        with self._lock:
            if problem in self._seen:
                return
            self._seen.add(problem)
        self._logger.warning("%s", problem)
