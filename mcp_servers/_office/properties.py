"""The core properties (title, author, …) that both Office servers write into new files."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class CoreProperties(BaseModel):
    """Core properties; each field is the attribute of the same name on python-docx's and
    python-pptx's ``core_properties``. Servers subclass it to give it their own schema title."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    title: str | None = None
    author: str | None = None
    subject: str | None = None
    keywords: str | None = None
    comments: str | None = None
    category: str | None = None


def write_core_properties(package: Any, metadata: CoreProperties | None, default_author: str | None) -> None:
    """Set ``package``'s core properties: ``default_author`` as author and last modifier,
    then every field ``metadata`` gives (an author there wins)."""
    properties = package.core_properties
    if default_author:
        properties.author = default_author
        properties.last_modified_by = default_author
    if metadata is None:
        return
    for name, value in metadata.model_dump(exclude_none=True).items():
        setattr(properties, name, value)
