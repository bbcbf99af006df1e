"""What Lambda starts: every function's entry point, and nothing else.

Each module builds the services once per container (cold start) and hands
each invocation to the part of Cairn it belongs to; none holds logic of its
own. Keeping them here, at the edge, leaves the feature packages (`api`,
`email`, `addresses`, ...) free of Lambda's handler shapes, and gives the
infrastructure (`infra/`) one place its handler strings point to:

- `api_handler`: the HTTP API behind API Gateway (REST, proxy integration).
- `email_handler`: the SES receipt rule's invocation for an inbound message.
- `streaming`: the streaming function's own Runtime API loop (feed reads,
  downloads, `/mcp`), which answers through response streaming;
  `stream_bootstrap`, its exec wrapper, starts it.
"""
