"""Cairn: durable state for AI agents, served by AWS Lambda on DynamoDB or
on one machine by `cairn serve`. Agents use `cairn.client` (the Python SDK
and the `cairn` command); agent frameworks use `cairn.runtime` (goa-ai's run
store) and `cairn.transcript` (messages, replay, history, product memory) as
libraries or over HTTP; the other packages are the service itself."""

__version__ = "0.1.0"
