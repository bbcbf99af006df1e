"""Every face of every address operation is the one `cairn.operations.OPERATIONS` names.

A route, tool, SDK method or CLI command with no row fails here, and so does
a row naming one that does not exist: the table stays the whole list.
"""

from __future__ import annotations

import argparse
import importlib

import pytest

from cairn import client
from cairn.client import commands
from cairn.mcp import tools
from cairn.operations import FRAMEWORK_ROUTES, OPERATIONS, Operation
from tests.support.lambda_client import LambdaClient


@pytest.fixture
def document(memory_api: LambdaClient) -> dict:
    reply = memory_api.request("GET", "/openapi.json")
    assert reply.status == 200
    return reply.json()


def address_routes(document: dict) -> set[str]:
    """`METHOD path` of every address and inbox route, the framework stores' apart."""
    return {
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        if path.startswith(("/api/v1/addresses", "/api/v1/inbox/")) and not path.startswith(tuple(FRAMEWORK_ROUTES))
        for method in operations
    }


def test_every_address_route_has_its_row_and_every_row_its_route(document: dict):
    assert address_routes(document) == {operation.route for operation in OPERATIONS}


def test_the_framework_routes_are_each_reached_by_their_integration(document: dict):
    framework = {path for path in document["paths"] if path.startswith(tuple(FRAMEWORK_ROUTES))}
    assert {prefix for prefix in FRAMEWORK_ROUTES if any(path.startswith(prefix) for path in framework)} == set(
        FRAMEWORK_ROUTES
    )
    for dotted in FRAMEWORK_ROUTES.values():
        module, _, name = dotted.rpartition(".")
        assert getattr(__import__(module, fromlist=[name]), name)


def test_every_mcp_tool_is_a_row_and_every_row_s_tool_is_served():
    served = {spec.name for toolset in (tools.CAIRN, tools.AGENTADDRESS) for spec in toolset.tools}
    assert served == {operation.tool for operation in OPERATIONS if operation.tool}


@pytest.mark.parametrize("operation", [op for op in OPERATIONS if op.sdk], ids=lambda op: op.name)
def test_each_sdk_method_named_exists(operation: Operation):
    assert operation.sdk is not None
    kind, method = operation.sdk.split(".")
    # Each SDK class lives in the module of its name (`Address` reaches the others as attributes).
    module = importlib.import_module(f"{client.__name__}.{kind.lower()}")
    assert callable(getattr(getattr(module, kind), method))


def cli_commands() -> set[str]:
    """Every command of `cairn`'s agent commands, as the words a user types after `cairn`."""
    parser = argparse.ArgumentParser(prog="cairn")
    commands.add_commands(parser.add_subparsers(dest="command", required=True))

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> set[str]:
        found: set[str] = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for word, sub in action.choices.items():
                    found |= walk(sub, (*words, word)) or {" ".join((*words, word))}
        return found

    return walk(parser, ())


def test_every_cli_command_is_a_row_and_every_row_s_command_exists():
    # `events follow` is the poll in a loop; the rest of `cairn` (serve, mcp) serves, rather than calls, the API.
    assert cli_commands() - {"events follow"} == {operation.cli for operation in OPERATIONS if operation.cli}


def test_an_operation_an_agent_has_no_tool_for_says_why():
    assert [operation.name for operation in OPERATIONS if operation.tool is None and not operation.note] == []
