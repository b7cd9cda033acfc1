#!/usr/bin/env python3
"""Checks that the gRPC stubs in hourglass/v1 match the protos.

The stubs are generated from api/hourglass/v1 and kept in the package (so
that `pip install` needs no protoc). This script generates them again into a
temporary directory with the command that wrote them,

    cd api && protoc --python_out=OUT --pyi_out=OUT --grpc_out=OUT \\
        --plugin=protoc-gen-grpc=GRPC_PYTHON_PLUGIN \\
        hourglass/v1/broker.proto hourglass/v1/admin.proto \\
        hourglass/v1/cluster.proto hourglass/v1/recurrences.proto

plus an empty __init__.py, and compares the result with hourglass/v1 byte
for byte. It exits 0 if they match, 1 (naming each file that differs, is
missing or should not be there) if not, and 2 if the stubs could not be
generated.

    check_stubs.py PROTOC GRPC_PYTHON_PLUGIN API_DIR [--update]

--update writes the generated stubs into hourglass/v1 instead (after a
change to the protos), removing files there that protoc no longer writes.
Other versions of protoc write other bytes: the committed stubs are Debian
12's (protoc 3.21.12, grpc_python_plugin 1.51.1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

#: The protos, relative to the api directory, in the order protoc gets them.
PROTOS = [
    "hourglass/v1/broker.proto",
    "hourglass/v1/admin.proto",
    "hourglass/v1/cluster.proto",
    "hourglass/v1/recurrences.proto",
]

#: The package directory the stubs live in, relative to the output root.
PACKAGE = Path("hourglass") / "v1"

#: Where they are committed: the package beside this script.
STUBS = Path(__file__).resolve().parent / PACKAGE


def program(path: str) -> str:
    """An absolute path of `path`, a path or a command name on PATH
    (protoc runs in another directory)."""
    if os.sep not in path:
        found = shutil.which(path)
        if found:
            return found
    return os.path.abspath(path)


def generate(protoc: str, plugin: str, api: Path, out: Path) -> None:
    """Writes the stubs of PROTOS under out/hourglass/v1; raises
    CalledProcessError if protoc fails."""
    subprocess.run(
        [protoc, f"--python_out={out}", f"--pyi_out={out}",
         f"--grpc_out={out}", f"--plugin=protoc-gen-grpc={plugin}", *PROTOS],
        cwd=api, check=True)
    (out / PACKAGE / "__init__.py").write_bytes(b"")


def files(directory: Path) -> Dict[str, bytes]:
    """The files directly in `directory` by name, with their bytes;
    bytecode caches left out."""
    if not directory.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in directory.iterdir()
            if p.is_file() and p.suffix != ".pyc"}


def differences(generated: Dict[str, bytes],
                committed: Dict[str, bytes]) -> List[str]:
    """One line per file on which `committed` differs from `generated`."""
    lines = []
    for name in sorted(generated.keys() | committed.keys()):
        if name not in committed:
            lines.append(f"{name}: missing (protoc writes it)")
        elif name not in generated:
            lines.append(f"{name}: not written by protoc (remove it)")
        elif generated[name] != committed[name]:
            lines.append(f"{name}: differs from protoc's output")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Checks that the gRPC stubs in hourglass/v1 match the "
                    "protos in API_DIR/hourglass/v1.")
    parser.add_argument("protoc", help="the protoc to generate them with")
    parser.add_argument("plugin", metavar="grpc_python_plugin",
                        help="gRPC's protoc plugin for Python")
    parser.add_argument("api", metavar="API_DIR", type=Path,
                        help="the directory the protos' paths start from "
                             "(the repository's api/)")
    parser.add_argument("--update", action="store_true",
                        help="write the generated stubs into hourglass/v1 "
                             "instead of comparing them")
    args = parser.parse_args()

    protoc, plugin = program(args.protoc), program(args.plugin)
    api = args.api.resolve()
    for proto in PROTOS:
        if not (api / proto).is_file():
            print(f"check_stubs: {api / proto} does not exist",
                  file=sys.stderr)
            return 2

    with tempfile.TemporaryDirectory(prefix="hourglass-stubs.") as tmp:
        out = Path(tmp)
        try:
            generate(protoc, plugin, api, out)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"check_stubs: cannot generate the stubs: {e}",
                  file=sys.stderr)
            return 2
        generated = files(out / PACKAGE)
        committed = files(STUBS)
        lines = differences(generated, committed)

        if args.update:
            STUBS.mkdir(parents=True, exist_ok=True)
            for name, data in generated.items():
                if committed.get(name) != data:
                    (STUBS / name).write_bytes(data)
            for name in committed.keys() - generated.keys():
                (STUBS / name).unlink()
            for line in lines:
                print(f"check_stubs: {STUBS}/{line}: updated")
            return 0

    if lines:
        print(f"check_stubs: the stubs in {STUBS} do not match the protos "
              f"in {api / PACKAGE} as {protoc} and {plugin} generate them:",
              file=sys.stderr)
        for line in lines:
            print(f"  {line}", file=sys.stderr)
        print(f"Regenerate them: {sys.argv[0]} {args.protoc} {args.plugin} "
              f"{args.api} --update", file=sys.stderr)
        return 1
    print(f"check_stubs: the {len(generated)} files in {STUBS} match the "
          f"protos")
    return 0


if __name__ == "__main__":
    sys.exit(main())
