"""deploy/kubernetes, read with a YAML parser (no cluster here): TLS and
tokens on, probes that can pass with TLS, memory reserved and bounded, no
CPU limit, a NetworkPolicy that selects the pods, the image set through
kustomize."""

import os
import posixpath
import re
import unittest

import deploy_files

MIB = 1 << 20

# The worst case of memory the flags bound, in MiB, beside what they do not
# (docs/sizing.md#memory explains each term):
# - RSS measured with the default flags and 10 million messages pending a
#   day ahead (nothing within the horizon): at most 170 MB in
#   BENCHMARKS.md's 2026-11-25 runs, default 64 MiB block cache and
#   memtables included (counted again below: the sum errs high);
BASELINE_MIB = 170
# - RocksDB's memtables, bounded by db_write_buffer_size
#   (storage/rocksdb_store.cc);
MEMTABLES_MIB = 128
# - and a quarter of the limit left for the messages due within --horizon
#   and the allocator's own overhead.
HEADROOM = 0.25


def quantity_mib(quantity):
    """A Kubernetes memory quantity ("2Gi", "512Mi") in MiB."""
    match = re.fullmatch(r"(\d+)(Mi|Gi)", quantity)
    if not match:
        raise ValueError(f"unexpected quantity {quantity!r}")
    return int(match.group(1)) * (1024 if match.group(2) == "Gi" else 1)


class KubernetesTest(unittest.TestCase):

    def setUp(self):
        self.kustomization = deploy_files.load_yaml(
            "deploy", "kubernetes", "kustomization.yaml")
        self.objects = []
        for resource in self.kustomization["resources"]:
            self.objects += deploy_files.load_yaml_documents(
                "deploy", "kubernetes", resource)
        self.statefulset = self.one("StatefulSet")
        self.pod = self.statefulset["spec"]["template"]
        self.container = self.pod["spec"]["containers"][0]
        self.flags = deploy_files.parse_flags(self.container["args"])
        self.env = {e["name"]: e["value"] for e in self.container["env"]}

    def one(self, kind):
        found = [o for o in self.objects if o["kind"] == kind]
        self.assertEqual(len(found), 1, kind)
        return found[0]

    def volume(self, name):
        return next(v for v in self.pod["spec"]["volumes"]
                    if v["name"] == name)

    def mounted_file(self, path):
        """(volume, file name in it) of the container path `path`."""
        for mount in self.container["volumeMounts"]:
            if posixpath.dirname(path) == mount["mountPath"]:
                return self.volume(mount["name"]), posixpath.basename(path)
        self.fail(f"no volume is mounted at {posixpath.dirname(path)}")

    def test_kustomization_lists_every_manifest(self):
        directory = deploy_files.source_path("deploy", "kubernetes")
        manifests = sorted(f for f in os.listdir(directory)
                           if f.endswith(".yaml") and f != "kustomization.yaml")
        self.assertEqual(sorted(self.kustomization["resources"]), manifests)

    def test_the_image_is_set_through_kustomize_images(self):
        image = self.container["image"]
        self.assertNotIn(":", image)
        entry = next(i for i in self.kustomization["images"]
                     if i["name"] == image)
        self.assertEqual(entry["newTag"], "0.1.0")
        self.assertIn("newName", entry)

    def test_one_replica(self):
        self.assertEqual(self.statefulset["spec"]["replicas"], 1)

    def test_tls_and_tokens_are_on(self):
        volume, name = self.mounted_file(self.flags["tls_cert"])
        self.assertEqual(volume["name"], "tls")
        self.assertEqual(name, "tls.crt")
        volume, name = self.mounted_file(self.flags["tls_key"])
        self.assertEqual((volume["name"], name), ("tls", "tls.key"))
        volume, name = self.mounted_file(self.flags["auth_tokens"])
        self.assertEqual(volume["secret"]["secretName"], "hourglass-auth")
        self.assertEqual(name, "tokens")
        # Root-owned, read by the pod's group: hourglassd's rule for a
        # token file (docs/tls-and-tokens.md).
        self.assertEqual(volume["secret"]["defaultMode"], 0o440)
        self.assertEqual(self.pod["spec"]["securityContext"]["fsGroup"], 10001)

    def test_the_probes_ca_comes_from_a_configmap_not_the_tls_secret(self):
        # `kubectl create secret tls` makes a Secret with tls.crt and
        # tls.key only: the CA the probes trust must come from elsewhere.
        volume, name = self.mounted_file(self.env["HOURGLASS_TLS_CA"])
        sources = volume["projected"]["sources"]
        providers = [s for s in sources
                     for item in next(iter(s.values()))["items"]
                     if item["path"] == name]
        self.assertEqual(providers, [
            {"configMap": {"name": "hourglass-ca",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}}])
        secret = next(s["secret"] for s in sources if "secret" in s)
        self.assertEqual(secret["name"], "hourglass-tls")
        self.assertEqual({i["key"] for i in secret["items"]},
                         {"tls.crt", "tls.key"})
        # The CLI dials 127.0.0.1: it must be told the certificate's name.
        self.assertEqual(self.env["HOURGLASS_TLS_SERVER_NAME"], "hourglass")

    def test_startup_and_readiness_ask_health_through_tls_with_time_to_answer(self):
        command = ["hourglass", "--addr=127.0.0.1:7070", "--timeout=3s",
                   "health"]
        for probe in ("startupProbe", "readinessProbe"):
            with self.subTest(probe=probe):
                spec = self.container[probe]
                self.assertEqual(spec["exec"]["command"], command)
                # Longer than the CLI's own 3 s, not Kubernetes' 1 s.
                self.assertEqual(spec["timeoutSeconds"], 5)
        startup = self.container["startupProbe"]
        self.assertEqual(
            startup["periodSeconds"] * startup["failureThreshold"], 300)

    def test_liveness_asks_metrics_not_health(self):
        # Health is NOT_SERVING while the store refuses writes (a full
        # disk): a restart would not help, so liveness must not follow it.
        self.assertEqual(self.container["livenessProbe"]["httpGet"],
                         {"path": "/metrics", "port": "metrics"})

    def test_probe_and_container_ports_match_the_images_entrypoint(self):
        ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        self.assertEqual(ports, {"grpc": 7070, "metrics": 9464})
        self.assertNotIn("listen", self.flags)
        self.assertNotIn("metrics_listen", self.flags)
        self.assertNotIn("data_dir", self.flags)
        data = next(m for m in self.container["volumeMounts"]
                    if m["name"] == "data")
        self.assertEqual(data["mountPath"], "/data")

    def test_memory_request_equals_limit(self):
        resources = self.container["resources"]
        self.assertEqual(resources["requests"]["memory"], "2Gi")
        self.assertEqual(resources["limits"]["memory"],
                         resources["requests"]["memory"])

    def test_cpu_is_requested_and_not_limited(self):
        resources = self.container["resources"]
        self.assertEqual(resources["requests"]["cpu"], "1")
        self.assertNotIn("cpu", resources["limits"])

    def test_flags_bound_memory_within_the_limit(self):
        limit = quantity_mib(self.container["resources"]["limits"]["memory"])
        self.assertGreater(int(self.flags["grpc_memory_mb"]), 0)
        worst = (BASELINE_MIB + MEMTABLES_MIB
                 + int(self.flags["block_cache_mb"])
                 + int(self.flags["grpc_memory_mb"])
                 + int(self.flags["max_publish_queue_bytes"]) / MIB
                 + int(self.flags["max_streams"])
                 * int(self.flags["stream_outbox_bytes"]) / MIB)
        self.assertEqual(worst, 1450)
        self.assertLessEqual(worst, limit * (1 - HEADROOM))

    def test_pod_hardening(self):
        self.assertFalse(self.pod["spec"]["automountServiceAccountToken"])
        context = self.container["securityContext"]
        self.assertTrue(context["readOnlyRootFilesystem"])
        self.assertFalse(context["allowPrivilegeEscalation"])
        self.assertEqual(context["capabilities"]["drop"], ["ALL"])
        self.assertTrue(self.pod["spec"]["securityContext"]["runAsNonRoot"])

    def test_network_policy_selects_the_pods_and_lets_in_clients_and_prometheus(self):
        policy = self.one("NetworkPolicy")["spec"]
        pod_labels = self.pod["metadata"]["labels"]
        selector = policy["podSelector"]["matchLabels"]
        self.assertTrue(selector)
        self.assertEqual({k: pod_labels.get(k) for k in selector}, selector)
        self.assertEqual(sorted(policy["policyTypes"]), ["Egress", "Ingress"])
        self.assertEqual(policy["egress"], [])
        self.assertEqual(policy["ingress"], [
            {"from": [{"podSelector": {
                "matchLabels": {"hourglass-client": "true"}}}],
             "ports": [{"port": "grpc", "protocol": "TCP"}]},
            {"from": [{"namespaceSelector": {}, "podSelector": {
                "matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
             "ports": [{"port": "metrics", "protocol": "TCP"}]},
        ])
        names = {p["name"] for p in self.container["ports"]}
        for rule in policy["ingress"]:
            for port in rule["ports"]:
                self.assertIn(port["port"], names)

    def test_services_select_the_pods_and_name_their_ports(self):
        pod_labels = self.pod["metadata"]["labels"]
        names = {p["name"] for p in self.container["ports"]}
        services = [o for o in self.objects if o["kind"] == "Service"]
        self.assertEqual(sorted(s["metadata"]["name"] for s in services),
                         ["hourglass", "hourglass-headless"])
        for service in services:
            with self.subTest(service=service["metadata"]["name"]):
                selector = service["spec"]["selector"]
                self.assertEqual({k: pod_labels.get(k) for k in selector},
                                 selector)
                for port in service["spec"]["ports"]:
                    self.assertIn(port["targetPort"], names)


if __name__ == "__main__":
    unittest.main()
