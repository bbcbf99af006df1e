"""Route groups; each `register(app, services)` adds its routes to the resolver."""
