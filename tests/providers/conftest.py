"""The emulator fixtures every provider test module shares.

A test module names its emulator class as ``EMULATOR`` and the script each test starts with as
``SCRIPT`` (a list or a callable); ``emu`` is then one emulator serving the whole module, its
records cleared and that script loaded again before each test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers._server import ProviderEmulator


@pytest.fixture(scope="module")
def module_emulator(request: pytest.FixtureRequest) -> Iterator[ProviderEmulator]:
    with request.module.EMULATOR(request.module.SCRIPT) as emulator:
        yield emulator


@pytest.fixture
def emu(module_emulator: ProviderEmulator, request: pytest.FixtureRequest) -> ProviderEmulator:
    module_emulator.reset()
    module_emulator.load(request.module.SCRIPT)
    return module_emulator
