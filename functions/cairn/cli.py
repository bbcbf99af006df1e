"""The `cairn` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cairn", description="Durable state for AI agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the API locally on DynamoDB Local")
    from cairn.local import server

    server.add_arguments(serve)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return server.run(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
