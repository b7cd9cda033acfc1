"""deploy/prometheus/alerts.yml: every expression names only metrics
hourglassd exports, with their labels; promtool accepts the rules and its
unit tests (alerts.promtool.yml) show when each rule fires."""

import os
import subprocess
import unittest

import deploy_files


def rules():
    doc = deploy_files.load_yaml("deploy", "prometheus", "alerts.yml")
    return [rule for group in doc["groups"] for rule in group["rules"]]


class AlertRulesTest(unittest.TestCase):

    def test_every_expression_names_only_metrics_hourglassd_exports(self):
        for rule in rules():
            with self.subTest(alert=rule["alert"]):
                self.assertEqual(
                    deploy_files.check_expression(rule["expr"]), [])

    def test_every_rule_has_a_severity_a_summary_and_a_description(self):
        for rule in rules():
            with self.subTest(alert=rule["alert"]):
                self.assertIn(rule["labels"]["severity"],
                              {"critical", "warning"})
                self.assertEqual(set(rule["annotations"]),
                                 {"summary", "description"})

    def test_the_issues_five_conditions_each_have_a_rule(self):
        # Issue 25: store refusing writes, lateness p99 above a threshold,
        # dead letters growing, consumers stuck, disk filling.
        by_name = {rule["alert"]: rule["expr"] for rule in rules()}
        expected = {
            "HourglassNotServing": "hourglass_serving",
            "HourglassDeliveriesLate":
                "hourglass_delivery_lateness_seconds_bucket",
            "HourglassDeadLetters": "hourglass_dead_lettered_total",
            "HourglassConsumersStuck": "hourglass_in_flight",
            "HourglassDiskFillingUp": "hourglass_store_disk_bytes",
        }
        for alert, metric in expected.items():
            with self.subTest(alert=alert):
                self.assertIn(metric, by_name[alert])
        self.assertIn("histogram_quantile(0.99,",
                      by_name["HourglassDeliveriesLate"])

    def test_every_rule_fires_in_a_promtool_unit_test(self):
        tests = deploy_files.load_yaml("tests", "deploy",
                                       "alerts.promtool.yml")
        fired = {case["alertname"] for test in tests["tests"]
                 for case in test["alert_rule_test"] if case["exp_alerts"]}
        self.assertEqual(fired, {rule["alert"] for rule in rules()})

    def test_promtool_checks_the_rules(self):
        result = subprocess.run(
            [deploy_files.env("HOURGLASS_PROMTOOL"), "check", "rules",
             deploy_files.source_path("deploy", "prometheus", "alerts.yml")],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"SUCCESS: {len(rules())} rules found", result.stdout)

    def test_promtool_unit_tests_pass(self):
        result = subprocess.run(
            [deploy_files.env("HOURGLASS_PROMTOOL"), "test", "rules",
             "alerts.promtool.yml"],
            cwd=deploy_files.source_path("tests", "deploy"),
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("SUCCESS", result.stdout)

    def test_compose_prometheus_loads_the_rules_and_scrapes_job_hourglass(self):
        config = deploy_files.load_yaml("deploy", "prometheus",
                                        "prometheus.yml")
        self.assertEqual(config["rule_files"], ["/etc/prometheus/alerts.yml"])
        self.assertEqual([job["job_name"] for job in config["scrape_configs"]],
                         ["hourglass"])
        compose = deploy_files.load_yaml("deploy", "docker-compose.yml")
        volumes = compose["services"]["prometheus"]["volumes"]
        self.assertIn("./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro",
                      volumes)
        self.assertIn(
            "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro",
            volumes)
        down = next(r for r in rules() if r["alert"] == "HourglassDown")
        self.assertIn('up{job="hourglass"} == 0', down["expr"])

    def test_hourglass_down_knows_the_kubernetes_pods_by_their_label(self):
        # The manifests' pods are scraped through their prometheus.io
        # annotations by a job named by whoever runs Prometheus
        # (kubernetes-pods, usually), which copies the pod's labels onto
        # the series: the rule finds hourglassd's targets by
        # app.kubernetes.io/name, whatever the job is called.
        down = next(r for r in rules() if r["alert"] == "HourglassDown")
        self.assertEqual(
            down["expr"],
            'up{job="hourglass"} == 0 or '
            'up{app_kubernetes_io_name="hourglass"} == 0')
        for directory in (("deploy", "kubernetes"),
                          ("deploy", "kubernetes", "cluster")):
            with self.subTest(directory="/".join(directory)):
                documents = deploy_files.load_yaml_documents(
                    *directory, "statefulset.yaml")
                statefulset = next(d for d in documents
                                   if d["metadata"]["name"] == "hourglass")
                pod = statefulset["spec"]["template"]
                self.assertEqual(
                    pod["metadata"]["labels"]["app.kubernetes.io/name"],
                    "hourglass")
                annotations = pod["metadata"]["annotations"]
                self.assertEqual(annotations["prometheus.io/scrape"], "true")
                self.assertEqual(annotations["prometheus.io/path"],
                                 "/metrics")
                metrics = next(p for p in pod["spec"]["containers"][0][
                    "ports"] if p["name"] == "metrics")
                self.assertEqual(annotations["prometheus.io/port"],
                                 str(metrics["containerPort"]))
        # The promtool tests cover both shapes of target.
        tests = deploy_files.load_yaml("tests", "deploy",
                                       "alerts.promtool.yml")
        shapes = set()
        for test in tests["tests"]:
            fired = [case for case in test["alert_rule_test"]
                     if case["alertname"] == "HourglassDown"
                     and case["exp_alerts"]]
            for case in fired:
                for alert in case["exp_alerts"]:
                    shapes.add(alert["exp_labels"]["job"])
        self.assertEqual(shapes, {"hourglass", "kubernetes-pods"})

    def test_cluster_conditions_each_have_a_rule(self):
        # Issue 40: a shard under --min_insync, replication lag, repeated
        # promotions, no controller, etcd unreachable.
        by_name = {rule["alert"]: rule for rule in rules()}
        expected = {
            "HourglassShardsUnderMinInsync":
                "hourglass_cluster_under_min_insync",
            "HourglassReplicationLagging":
                "hourglass_replication_lag_seconds",
            "HourglassPrimaryFlapping": "hourglass_cluster_promotions_total",
            "HourglassNoController": "hourglass_cluster_controller",
            "HourglassEtcdUnreachable": "hourglass_cluster_etcd_reachable",
        }
        for alert, metric in expected.items():
            with self.subTest(alert=alert):
                self.assertRegex(by_name[alert]["expr"], rf"\b{metric}\b")
        # Rules about the whole cluster, which every node reports, give
        # one alert per cluster: no per-node label survives them.
        for alert in ("HourglassShardsUnderMinInsync",
                      "HourglassReplicationLagging",
                      "HourglassPrimaryFlapping", "HourglassNoController"):
            with self.subTest(alert=alert):
                self.assertRegex(by_name[alert]["expr"],
                                 r"^(max|sum) by \(job, namespace[,)]")
        # Not absent(): a cluster that is not scraped is HourglassDown's.
        self.assertNotIn("absent", by_name["HourglassNoController"]["expr"])


class PromqlCheckerTest(unittest.TestCase):
    """The checker the tests above rely on finds what it should."""

    def test_finds_unknown_metrics_labels_and_functions(self):
        check = deploy_files.check_expression
        self.assertEqual(check("rate(hourglass_scheduled[5m])"),
                         ["rate() of hourglass_scheduled, a gauge"])
        self.assertEqual(check("deriv(hourglass_acked_total[5m])"),
                         ["deriv() of hourglass_acked_total, a counter"])
        self.assertEqual(check("hourglass_nope > 0"),
                         ["hourglass_nope is not a metric hourglassd exports"])
        self.assertEqual(check('hourglass_published_total{group="x"}'),
                         ["hourglass_published_total has no label group"])
        self.assertEqual(check("sum by (group) (hourglass_scheduled)"),
                         ["no metric of 'sum by (group) (hourglass_scheduled)'"
                          " has label group"])
        self.assertEqual(
            check("hourglass_delivery_lateness_seconds > 1"),
            ["hourglass_delivery_lateness_seconds is a histogram: use "
             "hourglass_delivery_lateness_seconds_bucket, _sum or _count"])
        self.assertEqual(check("frobnicate(hourglass_scheduled)"),
                         ["frobnicate() is no PromQL function in "
                          "'frobnicate(hourglass_scheduled)'"])

    def test_accepts_histograms_aggregations_and_matching(self):
        check = deploy_files.check_expression
        self.assertEqual(check(
            "histogram_quantile(0.99, sum by (instance, le) "
            "(rate(hourglass_delivery_lateness_seconds_bucket[5m]))) > 1"), [])
        self.assertEqual(check(
            'sum(rate(hourglass_grpc_calls_total{code!="OK"}[5m])) by (method)'
            " / ignoring (code) group_left sum by (method) "
            "(rate(hourglass_grpc_calls_total[5m]))"), [])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    unittest.main()
