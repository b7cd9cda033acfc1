"""`cmake --install` of the built tree: the programs, the systemd unit with
the paths of the prefix it went to, its sysusers.d file, the flag file and
the documentation the unit points to; systemd's own tools accept them."""

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

import deploy_files


def install(prefix, destdir=None):
    """Installs the build tree to `prefix` (under `destdir`, if given)."""
    environment = dict(os.environ)
    environment.pop("DESTDIR", None)
    if destdir:
        environment["DESTDIR"] = destdir
    result = subprocess.run(
        ["cmake", "--install", deploy_files.env("HOURGLASS_BUILD_DIR"),
         "--prefix", prefix],
        capture_output=True, text=True, env=environment, timeout=600)
    if result.returncode != 0:
        raise AssertionError("cmake --install failed:\n" + result.stdout
                             + result.stderr)
    return result.stdout


def unit_settings(path):
    """{(section, key): [values]} of a unit file, in file order."""
    settings = {}
    section = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            settings.setdefault((section, key), []).append(value)
    return settings


class InstalledServiceTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp()
        cls.prefix = os.path.join(cls.work, "prefix")
        install(cls.prefix)
        cls.unit_path = os.path.join(cls.prefix, "lib", "systemd", "system",
                                     "hourglassd.service")
        cls.unit = unit_settings(cls.unit_path)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def exec_start(self):
        return shlex.split(self.unit[("Service", "ExecStart")][0])

    def test_installs_the_service_its_user_flags_and_documentation(self):
        for parts in (("bin", "hourglassd"), ("bin", "hourglass"),
                      ("lib", "systemd", "system", "hourglassd.service"),
                      ("lib", "sysusers.d", "hourglass.conf"),
                      ("etc", "hourglass", "hourglassd.flags"),
                      ("share", "doc", "hourglass", "README.md"),
                      ("share", "bash-completion", "completions", "hourglass"),
                      ("share", "doc", "hourglass", "ARCHITECTURE.md"),
                      ("share", "doc", "hourglass", "BENCHMARKS.md"),
                      ("share", "doc", "hourglass", "docs", "sizing.md"),
                      ("share", "doc", "hourglass", "deploy", "README.md"),
                      ("share", "doc", "hourglass", "deploy",
                       "hourglassd.flags"),
                      ("share", "doc", "hourglass", "deploy", "prometheus",
                       "alerts.yml"),
                      ("share", "doc", "hourglass", "deploy", "grafana",
                       "hourglass.json")):
            with self.subTest(path=os.path.join(*parts)):
                self.assertTrue(os.path.isfile(self.path(*parts)))
        with open(self.path("etc", "hourglass", "hourglassd.flags")) as f:
            self.assertEqual(f.read(),
                             deploy_files.read_text("deploy",
                                                    "hourglassd.flags"))

    def test_the_unit_names_the_installed_binary_and_flag_file(self):
        self.assertEqual(self.exec_start(), [
            self.path("bin", "hourglassd"),
            "--flagfile=" + self.path("etc", "hourglass", "hourglassd.flags"),
            "--data_dir=/var/lib/hourglass"])
        self.assertTrue(os.access(self.exec_start()[0], os.X_OK))

    def test_documentation_points_to_installed_files(self):
        urls = self.unit[("Unit", "Documentation")]
        self.assertEqual(urls, [
            "file://" + self.path("share", "doc", "hourglass", "README.md"),
            "file://" + self.path("share", "doc", "hourglass", "deploy",
                                  "README.md")])
        for url in urls:
            self.assertTrue(os.path.isfile(url[len("file://"):]), url)

    def test_it_is_type_notify(self):
        self.assertEqual(self.unit[("Service", "Type")], ["notify"])
        self.assertEqual(self.unit[("Service", "NotifyAccess")], ["main"])
        self.assertEqual(self.unit[("Service", "TimeoutStartSec")], ["5min"])

    def test_systemd_analyze_verify_accepts_it_without_a_warning(self):
        result = subprocess.run(
            [deploy_files.env("HOURGLASS_SYSTEMD_ANALYZE"), "verify",
             self.unit_path], capture_output=True, text=True, timeout=120)
        self.assertEqual((result.returncode, result.stdout, result.stderr),
                         (0, "", ""))

    def test_its_sandbox_rates_at_most_2_0(self):
        result = subprocess.run(
            [deploy_files.env("HOURGLASS_SYSTEMD_ANALYZE"), "security",
             "--offline=true", "--threshold=20", self.unit_path],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        level = re.search(r"Overall exposure level for hourglassd.service: "
                          r"(\d+\.\d+)", result.stdout)
        self.assertLessEqual(float(level.group(1)), 2.0)

    def test_sysusers_creates_the_user_the_unit_runs_as(self):
        root = os.path.join(self.work, "root")
        os.makedirs(os.path.join(root, "etc"))
        result = subprocess.run(
            [deploy_files.env("HOURGLASS_SYSTEMD_SYSUSERS"), f"--root={root}",
             self.path("lib", "sysusers.d", "hourglass.conf")],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(root, "etc", "passwd")) as f:
            users = [line.rstrip("\n").split(":") for line in f]
        with open(os.path.join(root, "etc", "group")) as f:
            groups = [line.rstrip("\n").split(":") for line in f]
        self.assertEqual(len(users), 1)
        name, _, uid, gid, gecos, home, shell = users[0]
        self.assertEqual([name, gecos, home, shell], [
            "hourglass", "Hourglass delayed-message broker",
            "/var/lib/" + self.unit[("Service", "StateDirectory")][0],
            "/usr/sbin/nologin"])
        self.assertLess(int(uid), 1000)  # A system user.
        self.assertEqual([g[:3] for g in groups], [["hourglass", "x", gid]])
        self.assertEqual(self.unit[("Service", "User")], [name])
        self.assertEqual(self.unit[("Service", "Group")], ["hourglass"])

    def test_a_second_install_keeps_an_edited_flag_file(self):
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        prefix = os.path.join(work, "prefix")
        install(prefix)
        flags = os.path.join(prefix, "etc", "hourglass", "hourglassd.flags")
        with open(flags, "w") as f:
            f.write("--durability=async\n")
        output = install(prefix)
        with open(flags) as f:
            self.assertEqual(f.read(), "--durability=async\n")
        self.assertIn(f"Keeping: {flags}", output)

    def test_prefix_usr_under_destdir_puts_the_flag_file_in_etc(self):
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work)
        install("/usr", destdir=work)
        unit = unit_settings(os.path.join(
            work, "usr", "lib", "systemd", "system", "hourglassd.service"))
        self.assertEqual(shlex.split(unit[("Service", "ExecStart")][0]), [
            "/usr/bin/hourglassd",
            "--flagfile=/etc/hourglass/hourglassd.flags",
            "--data_dir=/var/lib/hourglass"])
        self.assertEqual(unit[("Unit", "Documentation")], [
            "file:///usr/share/doc/hourglass/README.md",
            "file:///usr/share/doc/hourglass/deploy/README.md"])
        for path in ("usr/bin/hourglassd", "etc/hourglass/hourglassd.flags",
                     "usr/share/doc/hourglass/README.md",
                     "usr/share/doc/hourglass/deploy/README.md",
                     "usr/lib/sysusers.d/hourglass.conf"):
            with self.subTest(path=path):
                self.assertTrue(os.path.isfile(os.path.join(work, path)))


if __name__ == "__main__":
    unittest.main()
