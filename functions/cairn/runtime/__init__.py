"""Runtime store: goa-ai's `storage.Store` contract (sessions, runs, run
records, lifecycle transitions) with one rule engine.

- `RuntimeStore`: the protocol every store satisfies.
- `EngineRuntimeStore`: the rules over any backend; `InMemoryRuntimeStore`
  is one, the reference store, for tests. The durable one on DynamoDB is the
  adapter's (`cairn.dynamodb.runtime_store.DynamoRuntimeStore`): this package
  knows no DynamoDB.
- `HttpRuntimeStore`: a client of the service's runtime routes.
- The commands and results the methods take and return, and the errors they
  raise (`ContractError`, `RuntimeStoreUnavailable`; every goa-ai sentinel
  is in `cairn.runtime.errors`, and `is_error` looks through the wrapper).

Every name is imported when first asked for, so importing this package stays
cheap and a Lambda function never loads the HTTP client (or httpx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn import lazy

if TYPE_CHECKING:
    from cairn.runtime.errors import ContractError, RuntimeStoreError, RuntimeStoreUnavailable, is_error
    from cairn.runtime.http import HttpRuntimeStore
    from cairn.runtime.inmem import InMemoryRuntimeStore
    from cairn.runtime.model import (
        AppendResult,
        ChildRunStart,
        ChildRunStartResult,
        OneShotChildRunStart,
        OneShotChildRunStartResult,
        OneShotRunStart,
        OneShotRunStartResult,
        RootRunStart,
        RootRunStartResult,
        RunCancellation,
        RunMeta,
        RunRecord,
        RunRecordPage,
        RunRepairOutcome,
        RunRepairResult,
        RunStart,
        RunStartOutcome,
        RunStatus,
        RunSuspension,
        RunSuspensionCommand,
        RunTerminal,
        Session,
        SessionStatus,
    )
    from cairn.runtime.store import EngineRuntimeStore, RuntimeStore

__all__ = [
    "AppendResult",
    "ChildRunStart",
    "ChildRunStartResult",
    "ContractError",
    "EngineRuntimeStore",
    "HttpRuntimeStore",
    "InMemoryRuntimeStore",
    "OneShotChildRunStart",
    "OneShotChildRunStartResult",
    "OneShotRunStart",
    "OneShotRunStartResult",
    "RootRunStart",
    "RootRunStartResult",
    "RunCancellation",
    "RunMeta",
    "RunRecord",
    "RunRecordPage",
    "RunRepairOutcome",
    "RunRepairResult",
    "RunStart",
    "RunStartOutcome",
    "RunStatus",
    "RunSuspension",
    "RunSuspensionCommand",
    "RunTerminal",
    "RuntimeStore",
    "RuntimeStoreError",
    "RuntimeStoreUnavailable",
    "Session",
    "SessionStatus",
    "is_error",
]


if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__, __dir__ = lazy.exports(
        __name__,
        {
            "errors": ("ContractError", "RuntimeStoreError", "RuntimeStoreUnavailable", "is_error"),
            "model": (
                "AppendResult",
                "ChildRunStart",
                "ChildRunStartResult",
                "OneShotChildRunStart",
                "OneShotChildRunStartResult",
                "OneShotRunStart",
                "OneShotRunStartResult",
                "RootRunStart",
                "RootRunStartResult",
                "RunCancellation",
                "RunMeta",
                "RunRecord",
                "RunRecordPage",
                "RunRepairOutcome",
                "RunRepairResult",
                "RunStart",
                "RunStartOutcome",
                "RunStatus",
                "RunSuspension",
                "RunSuspensionCommand",
                "RunTerminal",
                "Session",
                "SessionStatus",
            ),
            "store": ("RuntimeStore", "EngineRuntimeStore"),
            "inmem": ("InMemoryRuntimeStore",),
            "http": ("HttpRuntimeStore",),
        },
    )
