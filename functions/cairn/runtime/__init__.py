"""Runtime store: goa-ai's `storage.Store` contract (sessions, runs, run
records, lifecycle transitions) with one rule engine and three stores:
DynamoDB, in-memory reference, and an HTTP client of the service."""


def __getattr__(name: str):
    """`cairn.runtime.HttpRuntimeStore`, imported on first use.

    Lambda imports this package for the DynamoDB store; the HTTP client (and
    httpx) is only loaded by the processes that ask for it.
    """
    if name == "HttpRuntimeStore":
        from cairn.runtime.http import HttpRuntimeStore

        return HttpRuntimeStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
