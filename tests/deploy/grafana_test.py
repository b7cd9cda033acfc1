"""deploy/grafana/hourglass.json: every query names only metrics hourglassd
exports, promtool parses it, and the dashboard shows what issue 25 asks:
publish and delivery rates, lateness, scheduled backlog, dead letters and
store health; and what issue 40 asks of cluster mode, in a row of its own
whose metrics are those of docs/metrics.md."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import deploy_files

# Grafana's variables, as a query sees them once Grafana substituted them.
VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m",
             "$__range": "1h"}


def dashboard():
    with open(deploy_files.source_path("deploy", "grafana", "hourglass.json"),
              encoding="utf-8") as f:
        return json.load(f)


def panels():
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def row_panels(title):
    """The panels under the row titled `title`: those placed below it and
    above the next row."""
    rows = sorted((p["gridPos"]["y"], p["title"]) for p in dashboard()["panels"]
                  if p["type"] == "row")
    starts = [y for y, t in rows if t == title]
    if len(starts) != 1:
        raise AssertionError(f"{len(starts)} rows titled {title!r}")
    start = starts[0]
    end = min([y for y, _ in rows if y > start], default=float("inf"))
    return [p for p in panels() if start < p["gridPos"]["y"] < end]


def documented_metrics():
    """{name: (type, labels)} of the table in docs/metrics.md."""
    text = deploy_files.read_text("docs", "metrics.md")
    table = text[text.index("<!-- metric catalog: begin -->"):
                 text.index("<!-- metric catalog: end -->")]
    metrics = {}
    for match in re.finditer(r"^\| `(hourglass_\w+)` \| (\w+) \| ([^|]*) \|",
                             table, re.M):
        metrics[match.group(1)] = (match.group(2),
                                   tuple(re.findall(r"`(\w+)`",
                                                    match.group(3))))
    if len(metrics) < 20:
        raise AssertionError(f"read only {len(metrics)} metrics from the "
                             "table of docs/metrics.md: has its format "
                             "changed?")
    return metrics


def queries(only=None):
    """(panel title, PromQL) of every panel target and query variable (or
    of the panels `only`), with Grafana's variables replaced ($instance
    and $topic only appear in label values, which stay as they are)."""
    found = [(p["title"], t["expr"]) for p in (only or panels())
             for t in p["targets"]]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query" and only is None:
            match = re.fullmatch(r"label_values\((.*), (\w+)\)",
                                 variable["query"]["query"])
            found.append((f"${variable['name']}", match.group(1)))
    replaced = []
    for title, expr in found:
        for name, value in VARIABLES.items():
            expr = expr.replace(name, value)
        replaced.append((title, expr))
    return replaced


class DashboardTest(unittest.TestCase):

    def test_every_query_names_only_metrics_hourglassd_exports(self):
        for title, expr in queries():
            with self.subTest(panel=title, expr=expr):
                self.assertEqual(deploy_files.check_expression(expr), [])
                self.assertNotIn("$", re.sub(r'"[^"]*"', "", expr))

    def test_query_variables_name_labels_of_their_metric(self):
        known = deploy_files.known_metrics()
        for variable in dashboard()["templating"]["list"]:
            if variable["type"] != "query":
                continue
            with self.subTest(variable=variable["name"]):
                match = re.fullmatch(r"label_values\((\w+).*, (\w+)\)",
                                     variable["query"]["query"])
                metric, label = match.groups()
                self.assertIn(label, set(known[metric][1]) |
                              deploy_files.TARGET_LABELS)
                self.assertEqual(variable["definition"],
                                 variable["query"]["query"])

    def test_promtool_parses_every_query(self):
        # promtool has no command for a bare expression: each becomes a
        # recording rule of a rule file it checks.
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        path = os.path.join(work, "dashboard_rules.yml")
        rules = [{"record": f"dashboard:query_{i}", "expr": expr}
                 for i, (_, expr) in enumerate(queries())]
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        result = subprocess.run(
            [deploy_files.env("HOURGLASS_PROMTOOL"), "check", "rules", path],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"SUCCESS: {len(rules)} rules found", result.stdout)

    def test_shows_what_the_issue_asks_for(self):
        exprs = " ".join(expr for _, expr in queries())
        for metric in ("hourglass_published_total",       # publish rate
                       "hourglass_delivered_total",       # delivery rate
                       "hourglass_delivery_lateness_seconds_bucket",
                       "hourglass_scheduled",             # backlog
                       "hourglass_dead_lettered_total",   # dead letters
                       "hourglass_serving",               # store health
                       "hourglass_store_errors_total",
                       "hourglass_calls_refused_total",
                       "hourglass_store_disk_bytes"):
            with self.subTest(metric=metric):
                self.assertRegex(exprs, rf"\b{metric}\b")

    def test_the_cluster_row_shows_what_issue_40_asks_from_the_docs(self):
        cluster = row_panels("Cluster")
        self.assertTrue(cluster)
        documented = documented_metrics()
        used = set()
        for title, expr in queries(cluster):
            with self.subTest(panel=title, expr=expr):
                references, labels = deploy_files.parse(expr)
                for ref in references:
                    # Every metric the row names is one docs/metrics.md
                    # documents, with the labels it uses.
                    self.assertIn(ref.name, documented)
                    allowed = (set(documented[ref.name][1])
                               | deploy_files.TARGET_LABELS)
                    for label in ref.labels:
                        self.assertIn(label, allowed)
                    used.add(ref.name)
                for label in labels:
                    self.assertIn(label, {l for ref in references
                                          for l in documented[ref.name][1]}
                                  | deploy_files.TARGET_LABELS)
        # Roles per shard, the in-sync set and the shards under
        # --min_insync, eligible copies, replication lag, promotions, the
        # controller, etcd reachable.
        self.assertEqual(used, {
            "hourglass_cluster_role", "hourglass_cluster_in_sync",
            "hourglass_cluster_under_min_insync",
            "hourglass_cluster_eligible_copies",
            "hourglass_replication_lag_seconds",
            "hourglass_cluster_promotions_total",
            "hourglass_cluster_controller",
            "hourglass_cluster_etcd_reachable"})
        # docs/metrics.md's table is the catalog's (metric_catalog_test
        # checks that); the row's metrics are in both.
        catalog = deploy_files.catalog()
        for name in used:
            self.assertEqual(catalog[name], documented[name], name)

    def test_documented_metrics_reader_reads_the_table(self):
        documented = documented_metrics()
        self.assertEqual(documented["hourglass_cluster_role"],
                         ("gauge", ("shard", "role")))
        self.assertEqual(documented["hourglass_acked_total"],
                         ("counter", ("topic",)))

    def test_panels_have_unique_ids_fit_the_grid_and_use_the_variable(self):
        ids = [p["id"] for p in dashboard()["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        for panel in dashboard()["panels"]:
            with self.subTest(panel=panel["title"]):
                grid = panel["gridPos"]
                self.assertLessEqual(grid["x"] + grid["w"], 24)
                if panel["type"] == "row":
                    continue
                self.assertTrue(panel["description"])
                self.assertEqual(panel["datasource"],
                                 {"type": "prometheus",
                                  "uid": "${datasource}"})
                refs = [t["refId"] for t in panel["targets"]]
                self.assertEqual(len(refs), len(set(refs)))
                for target in panel["targets"]:
                    self.assertEqual(target["datasource"],
                                     panel["datasource"])

    def test_panels_do_not_overlap(self):
        cells = {}
        for panel in dashboard()["panels"]:
            grid = panel["gridPos"]
            for y in range(grid["y"], grid["y"] + grid["h"]):
                for x in range(grid["x"], grid["x"] + grid["w"]):
                    with self.subTest(panel=panel["title"], x=x, y=y):
                        self.assertNotIn((x, y), cells)
                    cells[(x, y)] = panel["title"]

    def test_the_datasource_is_a_variable_of_prometheus_sources(self):
        variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
        self.assertEqual(variables["datasource"]["type"], "datasource")
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        self.assertEqual(dashboard()["uid"], "hourglass")


if __name__ == "__main__":
    unittest.main()
