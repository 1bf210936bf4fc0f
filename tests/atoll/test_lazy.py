"""atoll._lazy: a package's names and a heavy module imported on first use, not before."""

from __future__ import annotations

import sys

import pytest

from atoll._lazy import lazy_attributes, lazy_module


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A throwaway package ``lazypkg`` with a submodule ``heavy`` that records its import."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "heavy.py").write_text("IMPORTED = True\ndef answer():\n    return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lazypkg"
    for name in [name for name in sys.modules if name.startswith("lazypkg")]:
        del sys.modules[name]


def test_a_packages_names_load_on_first_use_and_stay(package):
    namespace: dict = {}
    getattr_, dir_ = lazy_attributes(
        package, {"answer": f"{package}.heavy", "heavy": f"{package}.heavy"}, namespace
    )
    assert f"{package}.heavy" not in sys.modules and dir_() == ["answer", "heavy"]
    assert getattr_("answer")() == 42
    assert getattr_("heavy") is sys.modules[f"{package}.heavy"]  # a submodule: the module itself
    assert set(namespace) == {"answer", "heavy"}  # kept: no second lookup
    with pytest.raises(AttributeError, match="'lazypkg' has no attribute 'missing'"):
        getattr_("missing")


def test_a_lazy_module_imports_on_the_first_attribute_read(package):
    heavy = lazy_module(f"{package}.heavy")
    assert f"{package}.heavy" not in sys.modules and "not loaded" in repr(heavy)
    assert heavy.answer() == 42 and heavy.IMPORTED
    assert f"{package}.heavy" in sys.modules and "(loaded)" in repr(heavy)
