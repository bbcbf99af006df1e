"""The `cairn` command."""

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


if __name__ == "__main__":
    sys.exit(main())
