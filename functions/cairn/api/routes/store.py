"""LangGraph's long-term store on an address (read token): what `CairnStore` calls, one batch a request.

Namespaces and keys travel in the body, never in the path, so any label
LangGraph allows reaches the store as it is.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from cairn.api import store_presenters as presenters
from cairn.api.requests import bearer_token
from cairn.api.resolver import ConcurrentRestResolver
from cairn.api.routes.addresses import BEARER
from cairn.api.store_schemas import StoreBatchRequest, StoreBatchResponse
from cairn.services import Services

BASE = "/api/v1/addresses/<address_id>/store"


def register(app: ConcurrentRestResolver, services: Services) -> None:
    # `services.graph_store` is built on first use: read it per request.

    @app.post(
        f"{BASE}/batch",
        summary="Run a batch of LangGraph store ops: get, search, put (or delete), list namespaces",
        description="Every op is checked before any runs. Reads see the store as it was before the batch's puts; "
        "of two puts to one item the later is kept, and each put commits on its own (last writer wins). A put "
        "with `expected_version` travels alone and commits only while the item is at that version: else 409 "
        "`store_version_conflict`, and nothing changed. An item whose `ttl` has passed is absent to every read.",
        tags=["store"],
        security=BEARER,
    )
    def batch(address_id: str, body: Annotated[StoreBatchRequest, Body()]) -> StoreBatchResponse:
        ops = [presenters.op_in(op) for op in body.ops]
        results = services.graph_store.batch(address_id, bearer_token(app.current_event), ops)
        return StoreBatchResponse(
            results=[presenters.result_out(op, result) for op, result in zip(ops, results, strict=True)]
        )
