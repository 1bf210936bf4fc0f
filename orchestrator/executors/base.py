"""What an executor is: something that turns one TrialSpec into one TrialResult."""

from __future__ import annotations

from typing import Protocol

from atoll.errors import CodedError, ErrorCode
from atoll.trial import TrialResult, TrialSpec


class InfraError(CodedError):
    """A failure of our own machinery (environment, storage, grader crash): retried, and
    reported as ``infra_error`` if it persists — never scored as the agent's failure."""

    code = ErrorCode.infra_error


class ModelEndpointError(InfraError):
    """A model call of the trial (agent or judge) failed on the model side, past its
    retries. ``configuration`` marks an endpoint that cannot work as configured (bad key,
    unknown model, nothing listening at its api_base): retrying the trial will not help,
    and a rate of them aborts the run."""

    def __init__(self, message: str, *, configuration: bool = False) -> None:
        super().__init__(message)
        self.configuration = configuration


def failure_message(exc: BaseException) -> str:
    """How a failed attempt's error is recorded: our errors' own words, any other exception
    (our bug) with its type."""
    return str(exc) if isinstance(exc, InfraError) else f"{type(exc).__name__}: {exc}"


def attach_result(exc: BaseException, result: TrialResult) -> None:
    """Give the exception that failed an attempt the ``infra_error`` result that keeps the
    attempt's evidence (its trajectory so far, duration, error), for the scheduler to record."""
    exc.trial_result = result  # type: ignore[attr-defined]


def attached_result(exc: BaseException) -> TrialResult | None:
    """The result :func:`attach_result` gave ``exc``, or None."""
    result = getattr(exc, "trial_result", None)
    return result if isinstance(result, TrialResult) else None


class Executor(Protocol):
    async def run(self, spec: TrialSpec, *, attempt: int) -> TrialResult:
        """Run, grade and store one trial. Raise InfraError for infrastructure failures, with
        the attempt's evidence attached (:func:`attach_result`) where it has any."""
        ...

    async def aclose(self) -> None: ...
