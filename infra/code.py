"""The one code asset every Cairn function runs: the `cairn` package and its dependencies.

The dependencies are bundled on the synthesizing machine, without Docker:
pip can install for another platform when it is limited to wheels, so it
fetches the Linux wheels for the Lambda's CPU and Python version straight into
the asset folder. The list comes from pyproject.toml, the one place that
declares what the application needs.

The asset carries byte code when this machine has an interpreter of the
Lambda's Python version. Lambda cannot write byte code (its code folder is
read-only), so without it every new container compiles botocore, pydantic,
Powertools and Cairn from source before its first answer: over a second.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra.config import PROJECT_DIR
from infra.dependencies import runtime_dependencies

# The newest Python Lambda offers: the longest time before a forced upgrade.
# Graviton (arm64) costs less per GB-second than x86 for the same work.
RUNTIME = lambda_.Runtime.PYTHON_3_14
RUNTIME_VERSION = RUNTIME.name.removeprefix("python")
ARCHITECTURE = lambda_.Architecture.ARM_64
# Where Lambda puts the function's code: the path tracebacks name.
LAMBDA_TASK_ROOT = "/var/task"
# An interpreter to byte-compile the asset with, when `python<RUNTIME_VERSION>` is not on PATH.
BUNDLE_PYTHON_VARIABLE = "CAIRN_BUNDLE_PYTHON"

PACKAGE = "cairn"


def _functions_dir() -> Path:
    """Where the `cairn` package lives: functions/ in a source checkout, else where it is installed.

    Found without importing it, so synthesis never loads the application.
    """
    checkout = PROJECT_DIR / "functions"
    if (checkout / PACKAGE).is_dir():
        return checkout
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the {PACKAGE!r} package is not installed")
    return Path(next(iter(spec.submodule_search_locations))).parent


# Everything Lambda runs lives in one package, under this folder.
FUNCTIONS_DIR = _functions_dir()

# Interpreter caches and packaging metadata are not code; shipping them only
# changes the asset hash and forces needless deployments.
# The construct library (`cairn.cdk`) is for CDK apps, never run by a function.
BYTE_CODE = ["__pycache__", "*.pyc"]
ASSET_EXCLUDES = [*BYTE_CODE, ".pytest_cache", "*.egg-info", "cdk"]

# Lambda's Python 3.12 and later run on Amazon Linux 2023 (glibc 2.34), so a
# wheel for any manylinux from 2.17 (manylinux2014) to 2.34 runs there. pip
# does not widen a manylinux tag by itself, hence the whole range.
_MANYLINUX_MINORS = range(17, 35)
_MACHINE = {"arm64": "aarch64", "x86_64": "x86_64"}


def pip_install_command(target: str) -> list[str]:
    """pip, run by the synthesizing interpreter, installing Lambda-platform wheels into `target`."""
    machine = _MACHINE[ARCHITECTURE.name]
    platforms = [f"--platform=manylinux_2_{minor}_{machine}" for minor in _MANYLINUX_MINORS]
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--implementation=cp",
        f"--python-version={RUNTIME_VERSION}",
        *platforms,
        # pip would compile with this interpreter, whose byte code the Lambda's cannot read
        # (`compile_bytecode` uses one of the right version instead).
        "--no-compile",
        f"--target={target}",
        *runtime_dependencies(),
    ]


@jsii.implements(ILocalBundling)
class PipBundler:
    """Builds the asset folder: dependencies from pip, then the `cairn` package itself, then byte code."""

    def __init__(self, interpreter: str | None = None) -> None:
        """`interpreter`: of the Lambda's Python version (`runtime_interpreter`), to compile with."""
        self._interpreter = interpreter

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        """Fill `output_dir`; always succeeds or raises, so Docker is never tried."""
        subprocess.run(pip_install_command(output_dir), check=True)
        shutil.copytree(
            FUNCTIONS_DIR / PACKAGE,
            Path(output_dir) / PACKAGE,
            ignore=shutil.ignore_patterns(*ASSET_EXCLUDES),
        )
        # Console scripts of the dependencies name this machine's interpreter
        # and never run in Lambda.
        shutil.rmtree(Path(output_dir) / "bin", ignore_errors=True)
        compile_bytecode(Path(output_dir), self._interpreter)
        return True


def runtime_interpreter() -> str | None:
    """An interpreter of the Lambda's Python version: `$CAIRN_BUNDLE_PYTHON`, else `python3.x` on PATH."""
    for candidate in (os.environ.get(BUNDLE_PYTHON_VARIABLE), shutil.which(f"python{RUNTIME_VERSION}")):
        if candidate and _version_of(candidate) == RUNTIME_VERSION:
            return candidate
    return None


def _version_of(interpreter: str) -> str | None:
    try:
        done = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def compile_bytecode(folder: Path, interpreter: str | None) -> bool:
    """Byte-compile every module in `folder` with `interpreter`; False (and a warning) without one.

    The byte code is hash-based and unchecked (PEP 552): it holds no timestamps,
    so two builds of the same sources give the same asset hash, and Python
    never reads the source to check it. Paths inside it are Lambda's, not this
    machine's.
    """
    if interpreter is None:
        print(
            f"warning: no Python {RUNTIME_VERSION} here (python{RUNTIME_VERSION} on PATH, or "
            f"{BUNDLE_PYTHON_VARIABLE}): the functions ship without byte code, and each new container "
            "compiles its modules before its first answer.",
            file=sys.stderr,
        )
        return False
    subprocess.run(
        [
            interpreter, "-m", "compileall", "-q", "-j", "0",
            "--invalidation-mode", "unchecked-hash",
            "-s", str(folder), "-p", LAMBDA_TASK_ROOT,
            str(folder),
        ],
        # Some wheels carry files for other Python versions (templates, tests); those fail alone.
        check=False,
        # Sets and frozensets in the byte code keep one order from build to build.
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    return True


def function_code() -> lambda_.Code:
    """The asset shared by every function (bound once, uploaded once).

    Its hash is the hash of the bundled output, so a new dependency version
    deploys even when no line of Cairn changed. Tests and `cdk destroy` skip
    bundling through CDK's own `aws:cdk:bundling-stacks` context; the asset is
    then the bare source folder.
    """
    interpreter = runtime_interpreter()
    # The output's hash covers the byte code the bundler makes (the same for the same sources),
    # so an asset with byte code never passes for one built where none could be made.
    hashed_without = ASSET_EXCLUDES if interpreter is None else [p for p in ASSET_EXCLUDES if p not in BYTE_CODE]
    return lambda_.Code.from_asset(
        str(FUNCTIONS_DIR),
        exclude=hashed_without,
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Required by the API, never pulled: the local bundler never declines.
            image=RUNTIME.bundling_image,
            # jsii's interfaces are not typing protocols, so mypy cannot see that it implements one.
            local=cast(ILocalBundling, PipBundler(interpreter)),
        ),
    )
