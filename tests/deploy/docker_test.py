"""deploy/Dockerfile, deploy/docker-compose.yml and
deploy/docker-compose.cluster.yml, read as Docker reads them (no Docker
here): the ENTRYPOINT holds what the image depends on, so that arguments
add flags instead of replacing them; the real hourglassd takes the last
value of a repeated flag, which lets arguments override. The cluster's
commands also run, on loopback, with Debian's etcd (deploy/setup.sh
installs it) and three hourglassd."""

import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import deploy_files

FLAG_FILE = "/etc/hourglass/hourglassd.flags"


def instructions(stage=None):
    """(INSTRUCTION, arguments) of the Dockerfile's stage named `stage`
    (default: the last, which `docker build` builds), with line
    continuations joined and comments dropped, as Docker parses it."""
    text = deploy_files.read_text("deploy", "Dockerfile")
    lines = [l for l in text.splitlines() if not l.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", "", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            result.append((keyword.upper(), arguments.strip()))
    starts = [i for i, (k, _) in enumerate(result) if k == "FROM"]
    if stage is None:
        return result[starts[-1]:]
    for at, end in zip(starts, starts[1:] + [len(result)]):
        if re.search(rf"\sAS\s+{stage}$", result[at][1], re.I):
            return result[at:end]
    raise AssertionError(f"no stage {stage} in deploy/Dockerfile")


def exec_form(keyword, stage=None):
    """The JSON (exec form) arguments of the stage's last `keyword`."""
    values = [a for k, a in instructions(stage) if k == keyword]
    if not values:
        raise AssertionError(f"no {keyword} in deploy/Dockerfile")
    return json.loads(values[-1])


def port(address):
    return int(address.rsplit(":", 1)[1])


class DockerfileTest(unittest.TestCase):

    def test_the_entrypoint_fixes_flag_file_addresses_and_data_dir(self):
        self.assertEqual(exec_form("ENTRYPOINT"), [
            "hourglassd", f"--flagfile={FLAG_FILE}", "--listen=0.0.0.0:7070",
            "--metrics_listen=0.0.0.0:9464", "--data_dir=/data"])

    def test_cmd_holds_nothing_that_arguments_would_take_away(self):
        self.assertEqual(exec_form("CMD"), [])

    def test_arguments_add_flags_and_keep_the_entrypoints(self):
        entrypoint = exec_form("ENTRYPOINT")[1:]
        for args in ([],
                     ["--auth_tokens=/etc/hourglass/tokens"],
                     # deploy/README.md's example with TLS and tokens.
                     ["--tls_cert=/etc/hourglass/tls/server.crt",
                      "--tls_key=/etc/hourglass/tls/server.key",
                      "--auth_tokens=/etc/hourglass/tokens"]):
            with self.subTest(args=args):
                flags = deploy_files.parse_flags(entrypoint + args)
                self.assertEqual(flags["listen"], "0.0.0.0:7070")
                self.assertEqual(flags["metrics_listen"], "0.0.0.0:9464")
                self.assertEqual(flags["data_dir"], "/data")
                self.assertEqual(flags["flagfile"], FLAG_FILE)
                for arg in args:
                    name, value = arg[2:].split("=", 1)
                    self.assertEqual(flags[name], value)

    def test_volume_ports_healthcheck_and_flag_file_match_the_entrypoint(self):
        flags = deploy_files.parse_flags(exec_form("ENTRYPOINT")[1:])
        self.assertEqual(exec_form("VOLUME"), [flags["data_dir"]])
        exposed = {int(p) for k, a in instructions() if k == "EXPOSE"
                   for p in a.split()}
        self.assertEqual(exposed, {port(flags["listen"]),
                                   port(flags["metrics_listen"])})
        healthcheck = next(a for k, a in instructions() if k == "HEALTHCHECK")
        command = json.loads(healthcheck[healthcheck.index("CMD") + 3:])
        self.assertEqual(command, [
            "hourglass", f"--addr=127.0.0.1:{port(flags['listen'])}",
            "--timeout=3s", "health"])
        self.assertIn(("COPY", f"deploy/hourglassd.flags {FLAG_FILE}"),
                      instructions())
        self.assertIn(("USER", "hourglass:hourglass"), instructions())

    def test_hourglassd_takes_the_last_value_so_arguments_override(self):
        # The ENTRYPOINT as the image runs it (the flag file at its path in
        # the repository), then arguments that give its flags again: the
        # broker must use the arguments' values.
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        entrypoint = exec_form("ENTRYPOINT")
        argv = [deploy_files.env("HOURGLASSD")] + [
            arg.replace(FLAG_FILE,
                        deploy_files.source_path("deploy", "hourglassd.flags"))
            for arg in entrypoint[1:]] + [
            "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
            f"--data_dir={work}/data", "--block_cache_mb=8"]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        self.addCleanup(process.stdout.close)
        self.addCleanup(process.kill)
        output = read_until(process, "listening on", timeout=60)
        self.assertIn(
            f"--listen=127.0.0.1:0 --data_dir={work}/data "
            "--metrics_listen=127.0.0.1:0", output)
        self.assertIn("block cache 8 MiB", output)
        process.send_signal(signal.SIGTERM)
        self.assertEqual(process.wait(timeout=60), 0)


def read_until(process, text, timeout):
    """process's output up to and including the first line holding `text`;
    fails with the output if the process ends or `timeout` passes first."""
    deadline = time.monotonic() + timeout
    output = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while text.encode() not in output:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise AssertionError(f"no {text!r} in time:\n"
                                     + output.decode(errors="replace"))
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"exited before {text!r}:\n"
                                     + output.decode(errors="replace"))
            output += chunk
    return output.decode(errors="replace")


class ComposeTest(unittest.TestCase):

    def setUp(self):
        self.compose = deploy_files.load_yaml("deploy", "docker-compose.yml")
        self.services = self.compose["services"]

    def test_the_broker_keeps_the_images_entrypoint(self):
        hourglass = self.services["hourglass"]
        self.assertNotIn("command", hourglass)
        self.assertNotIn("entrypoint", hourglass)
        self.assertEqual(hourglass["build"]["dockerfile"], "deploy/Dockerfile")
        self.assertEqual(hourglass["ports"], ["127.0.0.1:7070:7070"])
        self.assertEqual(hourglass["volumes"], ["hourglass-data:/data"])

    def test_mounted_files_exist(self):
        for name, service in self.services.items():
            for volume in service.get("volumes", []):
                source = volume.split(":")[0]
                if source.startswith("./"):
                    with self.subTest(service=name, volume=volume):
                        self.assertTrue(os.path.exists(
                            deploy_files.source_path("deploy", source[2:])))

    def test_grafana_loads_the_dashboard_from_prometheus(self):
        provider = deploy_files.load_yaml(
            "deploy", "grafana", "provisioning", "dashboards", "hourglass.yml")
        path = provider["providers"][0]["options"]["path"]
        self.assertIn(f"./grafana/hourglass.json:{path}/hourglass.json:ro",
                      self.services["grafana"]["volumes"])
        datasource = deploy_files.load_yaml(
            "deploy", "grafana", "provisioning", "datasources",
            "prometheus.yml")["datasources"][0]
        self.assertEqual(datasource["type"], "prometheus")
        self.assertTrue(datasource["isDefault"])
        self.assertEqual(datasource["url"], "http://prometheus:9090")
        self.assertIn("127.0.0.1:9090:9090", self.services["prometheus"]["ports"])


class EtcdStageTest(unittest.TestCase):
    """The `etcd` target that the cluster's Compose file and Kubernetes
    manifests run."""

    def test_debians_etcd_as_the_uid_kubernetes_runs_it_with(self):
        stage = instructions("etcd")
        self.assertEqual(stage[0], ("FROM", "debian:12-slim AS etcd"))
        run = " ".join(a for k, a in stage if k == "RUN")
        self.assertIn("apt-get install -y --no-install-recommends "
                      "etcd-server etcd-client", run)
        self.assertIn("--uid 10002", run)
        self.assertIn(("USER", "10002:10002"), stage)
        self.assertEqual(exec_form("VOLUME", "etcd"), ["/var/lib/etcd"])
        self.assertEqual(exec_form("ENTRYPOINT", "etcd"), ["etcd"])
        etcd = deploy_files.load_yaml_documents(
            "deploy", "kubernetes", "cluster", "etcd.yaml")
        pod = next(d for d in etcd if d["kind"] == "StatefulSet")[
            "spec"]["template"]["spec"]
        self.assertEqual(pod["securityContext"]["runAsUser"], 10002)
        self.assertEqual(pod["containers"][0]["volumeMounts"][0]["mountPath"],
                         "/var/lib/etcd")

    def test_the_default_target_is_still_the_broker(self):
        self.assertEqual(instructions()[0], ("FROM", "debian:12-slim"))
        self.assertEqual(exec_form("ENTRYPOINT")[0], "hourglassd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ComposeClusterTest(unittest.TestCase):
    """deploy/docker-compose.cluster.yml: read as Compose reads it, then its
    commands run for real on loopback (etcd and three hourglassd)."""

    def setUp(self):
        self.compose = deploy_files.load_yaml("deploy",
                                              "docker-compose.cluster.yml")
        self.services = self.compose["services"]
        self.nodes = {name: s for name, s in self.services.items()
                      if s["image"] == "hourglass:0.1.0"
                      and "entrypoint" not in s}

    def node_flags(self, name):
        return deploy_files.parse_flags(self.nodes[name]["command"])

    def test_etcd_is_the_dockerfiles_etcd_target_with_its_data_on_a_volume(self):
        etcd = self.services["etcd"]
        self.assertEqual(etcd["build"], {"context": "..",
                                         "dockerfile": "deploy/Dockerfile",
                                         "target": "etcd"})
        flags = deploy_files.parse_flags(etcd["command"])
        self.assertEqual(etcd["volumes"], ["etcd-data:/var/lib/etcd"])
        self.assertTrue(flags["data-dir"].startswith("/var/lib/etcd/"))
        self.assertEqual(etcd["healthcheck"]["test"][:2], ["CMD", "etcdctl"])

    def test_three_nodes_that_find_etcd_and_each_other(self):
        self.assertEqual(sorted(self.nodes), ["node1", "node2", "node3"])
        etcd = deploy_files.parse_flags(self.services["etcd"]["command"])
        listen_ports = set()
        for name, node in self.nodes.items():
            with self.subTest(node=name):
                # The image's ENTRYPOINT stays; the command adds flags.
                self.assertNotIn("entrypoint", node)
                self.assertEqual(node["build"]["dockerfile"],
                                 "deploy/Dockerfile")
                flags = self.node_flags(name)
                self.assertEqual(
                    "http://" + flags["etcd"],
                    etcd["advertise-client-urls"])
                self.assertEqual(flags["node_id"], name)
                node_port = port(flags["listen"])
                listen_ports.add(node_port)
                self.assertEqual(flags["listen"], f"0.0.0.0:{node_port}")
                # Inside the compose network the service name is the host.
                self.assertEqual(flags["advertise"], f"{name}:{node_port}")
                self.assertEqual(node["ports"],
                                 [f"127.0.0.1:{node_port}:{node_port}"])
                self.assertEqual(node["healthcheck"]["test"], [
                    "CMD", "hourglass", f"--addr=127.0.0.1:{node_port}",
                    "--timeout=3s", "health"])
                self.assertEqual(node["volumes"], [
                    f"{name}-data:/data", "peer-secret:/etc/hourglass/peer:ro"])
                self.assertEqual(flags["peer_token_file"],
                                 "/etc/hourglass/peer/peer-secret")
                self.assertEqual(node["depends_on"], {
                    "etcd": {"condition": "service_healthy"},
                    "peer-secret": {
                        "condition": "service_completed_successfully"}})
                # Exit 3 (a lost lease) must bring the node back.
                self.assertEqual(node["restart"], "unless-stopped")
                self.assertEqual(node["stop_grace_period"], "30s")
        self.assertEqual(len(listen_ports), 3)

    def test_the_commands_make_a_cluster_that_hands_over_on_sigterm(self):
        # Compose's commands as they are, on loopback: etcd's flags plus
        # peer URLs on a free port (its default, 2380, may be taken here),
        # hourglassd's ENTRYPOINT and command with the compose names and
        # ports replaced by free loopback ports.
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        etcd_service = self.services["etcd"]
        client, peer = free_port(), free_port()
        etcd_argv = ["etcd"] + [
            arg.replace("0.0.0.0:2379", f"127.0.0.1:{client}")
            .replace("etcd:2379", f"127.0.0.1:{client}")
            .replace("/var/lib/etcd", f"{work}/etcd")
            for arg in etcd_service["command"]] + [
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=etcd=http://127.0.0.1:{peer}"]
        self.start(etcd_argv, "ready to serve client requests")
        # The peer-secret service's command, its volume a local directory:
        # it makes the secret once, and keeps it on a second run.
        secrets = os.path.join(work, "peer")
        os.mkdir(secrets)
        make_secret = [arg.replace("/data", secrets) for arg in
                       self.services["peer-secret"]["entrypoint"]]
        subprocess.run(make_secret, check=True, timeout=10)
        secret_file = os.path.join(secrets, "peer-secret")
        with open(secret_file) as f:
            secret = f.read()
        self.assertRegex(secret, r"^[0-9a-f]{64}$")
        self.assertEqual(os.stat(secret_file).st_mode & 0o777, 0o600)
        subprocess.run(make_secret, check=True, timeout=10)
        with open(secret_file) as f:
            self.assertEqual(f.read(), secret)
        entrypoint = [
            arg.replace(FLAG_FILE,
                        deploy_files.source_path("deploy", "hourglassd.flags"))
            for arg in exec_form("ENTRYPOINT")[1:]]
        addresses = {}
        for name in sorted(self.nodes):
            flags = self.node_flags(name)
            node_port = free_port()
            addresses[name] = f"127.0.0.1:{node_port}"
            command = [
                arg.replace(flags["etcd"], f"127.0.0.1:{client}")
                .replace(flags["listen"], addresses[name])
                .replace(flags["advertise"], addresses[name])
                .replace("/etc/hourglass/peer", secrets)
                for arg in self.nodes[name]["command"]]
            self.start([deploy_files.env("HOURGLASSD")] + entrypoint + [
                f"--data_dir={work}/{name}", "--metrics_listen=127.0.0.1:0",
                "--block_cache_mb=8"] + command, "listening on")

        # No --shards: the cluster has the default 16, each copied on the
        # three nodes, the primaries taken in turn, so every node leads
        # some shards and is in sync for the others.
        want = {name: ("SERVING", "SERVING") for name in addresses}
        self.assertEqual(self.await_health(addresses, want), want)
        cluster = cli_cluster(addresses.values())
        self.assertEqual(cluster.get("shard_count"), 16)
        led = {shard["primary"] for shard in cluster.get("shards", [])}
        self.assertEqual(led, set(addresses))

        # docker stop: SIGTERM, and the shards node1 led have another
        # primary at once.
        node1 = self.processes[1]
        node1.send_signal(signal.SIGTERM)
        exit_code = node1.wait(timeout=30)
        self.drains[1].join(timeout=10)
        self.assertEqual(exit_code, 0, b"".join(node1.output)[-8000:]
                         .decode(errors="replace"))
        del addresses["node1"]
        deadline = time.monotonic() + 30
        while True:
            cluster = cli_cluster(addresses.values())
            primaries = sorted(
                {s["primary"] for s in cluster.get("shards", [])})
            if primaries == sorted(addresses) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(primaries, sorted(addresses))
        self.assertEqual(len(cluster.get("shards", [])), 16)
        want = {name: ("SERVING", "SERVING") for name in addresses}
        self.assertEqual(self.await_health(addresses, want), want)

    def start(self, argv, ready):
        """Starts argv and reads its output until `ready`; then a thread
        reads the rest, so that the child never waits on a full pipe."""
        process = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        process.output = []
        drain = threading.Thread(
            target=lambda: process.output.append(process.stdout.read()),
            daemon=True)

        def stop():
            process.kill()
            process.wait()
            if drain.is_alive() or drain.ident is not None:
                drain.join()
            process.stdout.close()

        self.addCleanup(stop)
        if not hasattr(self, "processes"):
            self.processes = []
        self.processes.append(process)
        if not hasattr(self, "drains"):
            self.drains = []
        self.drains.append(drain)
        process.output.append(
            read_until(process, ready, timeout=60).encode())
        drain.start()

    def await_health(self, addresses, want, timeout=30):
        """{node: (health "", health hourglass.v1.Primary)} as the CLI
        reports them, once they are `want`; the last seen if not within
        `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            seen = {name: (cli_health(address), cli_health(
                        address, "hourglass.v1.Primary"))
                    for name, address in addresses.items()}
            if seen == want:
                return seen
            if time.monotonic() > deadline:
                return seen
            time.sleep(0.1)


def cli_cluster(addresses):
    """The cluster map that `hourglass --addr=A,B,... --json cluster`
    prints ({} if it fails)."""
    argv = [deploy_files.env("HOURGLASS"), f"--addr={','.join(addresses)}",
            "--timeout=3s", "--json", "cluster"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return json.loads(result.stdout) if result.returncode == 0 else {}


def cli_health(address, service=None):
    """What `hourglass --addr=ADDRESS health [--service=...]` prints."""
    argv = [deploy_files.env("HOURGLASS"), f"--addr={address}",
            "--timeout=3s", "health"]
    if service:
        argv.append(f"--service={service}")
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return result.stdout.strip()


class TlsExamplesTest(unittest.TestCase):

    def test_every_example_giving_a_ca_also_names_the_server(self):
        # The CLI dials 127.0.0.1 in the image (HEALTHCHECK) and in the pod
        # (probes): without HOURGLASS_TLS_SERVER_NAME, the certificate's
        # name does not match and the check fails however healthy the
        # broker is.
        readme = deploy_files.read_text("deploy", "README.md")
        blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
        examples = [b for b in blocks if "HOURGLASS_TLS_CA" in b]
        self.assertTrue(examples)
        for block in examples:
            with self.subTest(block=block):
                self.assertIn("HOURGLASS_TLS_SERVER_NAME=", block)


if __name__ == "__main__":
    unittest.main()
