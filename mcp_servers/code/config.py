"""The code server's settings, read and checked in one place, :class:`CodeOptions`: a server
option wins, then the environment variable ``ATOLL_CODE_<NAME>``, then the default.

An unknown option or ``ATOLL_CODE_*`` variable, or a value of the wrong type, is an
:class:`~mcp_servers._core.options.InvalidOption` naming the option or the variable (an
empty variable counts as unset).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError

from atoll.errors import first_problem
from atoll.settings import environ as process_environ
from mcp_servers._core.options import InvalidOption, ServerOptions

ENV_PREFIX = "ATOLL_CODE_"
DEFAULT_CONCURRENCY = 8


@dataclass(frozen=True)
class SandboxLimits:
    """The limits of one ``code_exec`` call (the defaults of :class:`CodeOptions`)."""

    timeout_s: float = 300.0
    cpu_s: int = 600
    memory_mb: int = 4096
    max_processes: int = 256
    max_file_mb: int = 1024
    max_write_mb: int = 2048
    max_world_mb: int = 10240
    max_world_entries: int = 200_000
    tmp_mb: int = 512
    max_output_chars: int = 100_000
    cpu_weight: int = 50


_LIMITS = SandboxLimits()
#: The fields of :class:`SandboxLimits` other than the timeout, all integers.
_INT_LIMITS = ("cpu_s", "memory_mb", "max_processes", "max_file_mb", "max_write_mb", "max_world_mb",
               "max_world_entries", "tmp_mb", "max_output_chars", "cpu_weight")  # fmt: skip


class CodeOptions(ServerOptions):
    """Options of the code server (``/apps`` ``options``, ``atoll mcp code`` flags, or
    ``ATOLL_CODE_<NAME>``): the limits of one call, concurrency and how the sandbox is built.
    Read them with :meth:`resolve`."""

    timeout_s: float = Field(_LIMITS.timeout_s, gt=0, description="wall-clock limit of one command, s")
    cpu_s: int = Field(_LIMITS.cpu_s, ge=1, description="CPU seconds per process")
    memory_mb: int = Field(_LIMITS.memory_mb, ge=1)
    max_processes: int = Field(_LIMITS.max_processes, ge=1)
    max_file_mb: int = Field(_LIMITS.max_file_mb, ge=1)
    max_write_mb: int = Field(_LIMITS.max_write_mb, ge=1, description="bytes one call may add to the world")
    max_world_mb: int = Field(_LIMITS.max_world_mb, ge=1)
    max_world_entries: int = Field(
        _LIMITS.max_world_entries, ge=1, description="files, folders and links the world may hold"
    )
    tmp_mb: int = Field(_LIMITS.tmp_mb, ge=1)
    max_output_chars: int = Field(_LIMITS.max_output_chars, ge=1)
    cpu_weight: int = Field(_LIMITS.cpu_weight, ge=1)
    max_concurrent: int = Field(DEFAULT_CONCURRENCY, ge=1, description="commands run at once")
    bwrap_path: str = Field("bwrap", min_length=1)
    proc_mode: Literal["auto", "procfs", "minimal-proc"] = "auto"
    trust_outer_sandbox: bool = Field(False, description="run without bubblewrap (gVisor/Kata only)")
    sandbox_user: str | None = Field(None, min_length=1, description="host user a root server drops to")
    sandbox_uid: int | None = Field(None, ge=1, description="with sandbox_gid: host ids instead of a user")
    sandbox_gid: int | None = Field(None, ge=1)
    sandbox_uids: str | None = Field(
        None, min_length=3, description="FIRST-LAST: host uids a root server gives one to each run"
    )
    sandbox_state_dir: str = Field(
        "/run/atoll-sandbox-uids", min_length=1, description="root-only folder of the uid leases' locks"
    )

    @classmethod
    def resolve(
        cls, options: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> CodeOptions:
        """The settings in force: ``options`` (None values count as not given) over the
        ``ATOLL_CODE_*`` variables of ``environ`` (default: the process environment) over the defaults.

        Raises InvalidOption naming the unknown or invalid option or variable."""
        from_env = _from_environment(cls, process_environ() if environ is None else environ)
        given = {name: value for name, value in (options or {}).items() if value is not None}
        try:
            return cls.model_validate({**from_env, **given})
        except ValidationError as exc:
            name, message, kind = first_problem(exc, top="(all)")
            problem = "unknown option" if kind == "extra_forbidden" else message
            raise InvalidOption("code", name, f"{problem} (options of code: {_known(cls)})") from None

    def limits(self, timeout_s: float | None = None) -> SandboxLimits:
        """The limits of one call; ``timeout_s`` (the caller's) may only shorten the timeout."""
        timeout = min(timeout_s, self.timeout_s) if timeout_s else self.timeout_s
        return SandboxLimits(timeout_s=timeout, **{name: getattr(self, name) for name in _INT_LIMITS})


def _known(model: type[CodeOptions]) -> str:
    return ", ".join(sorted(set(model.model_fields) - set(ServerOptions.model_fields)))


def _from_environment(model: type[CodeOptions], environ: Mapping[str, str]) -> dict[str, str]:
    """The ``ATOLL_CODE_*`` settings of ``environ``, each checked on its own so that an error
    names the variable."""
    settings: dict[str, str] = {}
    for variable, value in sorted(environ.items()):
        if not variable.startswith(ENV_PREFIX) or not value.strip():
            continue
        name = variable[len(ENV_PREFIX) :].lower()
        if name not in model.model_fields or name in ServerOptions.model_fields:
            raise InvalidOption("code", variable, f"unknown setting (settings of code: {_known(model)})")
        try:
            model.model_validate({name: value.strip()})
        except ValidationError as exc:
            raise InvalidOption("code", variable, f"{first_problem(exc).message} (got {value!r})") from None
        settings[name] = value.strip()
    return settings
