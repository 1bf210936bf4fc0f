"""The run page shows reasoning and cached tokens: per agent in the leaderboard, per trial in the
table (headless Chromium, as test_viewer_browser.py)."""

import pytest

from tests.orchestrator.test_token_columns import _store

from .conftest import serve
from .test_viewer_browser import page  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


def test_the_run_page_shows_reasoning_and_cached_tokens(page, tmp_path):  # noqa: F811
    store = _store(tmp_path)
    try:
        with serve(store) as url:
            page.goto(url + "/runs/exp")
            page.wait_for_selector("#leaderboard")
            board = page.locator("#leaderboard").inner_text()
            assert "11600 (1200 reasoning, 8192 cached, 600 cache writes)" in board
            headers = page.locator("#trial-table thead").inner_text()
            assert "Reasoning" in headers and "Cached" in headers
            thinker = page.locator("#trial-table tbody tr", has_text="thinker").first.inner_text()
            assert "5800" in thinker and "600" in thinker and "4096" in thinker
            assert page.errors == []
    finally:
        store.dispose()
