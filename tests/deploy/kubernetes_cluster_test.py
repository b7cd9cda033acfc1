"""deploy/kubernetes/cluster, read with a YAML parser (no cluster here):
three hourglassd whose node ids, advertised names and etcd endpoints agree
with the Services and the etcd StatefulSet; readiness that asks health ""
(the primary or an in-sync backup, node/README.md "Health"); leader
transfer on SIGTERM within the termination grace; a PodDisruptionBudget;
a NetworkPolicy that lets the nodes replicate to each other and reach
etcd; pods spread over machines and zones; mutual TLS with a CA for
clients and another for nodes.

Then what can run here does: deploy/make-cluster-certs.sh, checked with
openssl; the `zone` init container's script, with curl, against a
stand-in API server on loopback; and the StatefulSet's hourglassd
command, with those certificates and flag files, as three nodes and a
real etcd on loopback, probed as the kubelet would."""

import http.server
import json
import os
import re
import shutil
import signal
import ssl
import stat
import subprocess
import tempfile
import threading
import time
import unittest

import deploy_files
import docker_test
import kubernetes_test

DIRECTORY = ("deploy", "kubernetes", "cluster")
HEALTH = ["hourglass", "--addr=127.0.0.1:7070", "--timeout=3s", "health"]
CERTS_SCRIPT = ("deploy", "make-cluster-certs.sh")


def env_refs(container):
    """{name: fieldPath} of the container's variables from the pod's own
    fields (the downward API)."""
    return {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
            for e in container.get("env", []) if "valueFrom" in e}


def expand(value, variables):
    """`value` with its $(NAME) references replaced as Kubernetes replaces
    them in env values, command and args: a defined variable by its value,
    $$ by $, and any other reference left as written."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$"
        else variables.get(m.group(1), m.group(0)), value)


def container_env(container, fields):
    """{name: value} of the container's env as Kubernetes sets it, with
    `fields` ({fieldPath: value}) for the downward API."""
    env = {}
    for entry in container.get("env", []):
        if "valueFrom" in entry:
            env[entry["name"]] = fields[entry["valueFrom"]["fieldRef"][
                "fieldPath"]]
        else:
            env[entry["name"]] = expand(entry["value"], env)
    return env


def openssl(*args, check=True):
    result = subprocess.run(["openssl", *args], capture_output=True,
                            text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}: {result.stderr}")
    return result


def make_certs(directory, *options):
    """Runs deploy/make-cluster-certs.sh; the completed process."""
    return subprocess.run(
        ["bash", deploy_files.source_path(*CERTS_SCRIPT), *options,
         directory], capture_output=True, text=True, timeout=120)


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
        # Over TLS (the kubelet's gRPC probe cannot): the CLI in the pod
        # trusts the nodes' CA, expects a name every node certificate
        # holds, and presents the pod's own certificate, which the server
        # accepts as a peer's.
        env = container_env(self.container, {"metadata.name": "hourglass-1",
                                             "metadata.namespace": "ns"})
        self.assertEqual(env["HOURGLASS_TLS_CA"],
                         expand(self.flags["tls_peer_ca"], env))
        self.assertEqual(env["HOURGLASS_TLS_CERT"],
                         "/etc/hourglass/tls/hourglass-1.crt")
        self.assertEqual(env["HOURGLASS_TLS_CERT"],
                         expand(self.flags["tls_cert"], env))
        self.assertEqual(env["HOURGLASS_TLS_KEY"],
                         expand(self.flags["tls_key"], env))
        self.assertEqual(env["HOURGLASS_TLS_SERVER_NAME"],
                         self.named("Service", "hourglass")["metadata"][
                             "name"])
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

    def volume_at(self, path):
        """The volume the hourglassd container mounts at the directory
        of `path`, and the file name in it."""
        directory, name = os.path.split(path)
        mount = next(m for m in self.container["volumeMounts"]
                     if m["mountPath"] == directory)
        volume = next(v for v in self.pod["spec"]["volumes"]
                      if v["name"] == mount["name"])
        return volume, name

    def test_mutual_tls_with_one_ca_for_clients_and_another_for_nodes(self):
        self.assertNotIn("restore_from", self.flags)
        # Both CAs given, and not the same file: a --tls_peer_ca that is
        # also the clients' CA makes every client certificate a node's,
        # able to replicate.
        self.assertTrue(self.flags["tls_client_ca"])
        self.assertTrue(self.flags["tls_peer_ca"])
        self.assertNotEqual(self.flags["tls_client_ca"],
                            self.flags["tls_peer_ca"])
        # Each pod's own pair, from the one Secret.
        self.assertEqual(self.flags["tls_cert"],
                         "/etc/hourglass/tls/$(POD_NAME).crt")
        self.assertEqual(self.flags["tls_key"],
                         "/etc/hourglass/tls/$(POD_NAME).key")
        files = set()
        for flag in ("tls_cert", "tls_key", "tls_client_ca", "tls_peer_ca"):
            volume, name = self.volume_at(self.flags[flag])
            self.assertEqual(volume["secret"]["secretName"], "hourglass-tls")
            self.assertEqual(volume["secret"]["defaultMode"], 0o440)
            files.add(name)
        self.assertEqual(files, {"$(POD_NAME).crt", "$(POD_NAME).key",
                                 "clients-ca.crt", "nodes-ca.crt"})
        # The files the script makes and its command loads.
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        made = make_certs(f"{work}/certs", "--nodes=2")
        self.assertEqual(made.returncode, 0, made.stderr)
        loaded = re.findall(r"--from-file=(\S+)", made.stdout.split(
            "create secret generic hourglass-tls")[1].split("kubectl")[0])
        self.assertEqual(
            sorted(os.path.basename(f) for f in loaded),
            sorted({expand(f, {"POD_NAME": f"hourglass-{n}"})
                    for n in range(2) for f in files}))

    def test_tokens_from_the_secret(self):
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
                for container in (pod["containers"]
                                  + pod.get("initContainers", [])):
                    context = container["securityContext"]
                    self.assertTrue(context["readOnlyRootFilesystem"])
                    self.assertFalse(context["allowPrivilegeEscalation"])
                    self.assertEqual(context["capabilities"]["drop"],
                                     ["ALL"])

    def test_pods_spread_over_machines_and_zones(self):
        for statefulset in (self.statefulset, self.etcd):
            with self.subTest(statefulset=statefulset["metadata"]["name"]):
                pod = statefulset["spec"]["template"]
                labels = pod["metadata"]["labels"]
                spec = pod["spec"]
                # Never two on one machine: that machine would take two
                # copies of a shard (two etcd members) with it.
                terms = spec["affinity"]["podAntiAffinity"][
                    "requiredDuringSchedulingIgnoredDuringExecution"]
                self.assertEqual(len(terms), 1)
                self.assertEqual(terms[0]["topologyKey"],
                                 "kubernetes.io/hostname")
                self.assertEqual(terms[0]["labelSelector"]["matchLabels"],
                                 statefulset["spec"]["selector"][
                                     "matchLabels"])
                self.assertTrue(self.selects(
                    terms[0]["labelSelector"]["matchLabels"], labels))
                # Over the zones as far as there are any: a hard rule
                # would leave the pods Pending where nodes have no zone.
                [spread] = spec["topologySpreadConstraints"]
                self.assertEqual(spread["topologyKey"],
                                 "topology.kubernetes.io/zone")
                self.assertEqual(spread["maxSkew"], 1)
                self.assertEqual(spread["whenUnsatisfiable"],
                                 "ScheduleAnyway")
                self.assertEqual(spread["labelSelector"]["matchLabels"],
                                 statefulset["spec"]["selector"][
                                     "matchLabels"])
        # hourglassd's and etcd's selectors do not select each other's pods.
        self.assertFalse(self.selects(
            self.statefulset["spec"]["selector"]["matchLabels"],
            self.etcd["spec"]["template"]["metadata"]["labels"]))

    def test_the_zone_flag_file_comes_from_an_init_container(self):
        spec = self.pod["spec"]
        [init] = spec["initContainers"]
        self.assertEqual(init["name"], "zone")
        # The broker's image (its curl), set by the same `images:` entry.
        self.assertEqual(init["image"], self.container["image"])
        dockerfile = deploy_files.read_text("deploy", "Dockerfile")
        runtime = dockerfile[dockerfile.rindex("\nFROM "):]
        self.assertRegex(runtime, r"apt-get install -y --no-install-recommends"
                                  r" curl\b")
        self.assertEqual(init["command"][:2], ["sh", "-c"])
        self.assertEqual(env_refs(init), {"NODE_NAME": "spec.nodeName"})
        # hourglassd reads the flag file the init container writes, last.
        flag_file = self.container["args"][-1]
        self.assertEqual(flag_file, "--flagfile=/run/hourglass/zone.flags")
        self.assertNotIn("zone", self.flags)
        volume, name = self.volume_at(self.flags["flagfile"])
        self.assertIn("emptyDir", volume)
        init_mounts = {m["mountPath"]: m["name"]
                       for m in init["volumeMounts"]}
        self.assertEqual(init_mounts["/run/hourglass"], volume["name"])
        self.assertIn(f"/run/hourglass/{name}", init["command"][2])
        # The API token: in the init container alone, from a projected
        # volume of the ServiceAccount bound to `get` on nodes, nothing more.
        token = next(v for v in spec["volumes"]
                     if v["name"] == init_mounts[
                         "/var/run/secrets/kubernetes.io/serviceaccount"])
        sources = token["projected"]["sources"]
        self.assertEqual(sources[0]["serviceAccountToken"]["path"], "token")
        self.assertEqual(sources[1]["configMap"]["name"], "kube-root-ca.crt")
        self.assertNotIn(token["name"], {m["name"] for m in
                                         self.container["volumeMounts"]})
        account = self.named("ServiceAccount", spec["serviceAccountName"])
        self.assertFalse(account["automountServiceAccountToken"])
        binding = self.named("ClusterRoleBinding", "hourglass-node-reader")
        self.assertEqual([(s["kind"], s["name"]) for s in binding["subjects"]],
                         [("ServiceAccount", account["metadata"]["name"])])
        role = self.named("ClusterRole", binding["roleRef"]["name"])
        self.assertEqual(role["rules"], [{"apiGroups": [""],
                                          "resources": ["nodes"],
                                          "verbs": ["get"]}])
        # And the NetworkPolicy lets it out to the API server.
        policy = self.named("NetworkPolicy", "hourglass")["spec"]
        self.assertTrue(any(
            "to" not in rule and {"port": 443, "protocol": "TCP"}
            in rule["ports"] and {"port": 6443, "protocol": "TCP"}
            in rule["ports"] for rule in policy["egress"]))

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


class ClusterCertificatesTest(unittest.TestCase):
    """deploy/make-cluster-certs.sh, run into a temporary directory and its
    output checked with openssl."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp()
        cls.dir = os.path.join(cls.work, "certs")
        cls.made = make_certs(cls.dir, "--namespace=brokers")
        manifests = KubernetesClusterTest("setUp")
        manifests.setUp()
        cls.manifests = manifests

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work)

    def path(self, name):
        return os.path.join(self.dir, name)

    def verifies(self, cert, ca, *options):
        return openssl("verify", "-CAfile", self.path(ca), *options,
                       self.path(cert), check=False).returncode == 0

    def extension(self, cert, name):
        return openssl("x509", "-in", self.path(cert), "-noout", "-ext",
                       name).stdout

    def test_makes_two_cas_a_certificate_per_node_and_a_client(self):
        self.assertEqual(self.made.returncode, 0, self.made.stderr)
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(
            f"{name}.{ext}" for name in ("nodes-ca", "clients-ca",
                                         "hourglass-0", "hourglass-1",
                                         "hourglass-2", "hourglass-client")
            for ext in ("crt", "key")))
        self.assertEqual(stat.S_IMODE(os.stat(self.dir).st_mode), 0o700)
        for name in os.listdir(self.dir):
            with self.subTest(file=name):
                mode = stat.S_IMODE(os.stat(self.path(name)).st_mode)
                self.assertEqual(mode, 0o600 if name.endswith(".key")
                                 else 0o644)
        for ca in ("nodes-ca", "clients-ca"):
            with self.subTest(ca=ca):
                self.assertIn("CA:TRUE", self.extension(f"{ca}.crt",
                                                        "basicConstraints"))
        # The two CAs are two: not one key under two names.
        self.assertNotEqual(
            openssl("x509", "-in", self.path("nodes-ca.crt"), "-noout",
                    "-pubkey").stdout,
            openssl("x509", "-in", self.path("clients-ca.crt"), "-noout",
                    "-pubkey").stdout)

    def test_node_certificates_are_the_nodes_cas_for_both_ends(self):
        headless = self.manifests.statefulset["spec"]["serviceName"]
        server_name = container_env(
            self.manifests.container,
            {"metadata.name": "x", "metadata.namespace": "brokers"})[
                "HOURGLASS_TLS_SERVER_NAME"]
        for n in range(self.manifests.statefulset["spec"]["replicas"]):
            node = f"hourglass-{n}"
            cert = f"{node}.crt"
            with self.subTest(node=node):
                self.assertTrue(self.verifies(cert, "nodes-ca.crt"))
                self.assertFalse(self.verifies(cert, "clients-ca.crt"))
                # Both extended key usages: a node is a server to its
                # clients and a client of its peers.
                self.assertTrue(self.verifies(cert, "nodes-ca.crt",
                                              "-purpose", "sslserver"))
                self.assertTrue(self.verifies(cert, "nodes-ca.crt",
                                              "-purpose", "sslclient"))
                usage = self.extension(cert, "extendedKeyUsage")
                self.assertIn("TLS Web Server Authentication", usage)
                self.assertIn("TLS Web Client Authentication", usage)
                # The names it is dialled at: the host of its --advertise
                # (peers verify that), the headless Service, and the name
                # the probes expect.
                advertised = expand(
                    self.manifests.flags["advertise"],
                    {"POD_NAME": node, "POD_NAMESPACE": "brokers"})
                host = advertised.rsplit(":", 1)[0]
                names = set(re.findall(r"DNS:([^,\s]+)",
                                       self.extension(cert,
                                                      "subjectAltName")))
                for name in (host, f"{host}.cluster.local",
                             f"{node}.{headless}", f"{headless}.brokers.svc",
                             server_name, "hourglass.brokers.svc"):
                    self.assertIn(name, names)
                self.assertTrue(self.verifies(cert, "nodes-ca.crt",
                                              "-verify_hostname", host))
                self.assertFalse(any(f"hourglass-{m}." in name
                                     for name in names
                                     for m in range(3) if m != n))
                # Its key is the certificate's.
                self.assertEqual(
                    openssl("x509", "-in", self.path(cert), "-noout",
                            "-pubkey").stdout,
                    openssl("pkey", "-in", self.path(f"{node}.key"),
                            "-pubout").stdout)

    def test_the_client_certificate_is_the_clients_cas_only(self):
        cert = "hourglass-client.crt"
        self.assertTrue(self.verifies(cert, "clients-ca.crt"))
        self.assertTrue(self.verifies(cert, "clients-ca.crt",
                                      "-purpose", "sslclient"))
        self.assertFalse(self.verifies(cert, "nodes-ca.crt"))
        self.assertFalse(self.verifies(cert, "clients-ca.crt",
                                       "-purpose", "sslserver"))
        self.assertIn("CN = hourglass-client", openssl(
            "x509", "-in", self.path(cert), "-noout", "-subject").stdout)

    def test_prints_the_commands_that_load_the_secrets(self):
        out = self.made.stdout
        self.assertIn("kubectl -n brokers create secret generic "
                      "hourglass-tls", out)
        self.assertIn("kubectl -n brokers create secret generic "
                      "hourglass-client-tls", out)
        self.assertIn(f"--from-file=ca.crt={self.path('nodes-ca.crt')}", out)
        # The CA keys stay out of the cluster.
        self.assertNotIn("ca.key", re.sub(r"^Made in .*$", "", out, flags=re.M)
                         .replace("nodes-ca.key and clients-ca.key", ""))

    def test_refuses_to_overwrite_and_adds_only_what_is_missing(self):
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        target = os.path.join(work, "certs")
        self.assertEqual(make_certs(target, "--nodes=2").returncode, 0)

        def contents():
            result = {}
            for name in sorted(os.listdir(target)):
                with open(os.path.join(target, name), "rb") as f:
                    result[name] = f.read()
            return result

        before = contents()
        again = make_certs(target, "--nodes=2")
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("refusing to overwrite", again.stderr)
        self.assertEqual(contents(), before)
        # One key in the way is enough to refuse, and nothing is written.
        os.remove(os.path.join(target, "hourglass-1.crt"))
        os.remove(os.path.join(target, "nodes-ca.crt"))
        self.assertNotEqual(make_certs(target, "--nodes=2").returncode, 0)
        self.assertEqual(len(os.listdir(target)), len(before) - 2)
        # --add signs what is missing with the CAs that are there; a node
        # with half a pair is refused, not mended.
        with open(os.path.join(target, "nodes-ca.crt"), "wb") as f:
            f.write(before["nodes-ca.crt"])
        half = make_certs(target, "--nodes=3", "--add")
        self.assertNotEqual(half.returncode, 0)
        self.assertIn("hourglass-1", half.stderr)
        with open(os.path.join(target, "hourglass-1.crt"), "wb") as f:
            f.write(before["hourglass-1.crt"])
        added = make_certs(target, "--nodes=3", "--add")
        self.assertEqual(added.returncode, 0, added.stderr)
        self.assertIn("kubectl apply -f -", added.stdout)
        after = contents()
        self.assertEqual({k: v for k, v in after.items() if k in before},
                         before)
        self.assertEqual(sorted(set(after) - set(before)),
                         ["hourglass-2.crt", "hourglass-2.key"])
        self.assertEqual(openssl("verify", "-CAfile",
                                 os.path.join(target, "nodes-ca.crt"),
                                 os.path.join(target, "hourglass-2.crt"),
                                 check=False).returncode, 0)
        self.assertEqual(
            stat.S_IMODE(os.stat(os.path.join(target, "hourglass-2.key"))
                         .st_mode), 0o600)
        # No leftovers of its work.
        self.assertFalse([n for n in os.listdir(target) if n.startswith(".")])


class FakeApiServer:
    """An HTTPS server on loopback that answers GET /api/v1/nodes/NAME as
    the Kubernetes API server does, with the metadata of `nodes`, to a
    caller with `token`; 403 for a node named "forbidden"."""

    def __init__(self, work, token, nodes, pretty):
        self.requests = []
        key, cert = os.path.join(work, "api.key"), os.path.join(work, "api.crt")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                "-subj", "/CN=kube-apiserver",
                "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", key, "-out", cert)
        self.ca = cert
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append((self.path, dict(self.headers)))
                name = self.path.rsplit("/", 1)[-1]
                if self.headers.get("Authorization") != f"Bearer {token}":
                    return self.answer(401, {"reason": "Unauthorized"})
                if name == "forbidden":
                    return self.answer(403, {"reason": "Forbidden"})
                if name not in nodes:
                    return self.answer(404, {"reason": "NotFound"})
                self.answer(200, {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"name": name, "labels": nodes[name],
                                 "annotations": {"note": "zone"}}})

            def answer(self, code, body):
                # The API server pretty-prints for curl's user agent.
                data = json.dumps(body, indent=2 if pretty else None,
                                  separators=None if pretty else (",", ":"))
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket,
                                                server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class ZoneInitContainerTest(unittest.TestCase):
    """The `zone` init container's script, run by sh with curl as in the
    pod, against a stand-in API server, with the pod's mount paths moved
    into a temporary directory."""

    TOKEN = "test-token-for-the-zone-script"

    def setUp(self):
        manifests = KubernetesClusterTest("setUp")
        manifests.setUp()
        self.init = manifests.pod["spec"]["initContainers"][0]
        self.work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.work)

    def run_script(self, node, labels, pretty=True):
        """(exit status, output, the flag file's text or None, the
        requests the server saw) of the script in a pod on `node`, whose
        labels are `labels`."""
        server = FakeApiServer(self.work, self.TOKEN, {"n1": labels},
                               pretty)
        self.addCleanup(server.close)
        account = tempfile.mkdtemp(dir=self.work)
        with open(os.path.join(account, "token"), "w") as f:
            f.write(self.TOKEN)
        shutil.copy(server.ca, os.path.join(account, "ca.crt"))
        run = tempfile.mkdtemp(dir=self.work)
        mounts = {m["mountPath"]: m["name"]
                  for m in self.init["volumeMounts"]}
        self.assertEqual(set(mounts), {
            "/run/hourglass", "/var/run/secrets/kubernetes.io/serviceaccount"})
        script = (self.init["command"][2]
                  .replace("/var/run/secrets/kubernetes.io/serviceaccount",
                           account)
                  .replace("/run/hourglass", run))
        result = subprocess.run(
            self.init["command"][:2] + [script], capture_output=True,
            text=True, timeout=60,
            env={"PATH": os.environ["PATH"], "NODE_NAME": node,
                 "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                 "KUBERNETES_SERVICE_PORT": str(server.port)})
        flags = os.path.join(run, "zone.flags")
        text = None
        if os.path.exists(flags):
            with open(flags, encoding="utf-8") as f:
                text = f.read()
        return (result.returncode, result.stdout + result.stderr, text,
                server.requests)

    def flags_of(self, text):
        lines = [l for l in text.splitlines()
                 if l.strip() and not l.startswith("#")]
        return deploy_files.parse_flags(lines)

    def test_the_zone_label_becomes_the_zone_flag(self):
        for pretty in (True, False):
            with self.subTest(pretty=pretty):
                code, output, text, requests = self.run_script(
                    "n1", {"kubernetes.io/hostname": "n1",
                           "topology.kubernetes.io/region": "eu-west",
                           "topology.kubernetes.io/zone": "eu-west-1b"},
                    pretty)
                self.assertEqual(code, 0, output)
                self.assertEqual(self.flags_of(text), {"zone": "eu-west-1b"})
                [(path, headers)] = requests
                self.assertEqual(path, "/api/v1/nodes/n1")
                self.assertIn("as=PartialObjectMetadata", headers["Accept"])

    def test_the_deprecated_label_serves_when_the_new_one_is_absent(self):
        code, output, text, _ = self.run_script(
            "n1", {"failure-domain.beta.kubernetes.io/zone": "rack-7"})
        self.assertEqual(code, 0, output)
        self.assertEqual(self.flags_of(text), {"zone": "rack-7"})

    def test_no_zone_label_gives_a_flag_file_without_zone(self):
        for labels in ({"kubernetes.io/hostname": "n1"},
                       {"topology.kubernetes.io/zone": ""}):
            with self.subTest(labels=labels):
                code, output, text, _ = self.run_script("n1", labels)
                self.assertEqual(code, 0, output)
                self.assertEqual(self.flags_of(text), {})
                self.assertIn("no --zone", text)
                self.assertIn("without --zone", output)

    def test_an_unreadable_node_fails_the_pod_start(self):
        for node in ("forbidden", "unknown"):
            with self.subTest(node=node):
                code, output, text, _ = self.run_script(node, {})
                self.assertNotEqual(code, 0)
                self.assertIsNone(text)
                self.assertIn("cannot read node", output)

    def test_hourglassd_starts_with_a_flag_file_without_zone(self):
        _, _, text, _ = self.run_script("n1", {})
        flags = os.path.join(self.work, "zone.flags")
        with open(flags, "w", encoding="utf-8") as f:
            f.write(text)
        entrypoint = [
            arg.replace(docker_test.FLAG_FILE,
                        deploy_files.source_path("deploy", "hourglassd.flags"))
            for arg in docker_test.exec_form("ENTRYPOINT")[1:]]
        process = subprocess.Popen(
            [deploy_files.env("HOURGLASSD")] + entrypoint + [
                "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
                f"--data_dir={self.work}/data", "--block_cache_mb=8",
                f"--flagfile={flags}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(process.stdout.close)
        self.addCleanup(process.kill)
        docker_test.read_until(process, "listening on", timeout=60)
        process.send_signal(signal.SIGTERM)
        self.assertEqual(process.wait(timeout=60), 0)


class TlsClusterTest(unittest.TestCase):
    """The StatefulSet's hourglassd command as three nodes on loopback with
    a real etcd: the certificates of deploy/make-cluster-certs.sh and the
    init container's flag files at the paths the pod mounts them, the
    readiness probe run as the kubelet runs it, and clients with and
    without the client certificate. Two things differ from the pods: the
    nodes listen and advertise on loopback ports, and since the pods'
    stable names do not resolve here they verify each other by a name all
    node certificates hold (--tls_peer_server_name=hourglass);
    ClusterCertificatesTest checks each certificate names its pod."""

    def setUp(self):
        manifests = KubernetesClusterTest("setUp")
        manifests.setUp()
        self.container = manifests.container
        self.probe = self.container["readinessProbe"]["exec"]["command"]
        self.work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.work)
        self.processes = []

    def start(self, argv, ready):
        process = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        drain = threading.Thread(target=process.stdout.read, daemon=True)

        def stop():
            process.kill()
            process.wait()
            if drain.ident is not None:
                drain.join()
            process.stdout.close()

        self.addCleanup(stop)
        self.processes.append(process)
        docker_test.read_until(process, ready, timeout=60)
        drain.start()

    def test_the_pods_command_makes_a_mutual_tls_cluster_with_zones(self):
        certs = os.path.join(self.work, "certs")
        made = make_certs(certs)
        self.assertEqual(made.returncode, 0, made.stderr)
        # The token file: an admin token, and a cert line for the client
        # certificate, as the script's last lines suggest.
        auth = os.path.join(self.work, "auth")
        os.mkdir(auth)
        token = "admin-token-of-the-tls-cluster-test"
        with open(os.path.join(auth, "tokens"), "w") as f:
            f.write(f"{token} admin,produce,consume\n"
                    "cert hourglass-client admin,produce,consume\n")
        os.chmod(os.path.join(auth, "tokens"), 0o600)

        client, peer = docker_test.free_port(), docker_test.free_port()
        self.start(["etcd", f"--data-dir={self.work}/etcd",
                    f"--listen-client-urls=http://127.0.0.1:{client}",
                    f"--advertise-client-urls=http://127.0.0.1:{client}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=default=http://127.0.0.1:{peer}"],
                   "ready to serve client requests")

        entrypoint = [
            arg.replace(docker_test.FLAG_FILE,
                        deploy_files.source_path("deploy", "hourglassd.flags"))
            for arg in docker_test.exec_form("ENTRYPOINT")[1:]]
        zones = {}
        addresses = {}
        envs = {}
        for n in range(3):
            node = f"hourglass-{n}"
            zones[node] = f"zone-{'abc'[n]}"
            # What the init container writes for a node in that zone.
            run = os.path.join(self.work, node, "run")
            os.makedirs(run)
            with open(os.path.join(run, "zone.flags"), "w") as f:
                f.write(f"--zone={zones[node]}\n")
            mounts = {"/etc/hourglass/tls": certs,
                      "/etc/hourglass/auth": auth,
                      "/run/hourglass": run,
                      "/data": os.path.join(self.work, node, "data")}
            for mount in self.container["volumeMounts"]:
                if mount["name"] != "tmp":
                    self.assertIn(mount["mountPath"], mounts)

            def localize(value, mounts=mounts):
                for path in sorted(mounts, key=len, reverse=True):
                    value = value.replace(path, mounts[path])
                return value

            env = container_env(self.container,
                                {"metadata.name": node,
                                 "metadata.namespace": "default"})
            envs[node] = {k: localize(v) for k, v in env.items()}
            port = docker_test.free_port()
            addresses[node] = f"127.0.0.1:{port}"
            args = [localize(expand(a, env))
                    for a in entrypoint + self.container["args"]]
            self.start([deploy_files.env("HOURGLASSD")] + args + [
                f"--etcd=127.0.0.1:{client}", f"--listen={addresses[node]}",
                f"--advertise={addresses[node]}",
                "--metrics_listen=127.0.0.1:0", "--block_cache_mb=8",
                "--tls_peer_server_name=hourglass"], "listening on")

        def probe(node):
            argv = [deploy_files.env("HOURGLASS")] + [
                f"--addr={addresses[node]}" if a.startswith("--addr=")
                else a for a in self.probe[1:]]
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=30,
                env={"PATH": os.environ["PATH"], **envs[node]})

        # Every node ready, as the kubelet's probe sees it: the shards are
        # replicated over TLS and each node is primary or in sync.
        deadline = time.monotonic() + 60
        while True:
            results = {node: probe(node) for node in addresses}
            if all(r.returncode == 0 for r in results.values()):
                break
            if time.monotonic() > deadline:
                self.fail({n: r.stdout + r.stderr
                           for n, r in results.items()})
            time.sleep(0.2)

        def cli(*args, **tls):
            argv = [deploy_files.env("HOURGLASS"),
                    f"--addr={','.join(addresses.values())}",
                    "--timeout=5s", "--tls-server-name=hourglass",
                    f"--tls-ca={certs}/nodes-ca.crt"]
            argv += [f"--{k.replace('_', '-')}={v}" for k, v in tls.items()]
            return subprocess.run(argv + list(args), capture_output=True,
                                  text=True, timeout=60,
                                  env={"PATH": os.environ["PATH"]})

        client_cert = {"tls_cert": f"{certs}/hourglass-client.crt",
                       "tls_key": f"{certs}/hourglass-client.key"}
        # The client certificate is let in, and its cert line grants it.
        cluster = cli("--json", "cluster", **client_cert)
        self.assertEqual(cluster.returncode, 0, cluster.stderr)
        cluster = json.loads(cluster.stdout)
        self.assertEqual({n["id"]: n.get("zone") for n in cluster["nodes"]},
                         zones)
        # Every shard's three copies in three zones, all in sync.
        self.assertEqual(len(cluster["shards"]), 16)
        for shard in cluster["shards"]:
            self.assertEqual(sorted(zones[r] for r in shard["replicas"]),
                             sorted(zones.values()))
            self.assertEqual(len(shard["isr"]), 3)
        published = cli("publish", "--topic=orders", "--delay=1h",
                        "--data=x", **client_cert)
        self.assertEqual(published.returncode, 0, published.stderr)
        # Without a client certificate the handshake fails, token or not;
        # a certificate of the nodes' CA is no client's.
        refused = cli("health")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("TLS handshake failed", refused.stderr)


if __name__ == "__main__":
    unittest.main()
