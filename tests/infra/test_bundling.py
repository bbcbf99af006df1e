"""The code asset: Linux wheels for the Lambda's CPU and Python, and the cairn package, without Docker.

Nothing here reaches PyPI: pip is replaced by a recorder, and what pip would
have done is checked through the command it was given.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from infra import code
from infra.config import PROJECT_DIR


def option_values(command: list[str], option: str) -> list[str]:
    return [arg.split("=", 1)[1] for arg in command if arg.startswith(f"{option}=")]


def test_pip_installs_only_wheels_for_the_lambda_platform(tmp_path: Path) -> None:
    command = code.pip_install_command(str(tmp_path))
    assert command[1:4] == ["-m", "pip", "install"]
    assert "--only-binary=:all:" in command
    assert option_values(command, "--python-version") == ["3.14"]
    assert option_values(command, "--implementation") == ["cp"]
    platforms = option_values(command, "--platform")
    assert "manylinux_2_17_aarch64" in platforms  # manylinux2014
    assert "manylinux_2_34_aarch64" in platforms  # Amazon Linux 2023
    assert all(platform.endswith("_aarch64") for platform in platforms)
    assert option_values(command, "--target") == [str(tmp_path)]
    # Byte code would make the asset hash differ between two identical builds.
    assert "--no-compile" in command


def test_pip_installs_exactly_the_distribution_dependencies(tmp_path: Path) -> None:
    declared = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())["project"]["dependencies"]
    command = code.pip_install_command(str(tmp_path))
    assert command[-len(declared) :] == declared
    assert any(requirement.startswith("aws-lambda-powertools") for requirement in declared)


def test_bundler_adds_the_cairn_package_without_caches_or_scripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []

    def fake_pip(command: list[str], check: bool) -> None:
        commands.append(command)
        # What pip leaves besides packages: console scripts naming this machine's Python.
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "httpx").write_text("#!/somewhere/python\n")

    monkeypatch.setattr(subprocess, "run", fake_pip)

    assert code.PipBundler().try_bundle(str(tmp_path), None) is True

    assert len(commands) == 1
    assert (tmp_path / "cairn" / "entrypoints" / "api_handler.py").is_file()
    # Lambda runs the download function's exec wrapper directly: it must stay executable.
    assert os.access(tmp_path / "cairn" / "entrypoints" / "stream_bootstrap", os.X_OK)
    assert not (tmp_path / "bin").exists()
    # The construct library is for CDK apps; no function imports it.
    assert not (tmp_path / "cairn" / "cdk").exists()
    assert not list(tmp_path.rglob("__pycache__"))
    assert not list(tmp_path.rglob("*.pyc"))


def test_a_failing_pip_fails_the_synthesis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_pip(command: list[str], check: bool) -> None:
        raise subprocess.CalledProcessError(1, command)

    monkeypatch.setattr(subprocess, "run", failing_pip)
    with pytest.raises(subprocess.CalledProcessError):
        code.PipBundler().try_bundle(str(tmp_path), None)


def test_an_installed_distribution_bundles_its_own_requirements(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Installed (`pip install "cairn-state[cdk]"`), there is no pyproject.toml beside the constructs.
    monkeypatch.setattr(code, "PROJECT_DIR", tmp_path)

    requirements = code.runtime_dependencies()

    assert requirements == [r for r in metadata.requires("cairn-state") or [] if "extra ==" not in r]
    assert any(requirement.startswith("aws-lambda-powertools") for requirement in requirements)
    assert not any(requirement.startswith("aws-cdk-lib") for requirement in requirements)
