"""Model Context Protocol server: the address tools over streamable HTTP (`/mcp`) and stdio (`cairn mcp`)."""
