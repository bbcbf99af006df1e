"""What the application needs to run, as pyproject.toml declares it: the one list the Lambda bundle
installs, read without CDK so that the benchmarks can install the same set."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
DISTRIBUTION = "cairn-state"


def runtime_dependencies() -> list[str]:
    """The distribution's own dependencies: pyproject.toml's `[project].dependencies` in a source
    checkout, the installed distribution's requirements without extras otherwise."""
    pyproject = PROJECT_DIR / "pyproject.toml"
    if pyproject.is_file():
        return list(tomllib.loads(pyproject.read_text())["project"]["dependencies"])
    return [requirement for requirement in metadata.requires(DISTRIBUTION) or [] if "extra ==" not in requirement]
