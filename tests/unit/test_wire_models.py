"""The SDK's answer types and the server's answer schemas describe one wire.

`cairn.api.schemas` validates and documents what the server sends;
`cairn.client.models`, what the SDK hands through (typed dictionaries, so the
SDK needs no pydantic), is generated from those schemas by
`cairn.api.wire_types`. The file must be what the generator writes today, and
what it holds is checked against the schemas field by field, so a fault of the
generator cannot hide behind its own output.
"""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from cairn.api import schemas, wire_types
from cairn.api.wire_types import COMMAND, WIRE_TYPES
from cairn.client import models

# SDK types of no server answer, written by hand in the generator: what the SDK itself makes.
SDK_ONLY = {"Download": "a file the SDK saved from a download, not a JSON answer"}


def test_the_sdk_models_are_what_the_generator_writes_from_the_schemas():
    written = wire_types.TARGET.read_text()
    assert written == wire_types.render(), f"cairn/client/models.py is out of date: run `{COMMAND}`"
    assert wire_types.main(["--check"]) == 0


def test_the_generated_file_says_so_and_how_to_regenerate_it():
    assert wire_types.TARGET == Path(models.__file__).resolve()
    first, second = wire_types.render().splitlines()[:2]
    assert first.startswith("# Generated from cairn.api.schemas") and COMMAND in second


def test_the_sdk_models_import_nothing_of_the_server():
    # The SDK ships without the server and without pydantic.
    tree = ast.parse(wire_types.TARGET.read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"__future__", "typing"}


def test_every_sdk_answer_type_is_paired_with_its_server_schema():
    assert sorted([*WIRE_TYPES, *SDK_ONLY]) == sdk_types()


def sdk_types() -> list[str]:
    return sorted(
        name
        for name, kind in vars(models).items()
        if inspect.isclass(kind) and typing.is_typeddict(kind) and kind.__module__ == models.__name__
    )


@pytest.mark.parametrize("name", sorted(WIRE_TYPES))
def test_the_sdk_type_has_exactly_the_fields_the_server_sends(name: str):
    sdk = typing.get_type_hints(getattr(models, name))
    members = [
        {field.alias or field_name: field.is_required() for field_name, field in schema.model_fields.items()}
        for schema in WIRE_TYPES[name]
    ]
    # A union's field is sure to come only when every member requires it.
    server = {field: all(member.get(field, False) for member in members) for member in members for field in member}
    assert set(sdk) == set(server)
    # A field every answer carries is one the SDK type promises (optional ones may be marked either way).
    assert {field for field, required in server.items() if required} <= promised(getattr(models, name))


def test_a_field_left_out_of_some_answers_is_not_promised():
    # `data_encoding` is dropped when null; a union's `value` comes only with a set; a request may omit `if_revision`.
    assert "data_encoding" not in promised(models.Event) and "value_encoding" not in promised(models.StateValue)
    assert "value" not in promised(models.StateResult) and "if_revision" not in promised(models.StateOperation)
    # A field sent as null is still sent.
    assert {"content_type", "headers", "verified_by"} <= promised(models.Event)


def test_the_sdk_types_keep_the_schemas_docstrings():
    for name, members in WIRE_TYPES.items():
        documented = [inspect.cleandoc(doc) for member in members if (doc := member.__dict__.get("__doc__"))]
        sdk = getattr(models, name).__doc__
        assert (inspect.cleandoc(sdk) if sdk else None) == (documented[0] if documented else None), name


def test_a_field_of_a_schema_no_sdk_type_holds_is_refused():
    class Orphan(BaseModel):
        address: schemas.AddressOut

    with pytest.raises(LookupError, match="AddressOut"):
        wire_types._type(Orphan.model_fields["address"].annotation)


def promised(kind: type) -> set[str]:
    """The keys a typed dictionary promises, read from its annotations (`__required_keys__` misses
    `Required[...]` in a module whose annotations are strings)."""
    hints = typing.get_type_hints(kind, include_extras=True)
    marked = {field: typing.get_origin(hint) for field, hint in hints.items()}
    if getattr(kind, "__total__", True):
        return {field for field, origin in marked.items() if origin is not typing.NotRequired}
    return {field for field, origin in marked.items() if origin is typing.Required}
