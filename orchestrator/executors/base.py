"""What an executor is: something that turns one TrialSpec into one TrialResult."""

from __future__ import annotations

from typing import Protocol

from atoll.errors import CodedError
from atoll.trial import TrialResult, TrialSpec


class InfraError(CodedError):
    """A failure of our own machinery (environment, storage, grader crash): retried, and
    reported as ``infra_error`` if it persists — never scored as the agent's failure."""

    code = "infra_error"


class ModelEndpointError(InfraError):
    """A model call of the trial (agent or judge) failed on the model side, past its
    retries. ``configuration`` marks an endpoint that cannot work as configured (bad key,
    unknown model, nothing listening at its api_base): retrying the trial will not help,
    and a rate of them aborts the run."""

    def __init__(self, message: str, *, configuration: bool = False) -> None:
        super().__init__(message)
        self.configuration = configuration


class Executor(Protocol):
    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        """Run, grade and store one trial. Raise InfraError for infrastructure failures."""
        ...

    async def aclose(self) -> None: ...
