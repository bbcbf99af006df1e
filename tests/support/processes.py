"""Separate processes: for the tests of concurrency across processes, and the tests' servers.

Each is a process of its own, as a spawned one is, and never a fork of the
test's process and its threads: they are forked from one server process per
test worker, which imported what they use once. Spawned, each had imported
boto3, Cairn and its framework again: about a second of processor time each,
1.6 s for the OpenAI Agents SDK.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import ForkServerContext

# The union of what the processes import: the server is started once per worker with the first list
# it is given, whichever test asks first.
_PRELOADED = [
    "boto3",
    "httpx",
    "cairn.cli",
    "cairn.client",
    "cairn.local.server",
    "cairn.services",
    "tests.support.lambda_client",
    "tests.support.langgraph_runs",
    "tests.support.openai_agents_runs",
    "tests.support.serve",
    "tests.support.strands_runs",
]


def process_context() -> ForkServerContext:
    """The context to make the test's processes, queues, barriers and pools with."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOADED)
    return context
