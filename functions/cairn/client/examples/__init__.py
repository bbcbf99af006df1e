"""Runnable examples of the SDK against a Cairn server (`cairn serve` or AWS).

    python -m cairn.client.examples.two_run --help
    python -m cairn.client.examples.async_callback --help
    python -m cairn.client.examples.concurrent_runs --help

Each prints JSON on stdout and takes the server from `--url` or `CAIRN_URL`.
"""
