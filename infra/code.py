"""The one code asset every Cairn function runs: the `cairn` package and its dependencies.

The dependencies are bundled on the synthesizing machine, without Docker:
pip can install for another platform when it is limited to wheels, so it
fetches the Linux wheels for the Lambda's CPU and Python version straight into
the asset folder. The list comes from pyproject.toml, the one place that
declares what the application needs.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import cast

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra.config import PROJECT_DIR

# The newest Python Lambda offers: the longest time before a forced upgrade.
# Graviton (arm64) costs less per GB-second than x86 for the same work.
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64

PACKAGE = "cairn"
DISTRIBUTION = "cairn-state"


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
ASSET_EXCLUDES = ["__pycache__", "*.pyc", ".pytest_cache", "*.egg-info", "cdk"]

# Lambda's Python 3.12 and later run on Amazon Linux 2023 (glibc 2.34), so a
# wheel for any manylinux from 2.17 (manylinux2014) to 2.34 runs there. pip
# does not widen a manylinux tag by itself, hence the whole range.
_MANYLINUX_MINORS = range(17, 35)
_MACHINE = {"arm64": "aarch64", "x86_64": "x86_64"}


def runtime_dependencies() -> list[str]:
    """The distribution's own dependencies: pyproject.toml's `[project].dependencies` in a source
    checkout, the installed distribution's requirements without extras otherwise."""
    pyproject = PROJECT_DIR / "pyproject.toml"
    if pyproject.is_file():
        return list(tomllib.loads(pyproject.read_text())["project"]["dependencies"])
    return [requirement for requirement in metadata.requires(DISTRIBUTION) or [] if "extra ==" not in requirement]


def pip_install_command(target: str) -> list[str]:
    """pip, run by the synthesizing interpreter, installing Lambda-platform wheels into `target`."""
    machine = _MACHINE[ARCHITECTURE.name]
    platforms = [f"--platform=manylinux_2_{minor}_{machine}" for minor in _MANYLINUX_MINORS]
    return [
        sys.executable, "-m", "pip", "install",
        "--quiet", "--disable-pip-version-check",
        "--only-binary=:all:", "--implementation=cp",
        f"--python-version={RUNTIME.name.removeprefix('python')}",
        *platforms,
        # Byte code would embed this machine's timestamps and change the asset
        # hash on every build; Lambda compiles on import instead.
        "--no-compile",
        f"--target={target}",
        *runtime_dependencies(),
    ]


@jsii.implements(ILocalBundling)
class PipBundler:
    """Builds the asset folder: dependencies from pip, then the `cairn` package itself."""

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
        return True


def function_code() -> lambda_.Code:
    """The asset shared by every function (bound once, uploaded once).

    Its hash is the hash of the bundled output, so a new dependency version
    deploys even when no line of Cairn changed. Tests and `cdk destroy` skip
    bundling through CDK's own `aws:cdk:bundling-stacks` context; the asset is
    then the bare source folder.
    """
    return lambda_.Code.from_asset(
        str(FUNCTIONS_DIR),
        exclude=ASSET_EXCLUDES,
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Required by the API, never pulled: the local bundler never declines.
            image=RUNTIME.bundling_image,
            # jsii's interfaces are not typing protocols, so mypy cannot see that it implements one.
            local=cast(ILocalBundling, PipBundler()),
        ),
    )
