"""atoll.cache_paths: the one cache-folder resolver, and its users reading it."""

from __future__ import annotations

from pathlib import Path

import pytest

from atoll.cache_paths import cache_path, cache_root
from mcp_servers._core import schema_cache
from orchestrator.spool import default_spool_dir


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in ("ATOLL_CACHE_DIR", "XDG_CACHE_HOME", "ATOLL_SPOOL_DIR", "ATOLL_SCHEMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_the_cache_folder_is_atolls_own_then_xdgs_then_the_homes(clean_env, tmp_path):
    assert cache_root() == tmp_path / "home" / ".cache" / "atoll"
    clean_env.setenv("XDG_CACHE_HOME", "relative/cache")  # invalid by the XDG spec: ignored
    assert cache_root() == tmp_path / "home" / ".cache" / "atoll"
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "atoll"
    clean_env.setenv("ATOLL_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


def test_every_user_resolves_under_the_same_folder_unless_its_own_variable_is_set(clean_env, tmp_path):
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "xdg" / "atoll"
    assert schema_cache.cache_dir() == root / "tool-schemas"
    assert default_spool_dir() == root / "spool"
    assert cache_path("hf-overlays") == root / "hf-overlays"
    clean_env.setenv("ATOLL_SPOOL_DIR", str(tmp_path / "spool"))
    clean_env.setenv("ATOLL_SCHEMA_CACHE", "off")
    assert default_spool_dir() == Path(tmp_path / "spool")
    assert schema_cache.cache_dir() is None
