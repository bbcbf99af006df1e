"""The runtime store over HTTP: `POST /api/v1/runtime/<method>`, one route per method.

Bodies are the JSON form of the commands (see `cairn.runtime.wire`), which
also decodes and checks them: the published schemas (`runtime_schemas`)
describe that form without a second validator in front of it. In AWS these
routes sit behind IAM authorization; locally a bearer key guards them when
`CAIRN_RUNTIME_KEY` is set.
"""

from typing import Any

from cairn import jsontext
from cairn.api import runtime_key, runtime_schemas
from cairn.api.requests import json_body
from cairn.api.resolver import ConcurrentRestResolver
from cairn.runtime import wire
from cairn.runtime.methods import METHODS, Method
from cairn.services import Services

PREFIX = "/api/v1/runtime"


def register(app: ConcurrentRestResolver, services: Services) -> None:
    store = services.runtime
    authorize = runtime_key.guard(app, services.settings)

    def add(method: Method) -> None:
        @app.post(
            f"{PREFIX}/{method.name}",
            summary=f"Runtime store: {method.name}",
            description=f"Body: the JSON form of `{method.request.__name__}`; answer: `{method.result.__name__}`. "
            "Bytes are base64, times RFC 3339 with milliseconds.",
            tags=["runtime"],
            operation_id=runtime_schemas.operation_id(method.name),
            # Request body and answers: added to /openapi.json by `runtime_schemas.describe_routes`.
        )
        def call() -> dict[str, Any]:
            authorize()
            request = wire.decode(method.request, jsontext.parse(json_body(app.current_event) or b"{}"))
            answer: dict[str, Any] = wire.encode(method.call(store, request))
            return answer

    for method in METHODS.values():
        add(method)
