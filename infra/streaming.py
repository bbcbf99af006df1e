"""The function that answers readers who hold a connection: the feed's polls, long-polls and event
streams, attachment downloads, and the `/mcp` endpoint (whose `poll_events` may wait), all through
response streaming and with concurrency of their own.

Lambda's managed Python runtime answers buffered only: an answer stops at 6 MB
(about 4.4 MB of attachment once base64-encoded) and 29 s behind API Gateway.
This function runs the same resolver as the API function under Cairn's
streaming loop (`cairn.entrypoints.streaming`), which Lambda starts through the
exec wrapper in place of its own, so an answer may be a 10 MB attachment or a
stream of server-sent events lasting up to 15 minutes.

Waiting clients hold executions for as long as they wait. Their own function
with its own reserved concurrency caps them there: however many wait, the
API function keeps the concurrency that inbox posts, state writes and the
ingest function need. An MCP message cannot be routed on the tool it calls,
so every `/mcp` call runs here, its quick tools (state writes, sends,
subscriptions) included: they share this function's concurrency with the
waiting readers, each address holding at most `max_waiting_polls_per_address`
waiting polls and `max_streams_per_address` streams of it. Its role holds
what those tools write (`infra.storage.FUNCTION_ACTIONS`, the send grant).
"""

from __future__ import annotations

from aws_cdk import Duration
from constructs import Construct

from infra.config import STREAM_LIMIT_SECONDS, StageConfig
from infra.function import FunctionBase, ServiceFunction

# What the wrapper runs; named as the handler so the function says what it runs.
STREAMING_HANDLER = "cairn.entrypoints.streaming.main"
# Lambda unpacks the code asset at /var/task.
EXEC_WRAPPER = "/var/task/cairn/entrypoints/stream_bootstrap"


class StreamingFunction(Construct):
    """Serves the feed (polls, long-polls, event streams), attachment downloads and `/mcp`, streamed."""

    def __init__(self, scope: Construct, construct_id: str, *, base: FunctionBase, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.function = ServiceFunction(
            self,
            "Function",
            base=base,
            handler=STREAMING_HANDLER,
            description="Cairn feed reads, attachment downloads and MCP (response streaming)",
            # An event stream ends by itself before this (`max_stream_seconds`); API Gateway's
            # STREAM mode also stops at 15 minutes.
            timeout=Duration.seconds(STREAM_LIMIT_SECONDS),
            # Reading and parsing a 40 MB message for one attachment needs the room.
            memory_size=1024,
            environment={"AWS_LAMBDA_EXEC_WRAPPER": EXEC_WRAPPER},
            reserved_concurrency=config.stream_reserved_concurrency,
        ).function
