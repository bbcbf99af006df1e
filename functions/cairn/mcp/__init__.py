"""Model Context Protocol server: the address tools, defined once
(`tools`), offered over stateless streamable HTTP (`/mcp`) and over stdio
(`cairn mcp`, which reaches a Cairn server through the Python SDK)."""
