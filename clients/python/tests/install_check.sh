#!/bin/sh
# Installs the Python client as a user would and runs its tests against the
# install (ctest test PythonClientInstalled):
#
#   install_check.sh [PYTHON [SOURCE_DIR]]
#
# PYTHON (default python3) makes a virtual environment in a new temporary
# directory, with --system-site-packages so that it sees the system's grpcio,
# protobuf and pytest (Debian's python3-grpcio, python3-protobuf and
# python3-pytest); pip installs SOURCE_DIR (default: clients/python, the
# directory above this script) into it. Then, from a directory where the
# source tree is not on sys.path, it checks that `from hourglass import
# Client` works and that `hourglass` is the installed copy, and runs the
# package's pytest suite (SOURCE_DIR/tests) with the environment's python:
# the tests import their helpers (conftest.py, helpers.py) from
# SOURCE_DIR/tests and `hourglass` from the install. The suite needs what it
# always needs: HOURGLASSD, and openssl and etcd (HOURGLASS_OPENSSL,
# HOURGLASS_ETCD). Exits with the first failure's status; the temporary
# directory is removed either way.
set -eu

python=${1:-python3}
src=$(cd "${2:-$(dirname "$0")/..}" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hourglass-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The suite is to test the install: nothing from a PYTHONPATH, no bytecode
# written into the source tree's tests/.
unset PYTHONPATH
export PYTHONDONTWRITEBYTECODE=1

# pip builds a directory in place, and setuptools leaves build/ and
# hourglass_broker.egg-info/ in it: install from a copy in the temporary
# directory, so that the source tree stays as it is.
mkdir "$tmp/src" "$tmp/run"
(cd "$src" && tar --exclude=./build --exclude='*.egg-info' \
    --exclude=__pycache__ -cf - .) | (cd "$tmp/src" && tar -xf -)

"$python" -m venv --system-site-packages "$tmp/venv"
venv_python=$tmp/venv/bin/python

# --no-build-isolation builds with the setuptools and wheel the environment
# already has (with --system-site-packages, the system's) instead of
# downloading them into a build environment, and --no-index makes pip take
# the dependencies (grpcio, protobuf) from what is installed, never from the
# package index: both are for machines without network access to PyPI, such
# as this project's build machines. With network access, a plain
# `pip install ./clients/python` does the same.
"$venv_python" -m pip install --no-build-isolation --no-index \
    --no-cache-dir --disable-pip-version-check --quiet "$tmp/src"

cd "$tmp/run"
"$venv_python" -c 'from hourglass import Client'
"$venv_python" - "$tmp/venv" <<'EOF'
import sys
from pathlib import Path

import hourglass
import hourglass.v1.broker_pb2

venv = Path(sys.argv[1]).resolve()
for module in (hourglass, hourglass.v1.broker_pb2):
    where = Path(module.__file__).resolve()
    if venv not in where.parents:
        sys.exit(f"install_check: {module.__name__} comes from {where}, "
                 f"not from the environment {venv}")
package = Path(hourglass.__file__).parent
for data in ("py.typed", "v1/broker_pb2.pyi"):
    if not (package / data).is_file():
        sys.exit(f"install_check: {package / data} was not installed")
print(f"install_check: hourglass {hourglass.__version__} installed in {venv}")
EOF

"$venv_python" -m pytest -p no:cacheprovider -q -rs "$src/tests"
