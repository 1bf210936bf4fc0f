"""Loading a script of benchmarks/ in a test, to check that it keeps working.

The scripts are not a package, and some edit ``sys.path`` when imported (benchmarks/environment.py
is named like the package it measures): each is loaded by path under ``benchmark_<name>`` and
``sys.path`` is left as it was.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module (loaded once per test process)."""
    module_name = f"benchmark_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    finally:
        sys.path[:] = saved
    return module
