"""The SDK's answer types, generated from the answer schemas: one wire model for server and SDK.

`cairn.client.models` is this module's output: a typed dictionary for each
SDK type of `WIRE_TYPES`, with the fields of its schemas (a union's members
together), their types, the class docstrings and, as comments, the fields'
descriptions. The SDK thus needs no pydantic and imports nothing of the
server. Run `python -m cairn.api.wire_types` after changing one of these
schemas; `tests/unit/test_wire_models.py` fails while the file differs.
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cairn.api import file_schemas, schemas

COMMAND: Final = "python -m cairn.api.wire_types"
# The generated module, in the SDK's package.
TARGET: Final = Path(__file__).resolve().parents[1] / "client" / "models.py"

# Each SDK type, and the schemas whose fields it holds (a union's members together).
WIRE_TYPES: Final[dict[str, tuple[type[BaseModel], ...]]] = {
    "EventRef": (schemas.EventRefOut,),
    "Delivery": (schemas.DeliveryResponse,),
    "Event": (schemas.EventOut,),
    "Page": (schemas.FeedResponse,),
    "AckedEvent": (schemas.AckedEventOut,),
    "Ack": (schemas.AckResponse,),
    "StateValue": (schemas.StateValueOut,),
    "StateDeletion": (schemas.DeletedStateOut,),
    "StateKey": (schemas.StateKeyOut,),
    "StateUsage": (schemas.StateUsageOut,),
    "StateListing": (schemas.StateListResponse,),
    "StateOperation": (schemas.StateOperationIn,),
    "StateResult": (schemas.StateSetResult, schemas.StateDeleteResult),
    "StateBatch": (schemas.StateBatchResponse,),
    "Contact": (schemas.ContactOut,),
    "ContactListing": (schemas.ContactsResponse,),
    "ContactChange": (schemas.ContactResponse,),
    "SendReceipt": (schemas.SendResponse,),
    "FileWritten": (file_schemas.FileOut,),
    "FileListing": (file_schemas.FileListResponse,),
}
# The SDK types the SDK sends rather than receives: a field the request may leave out is not required.
# (An answer sends every field, defaults included, but those its schema drops with `exclude_if`.)
SENT: Final = frozenset({"StateOperation"})

HEADER: Final = f'''\
# Generated from cairn.api.schemas by cairn/api/wire_types.py: do not edit.
# Regenerate with `{COMMAND}`.
"""The API's answers as typed dictionaries.

The SDK hands the server's JSON through unchanged, fields a newer server adds
included; these types only tell editors and checkers what to expect. The MCP
tools answer with the same shapes.
"""

from __future__ import annotations
'''

# SDK types of no server answer, written by hand here: what the SDK itself makes.
HAND_WRITTEN: Final = '''\
# Written by hand in cairn/api/wire_types.py (HAND_WRITTEN): no server answer has this shape.
class Download(TypedDict):
    """A file the SDK saved from a download, not a JSON answer."""

    path: str
    size: int
    content_type: str
'''

LINE_LENGTH: Final = 120
INDENT: Final = "    "


@dataclass
class WireField:
    """One key of an SDK type: its type's alternatives, whether every answer carries it, and what it means."""

    name: str
    alternatives: list[Any]
    always: bool
    description: str | None


def render() -> str:
    """The text of `cairn.client.models`, formatted as `ruff format` leaves it."""
    annotations: list[str] = []
    classes = [_typed_dict(name, members, annotations) for name, members in WIRE_TYPES.items()]
    typing_names = {"Any", "Literal", "NotRequired"}
    used = {word for annotation in annotations for word in re.findall(r"\w+", annotation)} & typing_names
    imports = f"from typing import {', '.join([*sorted(used), 'TypedDict'])}\n"
    return HEADER + "\n" + imports + "\n\n" + "\n\n".join([*classes, HAND_WRITTEN])


def _typed_dict(name: str, members: tuple[type[BaseModel], ...], annotations: list[str]) -> str:
    """The class of one SDK type; its annotations are added to `annotations`."""
    lines = [f"class {name}(TypedDict):"]
    doc = next((inspect.cleandoc(d) for member in members if (d := member.__dict__.get("__doc__"))), None)
    if doc:
        lines += [*_docstring(doc), ""]
    for field in _fields(name, members):
        if field.description:
            width = LINE_LENGTH - len(INDENT) - 2
            lines += [f"{INDENT}# {line}" for line in textwrap.wrap(field.description, width, break_on_hyphens=False)]
        annotation = _union(field.alternatives) if field.always else f"NotRequired[{_union(field.alternatives)}]"
        annotations.append(annotation)
        lines.append(f"{INDENT}{field.name}: {annotation}")
    return "\n".join(lines) + "\n"


def _docstring(text: str) -> list[str]:
    if '"""' in text or "\\" in text or text.endswith('"'):
        raise ValueError(f"a docstring the generator cannot quote as it is: {text!r}")
    first, *rest = text.splitlines()
    if not rest:
        return [f'{INDENT}"""{first}"""']
    return [f'{INDENT}"""{first}', *(f"{INDENT}{line}".rstrip() for line in rest), f'{INDENT}"""']


def _fields(name: str, members: tuple[type[BaseModel], ...]) -> list[WireField]:
    """The keys of the members together, in the order they first come; one is sure only if every member sends it."""
    found: dict[str, WireField] = {}
    for member in members:
        for field_name, info in member.model_fields.items():
            if info.alias not in (None, field_name) or keyword.iskeyword(field_name):
                raise ValueError(f"{member.__name__}.{field_name}: a key a typed dictionary's class cannot spell")
            always, alternatives = _sent(name, info)
            known = found.setdefault(field_name, WireField(field_name, [], True, info.description))
            known.alternatives += alternatives
            known.always = known.always and always
            known.description = known.description or info.description
    for field in found.values():
        field.always = field.always and all(field.name in member.model_fields for member in members)
    return list(found.values())


def _sent(name: str, info: FieldInfo) -> tuple[bool, list[Any]]:
    """Whether the key is always on the wire, and the alternatives of its value when it is."""
    alternatives = list(_alternatives(info.annotation))
    if info.exclude_if is not None:
        if info.exclude_if(None):  # dropped when null: the key comes only with a value
            alternatives = [kind for kind in alternatives if kind is not types.NoneType]
        return False, alternatives
    return (info.is_required() or name not in SENT), alternatives


def _alternatives(annotation: Any) -> Iterator[Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _alternatives(get_args(annotation)[0])
    elif origin is Union or origin is types.UnionType:
        for argument in get_args(annotation):
            yield from _alternatives(argument)
    else:
        yield annotation


def _union(alternatives: list[Any]) -> str:
    """`A | B`, every `Literal` among them merged into the first's place, each alternative once."""
    values = [value for kind in alternatives if get_origin(kind) is Literal for value in get_args(kind)]
    rendered: list[str] = []
    for kind in alternatives:
        text = _literal(values) if get_origin(kind) is Literal else _type(kind)
        if text not in rendered:
            rendered.append(text)
    return " | ".join(rendered)


def _literal(values: list[Any]) -> str:
    unique = list(dict.fromkeys(values))
    return "Literal[" + ", ".join(json.dumps(v) if isinstance(v, str) else repr(v) for v in unique) + "]"


def _type(kind: Any) -> str:
    origin = get_origin(kind)
    if kind is Any:
        return "Any"
    if kind is types.NoneType:
        return "None"
    if origin is Annotated or origin is Union or origin is types.UnionType or origin is Literal:
        return _union(list(_alternatives(kind)))
    if origin is list or origin is dict:
        return f"{origin.__name__}[{', '.join(_type(argument) for argument in get_args(kind))}]"
    if kind in (str, int, float, bool):
        return str(kind.__name__)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return _sdk_name(kind)
    raise TypeError(f"no SDK spelling for the field type {kind!r}")


def _sdk_name(schema: type[BaseModel]) -> str:
    names = [name for name, members in WIRE_TYPES.items() if schema in members]
    if not names:
        raise LookupError(f"{schema.__name__} is a field's type but no SDK type's schema: add it to WIRE_TYPES")
    return names[0]


def main(arguments: list[str]) -> int:
    """Rewrite `cairn.client.models`; with `--check`, only say whether it is current (exit 1 if not)."""
    text = render()
    current = TARGET.read_text() if TARGET.exists() else ""
    if "--check" in arguments:
        if current != text:
            print(f"{TARGET} is not what the schemas give: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text)
        print(f"rewrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
