"""mcp_servers._core exports its names lazily: every one resolves to what its module defines."""

from __future__ import annotations

import importlib

import pytest

import mcp_servers._core as core


def test_every_exported_name_resolves_to_its_module_s_object() -> None:
    assert sorted(core.__all__) == sorted(core._EXPORTS)
    for name, module_name in core._EXPORTS.items():
        module = importlib.import_module(module_name)
        expected = module if module_name == f"mcp_servers._core.{name}" else getattr(module, name)
        assert getattr(core, name) is expected, name
    assert set(core.__all__) <= set(dir(core))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        core.NoSuchThing  # noqa: B018
