"""Pieces of Archipelago's data requests that atoll's routes share (``environment/runner/data``).

Archipelago's clients may send per-request object-store credentials and lifecycle hooks (shell
commands run before a snapshot or after a populate). Credentials are honoured; hooks are
refused with a reason, never silently skipped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SecretStr

from atoll.errors import ErrorCode
from atoll.http import http_error


class S3Credentials(BaseModel):
    """Archipelago's per-request credentials; used over ``ATOLL_STORAGE_OPTIONS`` for that request."""

    access_key_id: str
    secret_access_key: SecretStr
    session_token: SecretStr | None = None
    region: str | None = None

    def storage_options(self, base: dict[str, Any]) -> dict[str, Any]:
        """fsspec/s3fs options: ``base`` (endpoint and the rest) with these credentials."""
        options = {**base, "key": self.access_key_id, "secret": self.secret_access_key.get_secret_value()}
        if self.session_token is not None:
            options["token"] = self.session_token.get_secret_value()
        if self.region:
            options["client_kwargs"] = {**base.get("client_kwargs", {}), "region_name": self.region}
        return options


def storage_options_for(credentials: S3Credentials | None, base: dict[str, Any]) -> dict[str, Any] | None:
    """The options a request's credentials call for, or None (use the settings' own)."""
    return credentials.storage_options(base) if credentials is not None else None


def refuse_hooks(hooks: Any, field_name: str) -> None:
    """400 ``hooks_unsupported`` when a request carries lifecycle hooks."""
    if hooks:
        raise http_error(
            ErrorCode.hooks_unsupported,
            f"{field_name} is not supported: atoll runs no shell commands in the environment "
            "(its app servers keep their state in the world's files, so there is nothing to dump or load)",
        )
