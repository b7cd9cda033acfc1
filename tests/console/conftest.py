"""Fixtures of the web console's browser tests (browser.py has the
harness). HOURGLASSD names the hourglassd under test (ctest sets it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from browser import Loaded, load, start_browser
from helpers import Daemon


@pytest.fixture(scope="module")
def hourglassd() -> str:
    path = os.environ.get("HOURGLASSD")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"HOURGLASSD={path!r} is not an executable hourglassd")
    return path


@pytest.fixture(scope="module")
def chromium() -> Iterator[WebDriver]:
    """One headless Chromium for the module's tests (starting one takes
    about a second)."""
    driver = start_browser()
    yield driver
    driver.quit()


@pytest.fixture
def browser(chromium: WebDriver) -> Iterator[WebDriver]:
    """The module's Chromium on a blank page, its console log emptied of
    earlier tests' lines. Left on a blank page after the test too: a
    console page refreshes itself, and would log errors once its
    hourglassd is stopped."""
    chromium.get("about:blank")
    chromium.get_log("browser")
    yield chromium
    chromium.get("about:blank")


@pytest.fixture
def daemon(hourglassd: str, tmp_path: Path) -> Iterator[Daemon]:
    """A plaintext hourglassd without tokens, --max_attempts=1 (load()
    makes dead letters), stopped and checked to exit 0 after the test."""
    d = Daemon(hourglassd, tmp_path / "data", ["--max_attempts=1"])
    d.start()
    yield d
    code = d.stop()
    assert code == 0, f"hourglassd exited {code}:\n{d.output()}"


@pytest.fixture
def loaded(daemon: Daemon) -> Iterator[Loaded]:
    """`daemon` loaded by browser.load()."""
    result = load(daemon)
    yield result
    assert result.client is not None
    result.client.close()
