"""deploy/hourglassd.flags lists every flag of hourglassd with its default,
as it says; every flag a deploy file passes is one hourglassd has."""

import json
import re
import shlex
import unittest

import deploy_files


def flag_file():
    flags = {}
    for line in deploy_files.read_text("deploy", "hourglassd.flags").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            flags.update(deploy_files.parse_flags([line]))
    return flags


def deploy_file_flags():
    """{file: [flag names]} of the flags the deploy files pass to
    hourglassd."""
    used = {}
    dockerfile = deploy_files.read_text("deploy", "Dockerfile")
    # The last stage's (the broker's; the etcd stage comes before it).
    entrypoint = re.findall(r"^ENTRYPOINT (\[.*?\])$",
                            dockerfile.replace("\\\n", ""), re.M | re.S)[-1]
    used["deploy/Dockerfile"] = json.loads(entrypoint)[1:]
    for doc in deploy_files.load_yaml_documents("deploy", "kubernetes",
                                                "statefulset.yaml"):
        container = doc["spec"]["template"]["spec"]["containers"][0]
        used["deploy/kubernetes/statefulset.yaml"] = container["args"]
    for doc in deploy_files.load_yaml_documents(
            "deploy", "kubernetes", "cluster", "statefulset.yaml"):
        if doc["metadata"]["name"] == "hourglass":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            used["deploy/kubernetes/cluster/statefulset.yaml"] = (
                container["args"])
    compose = deploy_files.load_yaml("deploy", "docker-compose.cluster.yml")
    for name, service in compose["services"].items():
        # Not the peer-secret service, which runs a shell, not hourglassd.
        if (service.get("image", "").startswith("hourglass:")
                and "entrypoint" not in service):
            used[f"deploy/docker-compose.cluster.yml {name}"] = (
                service["command"])
    unit = deploy_files.read_text("deploy", "hourglassd.service")
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1)
    used["deploy/hourglassd.service"] = shlex.split(exec_start)[1:]
    return {path: sorted(deploy_files.parse_flags(args))
            for path, args in used.items()}


class FlagFileTest(unittest.TestCase):

    def test_lists_every_flag_of_hourglassd_with_its_default(self):
        help_flags = {name: default.strip('"') for name, default
                      in deploy_files.hourglassd_flags().items()}
        self.assertEqual(flag_file(), help_flags)

    def test_every_flag_the_deploy_files_pass_exists(self):
        # --flagfile is absl's own, not hourglassd's (--help omits it).
        known = set(deploy_files.hourglassd_flags()) | {"flagfile"}
        for path, names in deploy_file_flags().items():
            with self.subTest(path=path):
                self.assertTrue(names, f"no flags read from {path}")
                self.assertEqual([n for n in names if n not in known], [])


if __name__ == "__main__":
    unittest.main()
