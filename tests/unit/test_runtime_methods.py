"""One list of runtime methods: the protocol, `METHODS` and the stores agree on every method."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

from cairn.runtime.http import HttpRuntimeStore
from cairn.runtime.methods import METHODS, Arguments, Boxed
from cairn.runtime.store import EngineRuntimeStore, RuntimeStore

PROTOCOL = sorted(
    name for name, member in vars(RuntimeStore).items() if inspect.isfunction(member) and not name.startswith("_")
)


def test_every_protocol_method_has_one_row_and_every_row_a_protocol_method() -> None:
    assert sorted(METHODS) == PROTOCOL
    assert all(name == method.name for name, method in METHODS.items())


@pytest.mark.parametrize("name", PROTOCOL)
def test_the_stores_offer_the_method_with_the_protocols_signature(name: str) -> None:
    declared = inspect.signature(getattr(RuntimeStore, name))
    remote = getattr(HttpRuntimeStore, name)
    assert inspect.signature(remote) == declared
    assert (remote.__name__, remote.__qualname__) == (name, f"HttpRuntimeStore.{name}")
    assert remote.__doc__ == getattr(RuntimeStore, name).__doc__
    assert inspect.signature(getattr(EngineRuntimeStore, name)) == declared


@pytest.mark.parametrize("name", PROTOCOL)
def test_the_row_carries_the_methods_parameters_and_result(name: str) -> None:
    method = METHODS[name]
    hints = typing.get_type_hints(getattr(RuntimeStore, name))
    returned = hints.pop("return")
    if issubclass(method.request, Arguments):
        assert [item.name for item in dataclasses.fields(method.request)] == list(hints)
    else:
        assert list(hints.values()) == [method.request]
    if issubclass(method.result, Boxed):
        box = typing.get_type_hints(method.result)
        assert ([box[item.name] for item in dataclasses.fields(method.result)] or [type(None)]) == [returned]
    else:
        assert method.result is returned
