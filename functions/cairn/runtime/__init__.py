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
    from cairn.runtime.errors import ContractError as ContractError
    from cairn.runtime.errors import RuntimeStoreError as RuntimeStoreError
    from cairn.runtime.errors import RuntimeStoreUnavailable as RuntimeStoreUnavailable
    from cairn.runtime.errors import is_error as is_error
    from cairn.runtime.http import HttpRuntimeStore as HttpRuntimeStore
    from cairn.runtime.inmem import InMemoryRuntimeStore as InMemoryRuntimeStore
    from cairn.runtime.model import AppendResult as AppendResult
    from cairn.runtime.model import ChildRunStart as ChildRunStart
    from cairn.runtime.model import ChildRunStartResult as ChildRunStartResult
    from cairn.runtime.model import OneShotChildRunStart as OneShotChildRunStart
    from cairn.runtime.model import OneShotChildRunStartResult as OneShotChildRunStartResult
    from cairn.runtime.model import OneShotRunStart as OneShotRunStart
    from cairn.runtime.model import OneShotRunStartResult as OneShotRunStartResult
    from cairn.runtime.model import RootRunStart as RootRunStart
    from cairn.runtime.model import RootRunStartResult as RootRunStartResult
    from cairn.runtime.model import RunCancellation as RunCancellation
    from cairn.runtime.model import RunMeta as RunMeta
    from cairn.runtime.model import RunRecord as RunRecord
    from cairn.runtime.model import RunRecordPage as RunRecordPage
    from cairn.runtime.model import RunRepairOutcome as RunRepairOutcome
    from cairn.runtime.model import RunRepairResult as RunRepairResult
    from cairn.runtime.model import RunStart as RunStart
    from cairn.runtime.model import RunStartOutcome as RunStartOutcome
    from cairn.runtime.model import RunStatus as RunStatus
    from cairn.runtime.model import RunSuspension as RunSuspension
    from cairn.runtime.model import RunSuspensionCommand as RunSuspensionCommand
    from cairn.runtime.model import RunTerminal as RunTerminal
    from cairn.runtime.model import Session as Session
    from cairn.runtime.model import SessionStatus as SessionStatus
    from cairn.runtime.store import EngineRuntimeStore as EngineRuntimeStore
    from cairn.runtime.store import RuntimeStore as RuntimeStore

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__, __dir__, __all__ = lazy.exports(
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
