"""Runtime store: goa-ai's `storage.Store` contract (sessions, runs, run
records, lifecycle transitions) with one rule engine and three stores:
DynamoDB, in-memory reference, and an HTTP client of the service."""
