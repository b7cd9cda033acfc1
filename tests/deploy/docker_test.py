"""deploy/Dockerfile and deploy/docker-compose.yml, read as Docker reads
them (no Docker here): the ENTRYPOINT holds what the image depends on, so
that arguments add flags instead of replacing them; the real hourglassd
takes the last value of a repeated flag, which lets arguments override."""

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import deploy_files

FLAG_FILE = "/etc/hourglass/hourglassd.flags"


def instructions():
    """(INSTRUCTION, arguments) of the Dockerfile's last stage, with line
    continuations joined and comments dropped, as Docker parses it."""
    text = deploy_files.read_text("deploy", "Dockerfile")
    lines = [l for l in text.splitlines() if not l.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", "", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            result.append((keyword.upper(), arguments.strip()))
    last_from = max(i for i, (k, _) in enumerate(result) if k == "FROM")
    return result[last_from:]


def exec_form(keyword):
    """The JSON (exec form) arguments of the stage's last `keyword`."""
    values = [a for k, a in instructions() if k == keyword]
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
