"""The web console of a cluster in real headless Chromium: a real etcd and
three real hourglassd (a, b, c) holding three shards. Each node's console
shows the Cluster link and page (nodes, shards, in-sync sets, lag) as its
GET /api/v1/cluster answers; and a topic whose shard a leads is shown,
published to and found by id from b's and c's consoles, which forward those
calls to a."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from browser import (browser_errors, call, confirm, console_url, show,
                     wait_for, wait_for_text)
from helpers import WAIT, Daemon, Etcd, admin, eventually, write_private
from hourglass.shards import shard_of
from hourglass.v1 import admin_pb2

SHARDS = 3
NODES = ("a", "b", "c")


def api(daemon: Daemon, path: str, body: object = None) -> Dict:
    """The console API's JSON answer to GET `path` (POST with `body`)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        console_url(daemon) + "api/v1/" + path, data=data,
        headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=WAIT) as answer:
        return json.load(answer)


def topic_of_shard(shard: int) -> str:
    """The first topic orders-<i> of `shard`."""
    return next(t for t in (f"orders-{i}" for i in range(100))
                if shard_of(t, SHARDS) == shard)


@pytest.fixture
def cluster(hourglassd: str, tmp_path: Path) -> Iterator[Dict[str, Daemon]]:
    """Nodes a, b and c of three shards, each in sync and each primary
    serving its shard; stopped after the test, each checked to exit 0."""
    binary = os.environ.get("HOURGLASS_ETCD") or "/usr/bin/etcd"
    if not os.access(binary, os.X_OK):
        pytest.skip(f"no etcd at {binary} (deploy/setup.sh installs it)")
    etcd = Etcd(binary, tmp_path / "etcd")
    etcd.start()
    secret = write_private(tmp_path / "peer-secret",
                           "console-test-peer-secret-0123456789abcdef\n")
    nodes: Dict[str, Daemon] = {}
    try:
        for node_id in NODES:
            nodes[node_id] = Daemon(hourglassd, tmp_path / node_id, [
                f"--etcd={etcd.endpoint}", f"--node_id={node_id}",
                "--lease_ttl=2s", f"--peer_token_file={secret}",
                f"--shards={SHARDS}"])
            nodes[node_id].start()

        def settled() -> bool:
            for node in nodes.values():
                c = api(node, "cluster")
                if len(c["shards"]) != SHARDS or c["lagErrors"]:
                    return False
                for s in c["shards"]:
                    if len(s["isr"]) != 3 or len(s["lag"]) != 2:
                        return False
            # Each primary serves its shard (404: a topic it has not yet).
            for s in c["shards"]:
                try:
                    api(nodes[s["primary"]],
                        f"stats?topic={topic_of_shard(s['shard'])}")
                except urllib.error.HTTPError as e:
                    if e.code != 404:
                        return False
            return True

        eventually(settled, "three shards in sync, each primary serving")
        yield nodes
    finally:
        codes = {node_id: node.stop() for node_id, node in nodes.items()}
        etcd.stop()
    assert codes == {node_id: 0 for node_id in nodes}, \
        {n: d.output()[-3000:] for n, d in nodes.items()}


def texts(driver: WebDriver, css: str) -> List[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def test_every_node_shows_the_cluster_page(
        browser: WebDriver, cluster: Dict[str, Daemon]) -> None:
    for node_id in ("b", "a"):
        base = console_url(cluster[node_id])
        show(browser, base, "#/", "#nav-cluster")
        browser.find_element(By.ID, "nav-cluster").click()
        wait_for(browser, f'#cluster-shards tr[data-shard="{SHARDS - 1}"]')
        wait_for(browser, "#cluster-lag tbody tr[data-node]")
        expected = api(cluster[node_id], "cluster")
        assert browser.find_element(By.ID, "cluster-summary") \
            .get_attribute("data-node") == node_id
        assert [r.get_attribute("data-node") for r in browser.find_elements(
            By.CSS_SELECTOR, "#cluster-nodes tbody tr")] == list(NODES)
        assert texts(browser, '#cluster-nodes [data-field="state"]') == \
            ["alive"] * 3
        assert texts(browser, '#cluster-nodes [data-field="address"]') == \
            [cluster[n].address for n in NODES]
        assert texts(browser, '#cluster-shards [data-field="primary"]') == \
            [s["primary"] for s in expected["shards"]]
        assert texts(browser, '#cluster-shards [data-field="isr"]') == \
            [",".join(s["isr"]) for s in expected["shards"]]
        assert texts(browser, '#cluster-shards [data-field="replicas"]') == \
            [",".join(s["replicas"]) for s in expected["shards"]]
        # Every shard's two backups, as each primary gave them.
        assert [(r.get_attribute("data-shard"), r.get_attribute("data-node"))
                for r in browser.find_elements(
                    By.CSS_SELECTOR, "#cluster-lag tbody tr")] == \
            [(str(s["shard"]), b["node"]) for s in expected["shards"]
             for b in s["lag"]]
        assert set(texts(browser, '#cluster-lag [data-field="inSync"]')) == \
            {"yes"}
        # Each node leads one shard and backs up the two others.
        assert sorted(texts(browser,
                            '#cluster-nodes [data-field="primaryOf"]')) == \
            ["0", "1", "2"]
        assert browser_errors(browser) == []


def test_a_topic_led_by_a_is_served_from_b_and_c(
        browser: WebDriver, cluster: Dict[str, Daemon]) -> None:
    shards = api(cluster["b"], "cluster")["shards"]
    topic = next(topic_of_shard(s["shard"]) for s in shards
                 if s["primary"] == "a")
    # The topic exists once it holds a message, published through b's API.
    receipt = api(cluster["b"], f"topics/{topic}/publish",
                  {"payload": "first", "delay": "1h", "id": "first"})
    assert receipt["id"] == "first" and receipt["duplicate"] is False

    base = console_url(cluster["b"])
    show(browser, base, f"#/topic/{topic}", "#publish-submit")
    wait_for_text(browser, '#topic-counts [data-field="scheduled"]', "1")
    browser.find_element(By.ID, "publish-payload").send_keys("from b's form")
    browser.find_element(By.ID, "publish-delay").send_keys("90m")
    browser.find_element(By.ID, "publish-id").send_keys("form-b")
    browser.find_element(By.ID, "publish-submit").click()
    confirm(browser, True, f"Publish message form-b to {topic}, due in 90m?")
    # The form's answer first: the publish has reached a once it is shown.
    published = f"Published message form-b to {topic}: due at "
    eventually(lambda: any(
        e.text.startswith(published)
        for e in browser.find_elements(By.ID, "notice")), "the form's answer")
    stub, channel = admin(cluster["a"])  # The primary's own Admin service.
    with channel:
        m = call(stub.GetMessage, admin_pb2.GetMessageRequest(
            topic=topic, id="form-b", preview_bytes=1 << 10))
    assert m.payload_preview == b"from b's form"
    wait_for_text(browser, "#notice", f"Published message form-b to {topic}: "
                  f"due at {m.deliver_at.ToJsonString().replace('T', ' ')}.")
    wait_for_text(browser, '#topic-counts [data-field="scheduled"]', "2")

    # Found by id from b's message browser, and shown by c's console.
    show(browser, base, f"#/messages/{topic}", "#find-id")
    browser.find_element(By.ID, "find-id").send_keys("form-b")
    browser.find_element(By.ID, "find-open").click()
    wait_for_text(browser, "#payload", "from b's form")
    show(browser, console_url(cluster["c"]), f"#/message/{topic}/first",
         "#payload")
    assert browser.find_element(By.ID, "payload").text == "first"
    # c's overview lists it: the topics of every shard.
    show(browser, console_url(cluster["c"]), "#/",
         f'#topics tr[data-topic="{topic}"]')
    assert browser_errors(browser) == []
