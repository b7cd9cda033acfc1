"""The web console in real headless Chromium against a real hourglassd:
its pages load without errors in the browser's console, show exactly what
the gRPC Admin service answers, change the broker through their actions as
the Admin service then shows, and show nothing without an admin token when
tokens are on; and that another site's page cannot use its API."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict, List

import grpc
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

import hourglass
from browser import (Loaded, browser_errors, call, confirm, console_url,
                     load, show, stats, wait_for, wait_for_text)
from helpers import WAIT, Daemon, admin, eventually, write_private
from hourglass.v1 import admin_pb2

ORDERS = '#topics tr[data-topic="orders"]'


def cells(row, fields: List[str]) -> Dict[str, str]:
    """The text of a table row's cells, by their data-field."""
    return {f: row.find_element(By.CSS_SELECTOR, f'[data-field="{f}"]').text
            for f in fields}


def column(driver: WebDriver, table: str, attribute: str) -> List[str]:
    """The data-`attribute` of every row of `table`, in order."""
    return [row.get_attribute(f"data-{attribute}") for row in
            driver.find_elements(By.CSS_SELECTOR, f"{table} tbody tr")]


def admin_list(daemon: Daemon, topic: str, state: int, page_size: int,
               page_token: str = "") -> admin_pb2.ListMessagesResponse:
    stub, channel = admin(daemon)
    with channel:
        return call(stub.ListMessages, admin_pb2.ListMessagesRequest(
            topic=topic, state=state, page_size=page_size,
            page_token=page_token))


def admin_message(daemon: Daemon, topic: str, id_: str
                  ) -> admin_pb2.MessageInfo:
    stub, channel = admin(daemon)
    with channel:
        return call(stub.GetMessage, admin_pb2.GetMessageRequest(
            topic=topic, id=id_, preview_bytes=1 << 20))


def test_each_page_loads_without_console_errors(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    base = console_url(daemon)
    for page, ready in [
            ("#/", ORDERS),
            ("#/topic/orders", "#schedule-status[data-total]"),
            ("#/topic/payments", '#dead tr[data-id="pay-0"]'),
            ("#/messages/orders", '#messages tr[data-id="order-000"]'),
            ("#/message/orders/order-003", "#payload"),
            ("#/message/payments.dlq/pay-1", "#redrive"),
            ("#/cluster", "#cluster-single")]:
        show(browser, base, page, ready)
        wait_for(browser, f"body[data-view]")
        assert browser_errors(browser) == [], page


def test_overview_and_topic_show_the_admin_apis_counts(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    base = console_url(daemon)
    expected = stats(daemon)
    fields = ["scheduled", "ready", "inFlight", "deadLettered", "groups"]

    def shown(topic: str) -> Dict[str, str]:
        t = expected[topic]
        return {"scheduled": str(t.scheduled), "ready": str(t.ready),
                "inFlight": str(t.in_flight),
                "deadLettered": str(t.dead_lettered),
                "groups": str(len(t.groups))}

    show(browser, base, "#/", ORDERS)
    assert column(browser, "#topics", "topic") == \
        ["orders", "payments", "payments.dlq"]
    for topic in expected:
        row = browser.find_element(By.CSS_SELECTOR,
                                   f'#topics tr[data-topic="{topic}"]')
        assert cells(row, fields) == shown(topic), topic
    assert shown("orders") == {"scheduled": "25", "ready": "1",
                               "inFlight": "1", "deadLettered": "0",
                               "groups": "1"}
    assert shown("payments")["deadLettered"] == "2"

    # Live: a message published now shows up without a reload.
    with hourglass.Client(daemon.address) as client:
        client.publish("orders", b"x", id="late", delay=timedelta(days=9))
    wait_for_text(browser, f'{ORDERS} [data-field="scheduled"]', "26")
    assert stats(daemon)["orders"].scheduled == 26

    show(browser, base, "#/topic/orders", "#groups tr[data-group=billing]")
    t = stats(daemon)["orders"]
    cards = browser.find_element(By.ID, "topic-counts")
    assert cells(cards, ["scheduled", "ready", "inFlight", "deadLettered"]) \
        == {"scheduled": str(t.scheduled), "ready": str(t.ready),
            "inFlight": str(t.in_flight), "deadLettered": "0"}
    billing = browser.find_element(By.CSS_SELECTOR,
                                   "#groups tr[data-group=billing]")
    g = t.groups[0]
    assert cells(billing, ["consumers", "ready", "inFlight"]) == {
        "consumers": str(g.consumers), "ready": str(g.ready),
        "inFlight": str(g.in_flight)} == {
        "consumers": "1", "ready": "1", "inFlight": "1"}

    show(browser, base, "#/topic/payments", '#dead tr[data-id="pay-1"]')
    dead = admin_list(daemon, "payments", admin_pb2.MESSAGE_STATE_DEAD, 100)
    assert column(browser, "#dead", "id") == [m.id for m in dead.messages] \
        == ["pay-0", "pay-1"]


def shown_schedule(driver: WebDriver):
    """The schedule the topic page shows: its request (from, to, bucket),
    the chart's counts and the table's rows (start, count) of the buckets
    that are not empty."""
    status = driver.find_element(By.ID, "schedule-status")
    request = {k: status.get_attribute(f"data-{k}")
               for k in ("from", "to", "bucket")}
    chart = driver.execute_script(
        "return Chart.getChart('schedule-chart').data.datasets[0].data")
    # The table is in a closed <details>: its text is not rendered.
    rows = [(row.get_attribute("data-start"),
             row.find_element(By.CSS_SELECTOR, '[data-field="count"]')
             .get_attribute("textContent"))
            for row in driver.find_elements(
                By.CSS_SELECTOR, "#schedule-buckets tbody tr[data-start]")]
    return request, chart, rows


def admin_schedule(daemon: Daemon, topic: str, request: Dict[str, str]
                   ) -> admin_pb2.GetScheduleResponse:
    query = admin_pb2.GetScheduleRequest(topic=topic)
    getattr(query, "from").FromJsonString(request["from"])
    query.to.FromJsonString(request["to"])
    query.bucket.FromJsonString(request["bucket"])
    stub, channel = admin(daemon)
    with channel:
        return call(stub.GetSchedule, query)


def test_topic_page_charts_the_schedule_the_admin_api_answers(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    base = console_url(daemon)
    show(browser, base, "#/topic/orders", "#schedule-status[data-total]")
    # Messages of orders come due 1h, 4h1m, 7h2m, ... 73h24m from load().
    for range_, bucket, seconds, due in [("24h", "1h", "3600s", 8),
                                         ("7d", "1d", "86400s", 25),
                                         ("6h", "5m", "300s", 2)]:
        Select(browser.find_element(By.ID, "schedule-range")) \
            .select_by_value(range_)
        Select(browser.find_element(By.ID, "schedule-bucket")) \
            .select_by_value(bucket)
        browser.find_element(By.ID, "schedule-show").click()
        WebDriverWait(browser, WAIT).until(
            lambda d: d.find_element(By.ID, "schedule-status")
            .get_attribute("data-bucket") == seconds)
        request, chart, rows = shown_schedule(browser)
        expected = admin_schedule(daemon, "orders", request)
        assert expected.total == due, (range_, bucket)
        assert chart == [b.count for b in expected.buckets]
        assert rows == [(b.start.ToJsonString(), str(b.count))
                        for b in expected.buckets if b.count > 0]
    assert browser_errors(browser) == []


def test_message_browser_pages_like_the_admin_api(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    base = console_url(daemon)
    show(browser, base, "#/messages/orders?state=SCHEDULED&size=10",
         '#messages tr[data-id="order-000"]')
    token = ""
    for page in range(1, 4):
        expected = admin_list(daemon, "orders",
                              admin_pb2.MESSAGE_STATE_SCHEDULED, 10, token)
        ids = [m.id for m in expected.messages]
        wait_for_text(browser, "#page-number", f"Page {page}")
        wait_for(browser, f'#messages tr[data-id="{ids[0]}"]')
        assert column(browser, "#messages", "id") == ids
        token = expected.next_page_token
        if page < 3:
            browser.find_element(By.ID, "next-page").click()
    assert ids == loaded.scheduled[20:]
    assert token == ""
    assert not browser.find_element(By.ID, "next-page").is_enabled()
    browser.find_element(By.ID, "prev-page").click()
    wait_for_text(browser, "#page-number", "Page 2")
    assert column(browser, "#messages", "id") == loaded.scheduled[10:20]

    # READY of group billing; then a due-time range of SCHEDULED.
    show(browser, base, "#/messages/orders?state=READY&group=billing",
         '#messages tr[data-id="now-2"]')
    assert column(browser, "#messages", "id") == ["now-2"]
    m3 = admin_message(daemon, "orders", "order-003")
    m5 = admin_message(daemon, "orders", "order-005")
    frm = m3.deliver_at.ToJsonString()
    to = m5.deliver_at.ToJsonString()
    show(browser, base, f"#/messages/orders?state=SCHEDULED&from={frm}&to={to}",
         '#messages tr[data-id="order-003"]')
    assert column(browser, "#messages", "id") == ["order-003", "order-004"]


def test_a_message_is_found_by_its_id(browser: WebDriver, daemon: Daemon,
                                      loaded: Loaded) -> None:
    base = console_url(daemon)
    show(browser, base, "#/messages/orders?state=SCHEDULED", "#find-id")
    browser.find_element(By.ID, "find-id").send_keys(" order-007 ")
    browser.find_element(By.ID, "find-open").click()
    wait_for(browser, "#payload")
    assert browser.current_url.endswith("#/message/orders/order-007")
    assert browser.find_element(By.ID, "payload").text == \
        admin_message(daemon, "orders", "order-007").payload_preview.decode()

    # An id the topic does not hold: the broker's NOT_FOUND, said on the page.
    show(browser, base, "#/messages/orders", "#find-id")
    browser.find_element(By.ID, "find-id").send_keys("no-such-id")
    browser.find_element(By.ID, "find-open").click()
    wait_for(browser, "#view-error")
    assert "no-such-id" in browser.find_element(By.ID, "view-error").text


def test_one_message_in_full(browser: WebDriver, daemon: Daemon,
                             loaded: Loaded) -> None:
    base = console_url(daemon)
    m = admin_message(daemon, "orders", "order-007")
    show(browser, base, "#/message/orders/order-007", "#payload")
    fields = browser.find_element(By.ID, "message-fields")
    assert cells(fields, ["state", "deliverAt", "deadline", "attempt",
                          "payloadSize"]) == {
        "state": "SCHEDULED",
        "deliverAt": m.deliver_at.ToJsonString().replace("T", " "),
        "deadline": m.deadline.expire_at.ToJsonString().replace("T", " ") +
        ", then dead-lettered",
        "attempt": "0", "payloadSize": str(len(m.payload_preview))}
    assert browser.find_element(By.ID, "payload").text == \
        '{"order": 7, "total": "49.50 EUR"}' == m.payload_preview.decode()
    assert column(browser, "#headers", "key") == ["customer", "source"]
    assert [e.text for e in browser.find_elements(
        By.CSS_SELECTOR, '#headers [data-field="value"]')] == \
        [m.headers["customer"], m.headers["source"]] == ["c-3", "web"]

    show(browser, base, "#/message/orders/order-003", "#payload")
    browser.find_element(By.ID, "show-hex").click()
    wait_for(browser, '#payload[data-format="hex"]')
    assert browser.find_element(By.ID, "payload").text.split("\n") == [
        "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  "
        "................",
        "00000010  10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f  "
        "................",
        "00000020  20 21 22 23 24 25 26 27                          "
        ' !"#$%&\'']

    # In flight in billing: its per-group state.
    show(browser, base, "#/message/orders/now-1",
         "#message-groups tr[data-group=billing]")
    row = browser.find_element(By.CSS_SELECTOR,
                               "#message-groups tr[data-group=billing]")
    g = admin_message(daemon, "orders", "now-1").groups[0]
    assert cells(row, ["state", "attempt", "redeliverAt"]) == {
        "state": "IN_FLIGHT", "attempt": "1",
        "redeliverAt": g.redeliver_at.ToJsonString().replace("T", " ")}


def test_cancel_reschedule_and_redrive_change_the_broker(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    base = console_url(daemon)
    # Cancel, declined first: nothing changes.
    show(browser, base, "#/message/orders/order-001", "#cancel")
    browser.find_element(By.ID, "cancel").click()
    confirm(browser, False, "Cancel message order-001 of orders? It will "
            "never be delivered.")
    wait_for_text(browser, "#notice", "Nothing done.")
    assert admin_message(daemon, "orders", "order-001").id == "order-001"
    browser.find_element(By.ID, "cancel").click()
    confirm(browser, True, "Cancel message order-001 of orders? It will "
            "never be delivered.")
    wait_for_text(browser, "#notice", "Cancelled message order-001.")
    with pytest.raises(grpc.RpcError) as missing:
        admin_message(daemon, "orders", "order-001")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert stats(daemon)["orders"].scheduled == 24
    # The page went on to the topic's messages, without order-001.
    wait_for(browser, '#messages tr[data-id="order-000"]')
    assert "order-001" not in column(browser, "#messages", "id")

    # Reschedule order-002 to 2 hours from now.
    show(browser, base, "#/message/orders/order-002", "#reschedule")
    browser.find_element(By.ID, "reschedule-delay").send_keys("2h")
    before = datetime.now(timezone.utc)
    browser.find_element(By.ID, "reschedule").click()
    confirm(browser, True,
            "Reschedule message order-002 of orders to be due in 2h?")
    notice = wait_for(browser, "#notice")
    m = admin_message(daemon, "orders", "order-002")
    due = m.deliver_at.ToDatetime(tzinfo=timezone.utc)
    after = datetime.now(timezone.utc)
    assert before + timedelta(hours=2) - timedelta(milliseconds=1) <= due \
        <= after + timedelta(hours=2)
    wait_for_text(browser, "#notice", "Rescheduled message order-002: now "
                  f"due at {m.deliver_at.ToJsonString().replace('T', ' ')}.")
    wait_for_text(browser, '#message-fields [data-field="deliverAt"]',
                  m.deliver_at.ToJsonString().replace("T", " "))
    assert notice.get_attribute("class") == ""

    # A bad delay is refused in the page; nothing is sent.
    browser.find_element(By.ID, "reschedule-delay").clear()
    browser.find_element(By.ID, "reschedule-delay").send_keys("soon")
    browser.find_element(By.ID, "reschedule").click()
    wait_for_text(browser, "#notice", "Give the new delay as a number and a "
                  "unit: 90s, 15m, 2h, 1d.")

    # Redrive one dead letter from its page, then all from the topic's.
    show(browser, base, "#/message/payments.dlq/pay-1", "#redrive")
    browser.find_element(By.ID, "redrive").click()
    confirm(browser, True, "Redrive dead letter pay-1 of payments back to "
            "payments, due now?")
    wait_for_text(browser, "#notice", "Redrove 1 dead letters to payments.")
    assert [m.id for m in admin_list(daemon, "payments",
                                     admin_pb2.MESSAGE_STATE_DEAD,
                                     10).messages] == ["pay-0"]
    wait_for(browser, '#dead tr[data-id="pay-0"]')  # On the topic's page.
    browser.find_element(By.ID, "redrive-all").click()
    confirm(browser, True, "Redrive every dead letter of payments back to "
            "payments, due now?")
    wait_for_text(browser, "#notice", "Redrove 1 dead letters to payments.")
    eventually(lambda: stats(daemon)["payments"].ready == 2,
               "both redriven letters ready in ledger")
    assert stats(daemon)["payments"].dead_lettered == 0
    assert list(admin_list(daemon, "payments", admin_pb2.MESSAGE_STATE_DEAD,
                           10).messages) == []
    assert [m.id for m in admin_list(daemon, "payments",
                                     admin_pb2.MESSAGE_STATE_READY,
                                     10).messages] == ["pay-1", "pay-0"]

    # Purge the scheduled messages of orders.
    show(browser, base, "#/topic/orders", "#purge-scheduled")
    browser.find_element(By.ID, "purge-scheduled").click()
    confirm(browser, True, "Delete every scheduled message of orders? This "
            "cannot be undone.")
    wait_for_text(browser, "#notice", "Purged 24 scheduled messages of orders.")
    assert stats(daemon)["orders"].scheduled == 0
    assert browser_errors(browser) == []


def test_the_publish_form_publishes_what_the_admin_api_then_shows(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    base = console_url(daemon)
    show(browser, base, "#/topic/orders", "#publish-submit")
    browser.find_element(By.ID, "publish-payload").send_keys(
        '{"order": "from the form"}')
    browser.find_element(By.ID, "publish-delay").send_keys("2h")
    browser.find_element(By.ID, "publish-id").send_keys("form-1")
    browser.find_element(By.ID, "publish-headers").send_keys(
        "customer=c-9\nsource=console")
    before = datetime.now(timezone.utc)
    browser.find_element(By.ID, "publish-submit").click()
    confirm(browser, True, "Publish message form-1 to orders, due in 2h?")
    notice = wait_for(browser, "#notice")
    m = admin_message(daemon, "orders", "form-1")
    after = datetime.now(timezone.utc)
    due = m.deliver_at.ToDatetime(tzinfo=timezone.utc)
    assert before + timedelta(hours=2) - timedelta(milliseconds=1) <= due \
        <= after + timedelta(hours=2)
    wait_for_text(browser, "#notice", "Published message form-1 to orders: "
                  f"due at {m.deliver_at.ToJsonString().replace('T', ' ')}.")
    assert notice.get_attribute("class") == ""
    assert m.payload_preview == b'{"order": "from the form"}'
    assert dict(m.headers) == {"customer": "c-9", "source": "console"}
    # The page shows the new count (it is shown again after the action).
    wait_for_text(browser, '#topic-counts [data-field="scheduled"]',
                  str(stats(daemon)["orders"].scheduled))
    assert stats(daemon)["orders"].scheduled == 26

    # The broker's refusal of a bad delay, said on the page; nothing stored.
    show(browser, base, "#/topic/orders", "#publish-submit")
    browser.find_element(By.ID, "publish-delay").send_keys("soon")
    browser.find_element(By.ID, "publish-submit").click()
    confirm(browser, True, "Publish a message to orders, due in soon?")
    wait_for_text(browser, "#notice", 'Failed: delay "soon" is not a duration '
                  'such as "250ms", "10s" or "1h30m"')
    assert wait_for(browser, "#notice").get_attribute("class") == "error"
    # The refused request, and nothing else, in the browser's log.
    assert [e.split(" - ", 1)[1] for e in browser_errors(browser)] == [
        "Failed to load resource: the server responded with a status of "
        "400 (Bad Request)"]
    # A header line without "=" is refused in the page; nothing is sent.
    browser.find_element(By.ID, "publish-delay").clear()
    browser.find_element(By.ID, "publish-headers").send_keys("no equals sign")
    browser.find_element(By.ID, "publish-submit").click()
    wait_for_text(browser, "#notice",
                  "Header line 1 is not key=value: no equals sign")
    assert stats(daemon)["orders"].scheduled == 26
    assert browser_errors(browser) == []


def test_a_single_node_shows_no_cluster_page_link(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    base = console_url(daemon)
    show(browser, base, "#/", ORDERS)
    WebDriverWait(browser, WAIT).until(
        lambda d: d.find_element(By.TAG_NAME, "body")
        .get_attribute("data-view") == "overview")
    assert not browser.find_element(By.ID, "nav-cluster").is_displayed()
    show(browser, base, "#/cluster", "#cluster-single")
    assert browser.find_element(By.ID, "cluster-single").text == (
        "This broker runs as a single node (hourglassd without --etcd): "
        "there is no cluster to show.")
    assert browser_errors(browser) == []


TOKENS = {"admin": "console-admin-token-0123456789",
          "produce": "console-produce-token-012345"}


@pytest.fixture
def token_daemon(hourglassd: str, tmp_path: Path):
    tokens = write_private(
        tmp_path / "tokens.txt",
        f"{TOKENS['admin']} admin,produce,consume\n"
        f"{TOKENS['produce']} produce\n")
    d = Daemon(hourglassd, tmp_path / "data",
               ["--max_attempts=1", f"--auth_tokens={tokens}"])
    d.start()
    yield d
    assert d.stop() == 0, d.output()


def test_with_tokens_the_page_shows_nothing_until_an_admin_token(
        browser: WebDriver, token_daemon: Daemon) -> None:
    loaded = load(token_daemon, TOKENS["admin"])
    try:
        base = console_url(token_daemon)
        # The page itself needs no token, but shows no data.
        browser.get(base + "#/")
        browser.execute_script("sessionStorage.clear()")
        browser.refresh()
        wait_for(browser, "#token-input")
        assert browser.find_element(By.ID, "view").text == ""
        assert browser.find_elements(By.CSS_SELECTOR, "#topics") == []
        assert browser.find_element(By.ID, "login-error").text == ""

        for token, error in [
                ("not-a-token-at-all", "Refused: unknown token"),
                (TOKENS["produce"], "Not an admin token: token lacks role "
                 "admin")]:
            browser.find_element(By.ID, "token-input").send_keys(token)
            browser.find_element(By.ID, "token-submit").click()
            wait_for_text(browser, "#login-error", error)
            assert browser.find_element(By.ID, "view").text == ""
            assert browser.find_elements(By.CSS_SELECTOR, "#topics") == []

        browser.find_element(By.ID, "token-input").send_keys(TOKENS["admin"])
        browser.find_element(By.ID, "token-submit").click()
        wait_for_text(browser, f'{ORDERS} [data-field="scheduled"]', "25")
        assert not browser.find_element(By.ID, "login").is_displayed()
        # Kept for the tab: another page needs no new sign-in.
        show(browser, base, "#/topic/payments", '#dead tr[data-id="pay-0"]')

        # The API itself: 401 without a token, /metrics as before.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "api/v1/topics", timeout=30)
        assert refused.value.code == 401
        assert json.load(refused.value) == {
            "code": "UNAUTHENTICATED",
            "message": 'missing "authorization: Bearer <token>" metadata'}
        with urllib.request.urlopen(base + "metrics", timeout=30) as scrape:
            assert scrape.status == 200

        browser.find_element(By.ID, "forget-token").click()
        wait_for(browser, "#token-input")
        assert browser.find_elements(By.CSS_SELECTOR, "#dead") == []
    finally:
        assert loaded.client is not None
        loaded.client.close()


ATTACK_PAGE = """<!doctype html>
<title>attacker</title>
<form id="form" method="POST" enctype="text/plain" action="{purge}">
<input name='{{"scheduled":true,"x":"' value='"}}'>
</form>
<script>
(async () => {{
  const results = [];
  for (const init of [
      // A "simple" request, which needs no preflight.
      {{method: 'POST', mode: 'no-cors', body: '{{"scheduled":true}}',
        headers: {{'Content-Type': 'text/plain'}}}},
      // JSON, which needs the console's leave first (CORS preflight).
      {{method: 'POST', body: '{{"scheduled":true}}',
        headers: {{'Content-Type': 'application/json'}}}}]) {{
    try {{
      const response = await fetch('{purge}', init);
      results.push(response.type + ' ' + response.status);
    }} catch (error) {{
      results.push('refused ' + error.name);
    }}
  }}
  document.title = 'fetched: ' + results.join(', ');
}})();
</script>
"""


def test_another_sites_page_cannot_drive_the_console(
        browser: WebDriver, daemon: Daemon, loaded: Loaded) -> None:
    """A page of another origin (another port of this machine) tries the
    console's purge with fetch, and with a form posting text/plain that
    reads as JSON: nothing is purged."""
    purge = console_url(daemon) + "api/v1/topics/orders/purge"
    page = ATTACK_PAGE.format(purge=purge).encode()

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        scheduled = stats(daemon)["orders"].scheduled
        assert scheduled > 0
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/")
        WebDriverWait(browser, WAIT).until(
            lambda d: d.title.startswith("fetched: "))
        # The no-cors request went, and its answer is hidden from the page;
        # the JSON one never went: the console refused its preflight.
        assert browser.title == ("fetched: opaque 0, refused TypeError"), \
            browser.title
        browser.execute_script("document.getElementById('form').submit()")
        WebDriverWait(browser, WAIT).until(
            lambda d: d.current_url == purge)
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "the console's API answers its own pages only" in body, body
        assert stats(daemon)["orders"].scheduled == scheduled
    finally:
        server.shutdown()
        thread.join()
