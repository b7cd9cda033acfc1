"""Takes a screenshot of each page of the web console into a directory
(docs/ in the repository: docs/console.md shows them), with the browser tests'
set-up: a real hourglassd loaded by browser.load(), headless Chromium.

    cmake --build build/dev --target console_screenshots

runs it with the environment it needs (HOURGLASSD, PYTHONPATH).
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
from pathlib import Path

from selenium.webdriver.common.by import By

from browser import console_url, load, show, start_browser, wait_for
from helpers import Daemon

# (file name, page, element that shows once the page is ready)
PAGES = [
    ("console-overview.png", "#/", '#topics tr[data-topic="orders"]'),
    ("console-topic.png", "#/topic/orders", "#groups tr[data-group=billing]"),
    ("console-messages.png", "#/messages/orders?state=SCHEDULED&size=10",
     '#messages tr[data-id="order-000"]'),
    ("console-message.png", "#/message/orders/order-003", "#payload"),
]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        daemon = Daemon(os.environ["HOURGLASSD"], Path(tmp) / "data",
                        ["--max_attempts=1"])
        daemon.start()
        loaded = load(daemon)
        driver = start_browser(width=1280, height=900)
        try:
            base = console_url(daemon)
            for name, page, ready in PAGES:
                show(driver, base, page, ready)
                if name == "console-topic.png":
                    wait_for(driver, "#schedule-status")
                if name == "console-message.png":
                    driver.find_element(By.ID, "show-hex").click()
                    wait_for(driver, '#payload[data-format="hex"]')
                # The whole page, beyond the window's height.
                height = driver.execute_script(
                    "return document.documentElement.scrollHeight")
                shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
                    "format": "png", "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": 1280,
                             "height": max(height, 600), "scale": 1}})
                (out / name).write_bytes(base64.b64decode(shot["data"]))
                print(out / name)
        finally:
            driver.quit()
            assert loaded.client is not None
            loaded.client.close()
            daemon.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs"))
