"""The `cairn` command: the agent commands, `serve` and `mcp`.

`cairn mcp` is added here rather than with the agent commands: it serves the
MCP tools through the SDK, so `cairn.mcp.stdio` imports `cairn.client`, and
the SDK must not import it back.
"""

from __future__ import annotations

import argparse
import os
import sys

from cairn.client import commands as agent_commands
from cairn.local import options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cairn", description="Durable state for AI agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the API locally on DynamoDB Local")
    options.add_arguments(serve)
    agent_commands.add_commands(commands)
    mcp = commands.add_parser(
        "mcp", parents=[agent_commands.url_option()], help="serve the MCP tools on stdio for the server at --url"
    )
    mcp.set_defaults(handler=run_mcp)
    args = parser.parse_args(argv)
    if args.command == "serve":
        from cairn.local import server

        code = server.run(args)
        # Everything the server owns is closed by now. A long-poll or event
        # stream that was waiting at Ctrl-C still holds a worker thread until
        # its wait ends (up to 25 s), and the interpreter would join it before
        # exiting: the exit is made here instead.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return agent_commands.run(args)


def run_mcp(args: argparse.Namespace, context: agent_commands.Context) -> None:
    # The mcp package is only needed here.
    from cairn.mcp import stdio

    stdio.serve(args.url, context.http)


if __name__ == "__main__":
    sys.exit(main())
