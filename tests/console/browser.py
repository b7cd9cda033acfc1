"""What the web console's browser tests and its screenshot script share: a
real hourglassd (the Python client tests' helpers.Daemon) with a broker
loaded with known messages, and headless Chromium from Debian's packages
driven by Selenium through Debian's chromedriver.

Nothing here sleeps to synchronise: every wait is for a condition, with a
deadline (WebDriverWait, helpers.eventually).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Dict, List, Optional

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

import hourglass
from helpers import WAIT, Daemon, admin, eventually
from hourglass.v1 import admin_pb2

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

_CONSOLE = re.compile(r"serving the web console on \S+ \(port (\d+)\)")


def console_url(daemon: Daemon) -> str:
    """The console's address, from the port the daemon logged."""
    return f"http://127.0.0.1:{daemon.await_log(_CONSOLE).group(1)}/"


def start_browser(width: int = 1280, height: int = 900) -> WebDriver:
    """Headless Chromium with its console log kept (browser_errors)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--lang=en-US",
                     "--force-device-scale-factor=1",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER),
                            options=options)


def browser_errors(driver: WebDriver) -> List[str]:
    """The errors in the browser's console since the last call."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE"]


def wait_for(driver: WebDriver, css: str) -> WebElement:
    """The element `css` selects, once it is visible."""
    return WebDriverWait(driver, WAIT).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def wait_for_text(driver: WebDriver, css: str, text: str) -> WebElement:
    """The element `css` selects, once its text is exactly `text`."""
    def has_text(d: WebDriver) -> Optional[WebElement]:
        for element in d.find_elements(By.CSS_SELECTOR, css):
            if element.is_displayed() and element.text == text:
                return element
        return None
    try:
        # A re-rendered page replaces elements under the check.
        return WebDriverWait(
            driver, WAIT,
            ignored_exceptions=(StaleElementReferenceException,)).until(has_text)
    except Exception as error:
        seen = [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]
        raise AssertionError(f"{css} never read {text!r}; it reads {seen}") \
            from error


def show(driver: WebDriver, base: str, page: str, ready_css: str) -> None:
    """Opens `page` (a hash such as "#/topic/orders") of the console at
    `base` and waits until `ready_css` is visible."""
    driver.get(base + page)
    wait_for(driver, ready_css)


def confirm(driver: WebDriver, answer: bool, question: str) -> None:
    """Answers the console's confirmation dialog, which must ask
    `question`."""
    wait_for_text(driver, "#confirm-text", question)
    driver.find_element(
        By.ID, "confirm-yes" if answer else "confirm-no").click()


@dataclass
class Loaded:
    """What load() put into the broker."""
    #: Ids of the scheduled messages of "orders", in due order.
    scheduled: List[str] = field(default_factory=list)
    #: Ids of the dead letters of "payments".
    dead: List[str] = field(default_factory=list)
    #: The client whose subscription holds a delivery in flight; close it
    #: after the test.
    client: Optional[hourglass.Client] = None


def load(daemon: Daemon, token: Optional[str] = None) -> Loaded:
    """Loads the broker, which runs with --max_attempts=1: "orders" has 25
    messages scheduled over the next days (headers on each, a binary
    payload on "order-003", a deadline on "order-007"), and group "billing" with one delivery in
    flight and one ready; "payments" has two dead letters, in
    "payments.dlq", and group "ledger"."""
    loaded = Loaded()
    client = loaded.client = hourglass.Client(daemon.address, token=token)
    for i in range(25):
        payload = bytes(range(0, 40)) if i == 3 else \
            f'{{"order": {i}, "total": "{i * 7}.50 EUR"}}'.encode()
        # One with a deadline, which the message page shows.
        deadline = {"ttl": timedelta(days=30), "on_expire": "dead_letter"} \
            if i == 7 else {}
        loaded.scheduled.append(client.publish(
            "orders", payload, id=f"order-{i:03d}",
            delay=timedelta(hours=1 + 3 * i, minutes=i),
            headers={"customer": f"c-{i % 4}", "source": "web"},
            **deadline).id)
    billing = client.subscribe("orders", "billing", max_in_flight=1,
                               ack_timeout=timedelta(hours=1))
    client.publish("orders", b"due now 1", id="now-1")
    client.publish("orders", b"due now 2", id="now-2")
    assert billing.receive(WAIT) is not None
    # Not acknowledged within a second: with --max_attempts=1, dead.
    with client.subscribe("payments", "ledger",
                          ack_timeout=timedelta(seconds=1)) as ledger:
        for i in range(2):
            loaded.dead.append(client.publish(
                "payments", f"payment {i}".encode(), id=f"pay-{i}").id)
        assert ledger.receive(WAIT) is not None
        assert ledger.receive(WAIT) is not None
        eventually(lambda: stats(daemon, token)["payments"].dead_lettered == 2,
                   "two dead letters of payments")
    eventually(lambda: stats(daemon, token)["orders"].ready == 1,
               "one message of orders ready")
    return loaded


def stats(daemon: Daemon, token: Optional[str] = None
          ) -> Dict[str, admin_pb2.TopicStats]:
    """GetStats of every topic, through the gRPC Admin service."""
    stub, channel = admin(daemon, token)
    with channel:
        response = call(stub.GetStats, admin_pb2.GetStatsRequest(), token)
    return {t.topic: t for t in response.topics}


def call(method, request, token: Optional[str] = None):
    """An Admin RPC of a stub from helpers.admin(daemon, token): with a
    token its calls have their deadline already."""
    return method(request) if token else method(request, timeout=WAIT)
