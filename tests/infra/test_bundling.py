"""The code asset: Linux wheels for the Lambda's CPU and Python, and the cairn package, without Docker.

Nothing here reaches PyPI: pip is replaced by a recorder, and what pip would
have done is checked through the command it was given.
"""

from __future__ import annotations

import marshal
import os
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from infra import code, dependencies
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
    # pip's byte code would be this interpreter's, which Lambda's Python cannot read.
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


def test_without_an_interpreter_of_the_lambda_python_the_asset_has_no_byte_code_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    # An interpreter of another version is never used: Lambda's Python could not read its byte code.
    monkeypatch.setenv(code.BUNDLE_PYTHON_VARIABLE, sys.executable)
    monkeypatch.setattr(code, "RUNTIME_VERSION", "3.99")
    assert code.runtime_interpreter() is None

    package = tmp_path / "cairn"
    shutil.copytree(code.FUNCTIONS_DIR / "cairn" / "addresses", package, ignore=shutil.ignore_patterns("__pycache__"))
    assert code.compile_bytecode(tmp_path, None) is False

    assert not list(tmp_path.rglob("*.pyc"))
    assert "without byte code" in capsys.readouterr().err


def bundle_with_byte_code(output: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bundles with this interpreter standing in for the Lambda's (pip recorded, never run)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    monkeypatch.setattr(code, "RUNTIME_VERSION", version)
    monkeypatch.setenv(code.BUNDLE_PYTHON_VARIABLE, sys.executable)
    real_run = subprocess.run

    def fake_pip(command: list[str], **options: object):
        if command[1:4] == ["-m", "pip", "install"]:
            return None
        return real_run(command, **options)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", fake_pip)
    interpreter = code.runtime_interpreter()
    assert interpreter == sys.executable
    assert code.PipBundler(interpreter).try_bundle(str(output), None) is True
    monkeypatch.setattr(subprocess, "run", real_run)


def test_with_an_interpreter_of_the_lambda_python_every_module_ships_its_byte_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle_with_byte_code(tmp_path / "one", monkeypatch)
    bundle_with_byte_code(tmp_path / "two", monkeypatch)
    tag = sys.implementation.cache_tag
    one = tmp_path / "one"

    sources = sorted(one.rglob("*.py"))
    assert len(sources) > 50
    for source in sources:
        cached = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        data = cached.read_bytes()
        # PEP 552 flags: hash-based (bit 0) and never checked against the source (bit 1 clear).
        assert int.from_bytes(data[4:8], "little") == 0b01, cached
        # Tracebacks name Lambda's path, never this machine's.
        assert marshal.loads(data[16:]).co_filename == f"/var/task/{source.relative_to(one)}"

    # Two builds of the same sources are byte for byte the same: the asset hash does not move.
    def contents(root: Path) -> dict[str, bytes]:
        return {str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*.pyc")}

    assert contents(one) == contents(tmp_path / "two")

    # Python runs the shipped byte code without reading the source (it would fail here).
    clock = one / "cairn" / "clock.py"
    clock.write_text(clock.read_text() + "\nraise RuntimeError('compiled from source')\n")
    done = subprocess.run(
        [sys.executable, "-c", "import cairn.clock; print(cairn.clock.iso)"],
        capture_output=True, text=True, cwd=one, env={**os.environ, "PYTHONPATH": str(one)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_failing_pip_fails_the_synthesis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_pip(command: list[str], check: bool) -> None:
        raise subprocess.CalledProcessError(1, command)

    monkeypatch.setattr(subprocess, "run", failing_pip)
    with pytest.raises(subprocess.CalledProcessError):
        code.PipBundler().try_bundle(str(tmp_path), None)


def test_an_installed_distribution_bundles_its_own_requirements(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Installed (`pip install "cairn-state[cdk]"`), there is no pyproject.toml beside the constructs.
    monkeypatch.setattr(code, "PROJECT_DIR", tmp_path)

    requirements = dependencies.runtime_dependencies()

    assert requirements == [r for r in metadata.requires("cairn-state") or [] if "extra ==" not in r]
    assert any(requirement.startswith("aws-lambda-powertools") for requirement in requirements)
    assert not any(requirement.startswith("aws-cdk-lib") for requirement in requirements)
