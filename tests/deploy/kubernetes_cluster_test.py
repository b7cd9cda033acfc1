"""deploy/kubernetes/cluster, read with a YAML parser (no cluster here):
three hourglassd whose node ids, advertised names and etcd endpoints agree
with the Services and the etcd StatefulSet; readiness that asks health ""
(the primary or an in-sync backup, node/README.md "Health"); leader
transfer on SIGTERM within the termination grace; a PodDisruptionBudget;
a NetworkPolicy that lets the nodes replicate to each other and reach
etcd."""

import os
import re
import unittest

import deploy_files
import kubernetes_test

DIRECTORY = ("deploy", "kubernetes", "cluster")
HEALTH = ["hourglass", "--addr=127.0.0.1:7070", "--timeout=3s", "health"]


def env_refs(container):
    """{name: fieldPath} of the container's variables from the pod's own
    fields (the downward API)."""
    return {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
            for e in container.get("env", []) if "valueFrom" in e}


def seconds(duration):
    """A flag's duration ("10s", "500ms", "1m") in seconds."""
    match = re.fullmatch(r"(\d+)(ms|s|m)", duration)
    if not match:
        raise ValueError(f"unexpected duration {duration!r}")
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[match.group(2)]


class KubernetesClusterTest(unittest.TestCase):

    def setUp(self):
        self.kustomization = deploy_files.load_yaml(
            *DIRECTORY, "kustomization.yaml")
        self.objects = []
        for resource in self.kustomization["resources"]:
            self.objects += deploy_files.load_yaml_documents(
                *DIRECTORY, resource)
        self.statefulset = self.named("StatefulSet", "hourglass")
        self.pod = self.statefulset["spec"]["template"]
        self.container = self.pod["spec"]["containers"][0]
        self.flags = deploy_files.parse_flags(self.container["args"])
        self.etcd = self.named("StatefulSet", "hourglass-etcd")
        self.etcd_container = self.etcd["spec"]["template"]["spec"][
            "containers"][0]
        self.etcd_flags = deploy_files.parse_flags(
            self.etcd_container["args"])

    def named(self, kind, name):
        found = [o for o in self.objects
                 if o["kind"] == kind and o["metadata"]["name"] == name]
        self.assertEqual(len(found), 1, f"{kind}/{name}")
        return found[0]

    def selects(self, selector, labels):
        self.assertTrue(selector)
        return {k: labels.get(k) for k in selector} == selector

    def port(self, container, name):
        return next(p["containerPort"] for p in container["ports"]
                    if p["name"] == name)

    def test_kustomization_lists_every_manifest_and_sets_both_images(self):
        directory = deploy_files.source_path(*DIRECTORY)
        manifests = sorted(f for f in os.listdir(directory)
                           if f.endswith(".yaml") and f != "kustomization.yaml")
        self.assertEqual(sorted(self.kustomization["resources"]), manifests)
        images = {i["name"]: i for i in self.kustomization["images"]}
        for container in (self.container, self.etcd_container):
            with self.subTest(image=container["image"]):
                self.assertNotIn(":", container["image"])
                self.assertEqual(images[container["image"]]["newTag"], "0.1.0")
        # The single-node kustomization names the same image.
        single = deploy_files.load_yaml("deploy", "kubernetes",
                                        "kustomization.yaml")
        self.assertIn(self.container["image"],
                      {i["name"] for i in single["images"]})

    def test_three_nodes_started_together(self):
        spec = self.statefulset["spec"]
        self.assertEqual(spec["replicas"], 3)
        # The shard exists only once three nodes joined, and a node is
        # ready only then: OrderedReady would never start the second.
        self.assertEqual(spec["podManagementPolicy"], "Parallel")
        self.assertEqual(spec["updateStrategy"]["type"], "RollingUpdate")

    def test_node_id_and_advertised_address_are_the_pods_stable_name(self):
        refs = env_refs(self.container)
        self.assertEqual(refs["POD_NAME"], "metadata.name")
        self.assertEqual(refs["POD_NAMESPACE"], "metadata.namespace")
        self.assertEqual(self.flags["node_id"], "$(POD_NAME)")
        headless = self.named("Service", self.statefulset["spec"][
            "serviceName"])
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertEqual(
            self.flags["advertise"],
            f"$(POD_NAME).{headless['metadata']['name']}.$(POD_NAMESPACE)"
            f".svc:{self.port(self.container, 'grpc')}")
        # Its pods resolve while not ready: a node catching up is not
        # ready, and the primary must reach it.
        self.assertTrue(headless["spec"]["publishNotReadyAddresses"])
        self.assertTrue(self.selects(headless["spec"]["selector"],
                                     self.pod["metadata"]["labels"]))

    def test_the_nodes_list_every_etcd_member(self):
        etcd_service = self.named("Service", self.etcd["spec"]["serviceName"])
        client = self.port(self.etcd_container, "client")
        members = [f"{self.etcd['metadata']['name']}-{i}."
                   f"{etcd_service['metadata']['name']}:{client}"
                   for i in range(self.etcd["spec"]["replicas"])]
        self.assertEqual(self.flags["etcd"].split(","), members)

    def test_etcd_members_form_one_cluster_of_three(self):
        spec = self.etcd["spec"]
        self.assertEqual(spec["replicas"], 3)
        self.assertEqual(spec["podManagementPolicy"], "Parallel")
        service = self.named("Service", spec["serviceName"])
        self.assertTrue(service["spec"]["publishNotReadyAddresses"])
        self.assertEqual(env_refs(self.etcd_container)["POD_NAME"],
                         "metadata.name")
        name = self.etcd["metadata"]["name"]
        domain = service["metadata"]["name"]
        peer = self.port(self.etcd_container, "peer")
        client = self.port(self.etcd_container, "client")
        self.assertEqual(self.etcd_flags["name"], "$(POD_NAME)")
        self.assertEqual(
            self.etcd_flags["initial-cluster"],
            ",".join(f"{name}-{i}=http://{name}-{i}.{domain}:{peer}"
                     for i in range(spec["replicas"])))
        self.assertEqual(self.etcd_flags["initial-advertise-peer-urls"],
                         f"http://$(POD_NAME).{domain}:{peer}")
        self.assertEqual(self.etcd_flags["advertise-client-urls"],
                         f"http://$(POD_NAME).{domain}:{client}")
        self.assertEqual(self.etcd_flags["listen-client-urls"],
                         f"http://0.0.0.0:{client}")
        self.assertEqual(self.etcd_flags["listen-peer-urls"],
                         f"http://0.0.0.0:{peer}")
        data = next(m for m in self.etcd_container["volumeMounts"]
                    if m["name"] == "data")
        self.assertTrue(self.etcd_flags["data-dir"].startswith(
            data["mountPath"] + "/"))
        self.assertEqual(
            self.etcd["spec"]["template"]["spec"]["securityContext"][
                "runAsUser"], 10002)

    def test_readiness_asks_health_and_startup_and_liveness_do_not(self):
        readiness = self.container["readinessProbe"]
        self.assertEqual(readiness["exec"]["command"], HEALTH)
        self.assertEqual(readiness["timeoutSeconds"], 5)
        # A node that rebuilds its copy is not ready for as long as that
        # takes: restarting it would start the rebuild over.
        for probe in ("startupProbe", "livenessProbe"):
            with self.subTest(probe=probe):
                self.assertEqual(self.container[probe]["httpGet"],
                                 {"path": "/metrics", "port": "metrics"})

    def test_sigterm_is_the_leader_transfer_within_the_grace_period(self):
        self.assertNotIn("lifecycle", self.container)
        defaults = deploy_files.hourglassd_flags()
        grace = seconds(self.flags.get(
            "shutdown_grace", defaults["shutdown_grace"].strip('"')))
        period = self.pod["spec"]["terminationGracePeriodSeconds"]
        # The hand-over takes well under a second; twice the grace leaves
        # room for calls that take all of it.
        self.assertGreaterEqual(period, 2 * grace)

    def test_no_tls_flags_and_tokens_from_the_secret(self):
        # Cluster mode refuses --tls_cert for now (README.md).
        for flag in ("tls_cert", "tls_key", "tls_client_ca", "restore_from"):
            self.assertNotIn(flag, self.flags)
        volume = next(v for v in self.pod["spec"]["volumes"]
                      if v["name"] == "auth")
        mount = next(m for m in self.container["volumeMounts"]
                     if m["name"] == "auth")
        self.assertEqual(self.flags["auth_tokens"],
                         mount["mountPath"] + "/tokens")
        self.assertEqual(volume["secret"]["secretName"], "hourglass-auth")
        self.assertEqual(volume["secret"]["defaultMode"], 0o440)

    def test_resources_and_memory_flags_as_the_single_node(self):
        single = kubernetes_test.KubernetesTest("setUp")
        single.setUp()
        self.assertEqual(self.container["resources"],
                         single.container["resources"])
        for flag in ("block_cache_mb", "grpc_memory_mb",
                     "max_publish_queue_bytes", "max_streams",
                     "stream_outbox_bytes"):
            self.assertEqual(self.flags[flag], single.flags[flag], flag)

    def test_disruption_budgets_allow_one_pod_down(self):
        budgets = [o for o in self.objects
                   if o["kind"] == "PodDisruptionBudget"]
        self.assertEqual(len(budgets), 2)
        for statefulset in (self.statefulset, self.etcd):
            labels = statefulset["spec"]["template"]["metadata"]["labels"]
            chosen = [b for b in budgets
                      if self.selects(b["spec"]["selector"]["matchLabels"],
                                      labels)]
            self.assertEqual(len(chosen), 1, statefulset["metadata"]["name"])
            self.assertEqual(chosen[0]["spec"]["maxUnavailable"], 1)

    def test_pods_are_hardened(self):
        for statefulset in (self.statefulset, self.etcd):
            with self.subTest(statefulset=statefulset["metadata"]["name"]):
                pod = statefulset["spec"]["template"]["spec"]
                self.assertFalse(pod["automountServiceAccountToken"])
                self.assertTrue(pod["securityContext"]["runAsNonRoot"])
                context = pod["containers"][0]["securityContext"]
                self.assertTrue(context["readOnlyRootFilesystem"])
                self.assertFalse(context["allowPrivilegeEscalation"])
                self.assertEqual(context["capabilities"]["drop"], ["ALL"])

    def test_network_policy_lets_the_nodes_replicate_and_reach_etcd(self):
        policy = self.named("NetworkPolicy", "hourglass")["spec"]
        labels = self.pod["metadata"]["labels"]
        etcd_labels = self.etcd["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(self.selects(policy["podSelector"]["matchLabels"],
                                     labels))
        self.assertEqual(sorted(policy["policyTypes"]), ["Egress", "Ingress"])
        # Replication is on the client port: the other nodes come in there.
        grpc_in = next(r for r in policy["ingress"]
                       if r["ports"] == [{"port": "grpc", "protocol": "TCP"}])
        sources = [f["podSelector"]["matchLabels"] for f in grpc_in["from"]]
        self.assertIn({"hourglass-client": "true"}, sources)
        self.assertTrue(any(self.selects(s, labels) for s in sources))

        def egress_to(labels_of_target, port):
            return any(
                any(self.selects(t["podSelector"]["matchLabels"],
                                 labels_of_target) for t in rule["to"])
                and {"port": port, "protocol": "TCP"} in rule["ports"]
                for rule in policy["egress"])

        self.assertTrue(egress_to(labels, "grpc"))
        self.assertTrue(egress_to(etcd_labels, "client"))
        self.assertTrue(egress_to({"k8s-app": "kube-dns"}, 53))

        etcd_policy = self.named("NetworkPolicy", "hourglass-etcd")["spec"]
        self.assertTrue(self.selects(
            etcd_policy["podSelector"]["matchLabels"], etcd_labels))
        client_from = [f["podSelector"]["matchLabels"]
                       for r in etcd_policy["ingress"]
                       if {"port": "client", "protocol": "TCP"} in r["ports"]
                       for f in r["from"]]
        self.assertTrue(any(self.selects(s, labels) for s in client_from))
        # Every named port a policy uses is a port of the pods it means.
        names = {p["name"] for p in self.container["ports"]}
        etcd_names = {p["name"] for p in self.etcd_container["ports"]}
        for rule in policy["ingress"]:
            for port in rule["ports"]:
                self.assertIn(port["port"], names)
        for rule in etcd_policy["ingress"]:
            for port in rule["ports"]:
                self.assertIn(port["port"], etcd_names)

    def test_services_select_the_pods_and_name_their_ports(self):
        for service in (o for o in self.objects if o["kind"] == "Service"):
            name = service["metadata"]["name"]
            with self.subTest(service=name):
                target = (self.etcd if name.startswith("hourglass-etcd")
                          else self.statefulset)
                pod = target["spec"]["template"]
                self.assertTrue(self.selects(service["spec"]["selector"],
                                             pod["metadata"]["labels"]))
                names = {p["name"]
                         for p in pod["spec"]["containers"][0]["ports"]}
                for port in service["spec"]["ports"]:
                    self.assertIn(port["targetPort"], names)
        self.assertEqual(
            sorted(o["metadata"]["name"] for o in self.objects
                   if o["kind"] == "Service"),
            ["hourglass", "hourglass-etcd", "hourglass-headless"])


if __name__ == "__main__":
    unittest.main()
