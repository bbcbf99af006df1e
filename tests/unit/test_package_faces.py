"""The public faces of `cairn.client`, `cairn.runtime` and `cairn.transcript`."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys

import pytest

FACES = ["cairn.client", "cairn.runtime", "cairn.transcript"]


def imported_names(package: str) -> set[str]:
    """The names the package's `__init__` imports from its own modules, at run time or for type checkers."""
    tree = ast.parse(inspect.getsource(importlib.import_module(package)))
    statements = list(tree.body)
    statements += [inner for node in tree.body if isinstance(node, ast.If) for inner in node.body]
    return {
        alias.asname or alias.name
        for node in statements
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cairn.")
        for alias in node.names
    }


@pytest.mark.parametrize("package", FACES)
def test_all_lists_each_offered_name_once_and_every_one_resolves(package: str) -> None:
    face = importlib.import_module(package)
    assert len(face.__all__) == len(set(face.__all__))
    assert set(face.__all__) == imported_names(package)
    for name in face.__all__:
        assert getattr(face, name) is not None
        assert name in dir(face)


def loaded_after(code: str) -> set[str]:
    found = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(found.stdout.split())


def test_importing_a_face_loads_none_of_its_stores_or_transcript_modules() -> None:
    loaded = loaded_after("import cairn.runtime, cairn.transcript")
    assert not {name for name in loaded if name.startswith("cairn.transcript.")}
    assert not {"cairn.runtime.store", "cairn.runtime.http", "httpx"} & loaded
    assert not {name for name in loaded if name.startswith("cairn.dynamodb")}


def test_the_dynamodb_store_comes_without_the_http_client() -> None:
    loaded = loaded_after("from cairn.dynamodb.runtime_store import DynamoRuntimeStore")
    assert "cairn.runtime.store" in loaded
    assert not {"cairn.runtime.http", "httpx"} & loaded
