"""One emulator per provider for a test module, as the fixtures ``anthropic``, ``gemini`` and
``openai`` (a pytest plugin, loaded by tests/conftest.py): each serves from the module's first
test that asks for it to its last; a test loads its own script (and resets the records)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.anthropic import AnthropicEmulator
from tests.providers.gemini import GeminiEmulator
from tests.providers.openai import OpenAIEmulator


@pytest.fixture(scope="module")
def anthropic() -> Iterator[AnthropicEmulator]:
    with AnthropicEmulator([]) as emu:
        yield emu


@pytest.fixture(scope="module")
def gemini() -> Iterator[GeminiEmulator]:
    with GeminiEmulator([]) as emu:
        yield emu


@pytest.fixture(scope="module")
def openai() -> Iterator[OpenAIEmulator]:
    with OpenAIEmulator([]) as emu:
        yield emu
