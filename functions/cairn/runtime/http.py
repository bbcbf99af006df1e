"""`HttpRuntimeStore`: the runtime store contract over Cairn's HTTP API.

It raises the same exception classes as the in-process stores, rebuilt from
the service's error codes. Requests carry either the local runtime key as a
bearer token or an AWS SigV4 signature (API Gateway IAM authorization).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from cairn.runtime import wire
from cairn.runtime.errors import SENTINELS, ContractError, RuntimeStoreError, RuntimeStoreUnavailable
from cairn.runtime.methods import METHODS, Method
from cairn.runtime.store import RuntimeStore
from cairn.tls import verified_context

if TYPE_CHECKING:
    # The store's methods are made from `METHODS` when this module loads, so
    # type checkers cannot see them: they read them from the protocol, which
    # a unit test holds the made methods to. The `Any` base only lets a type
    # checker build a class whose protocol methods it does not see defined.
    _Made: Any = object

    class _Methods(RuntimeStore, _Made): ...  # type: ignore[misc]  # the `Any` base, on purpose (above)

else:
    _Methods = object


class HttpRuntimeStore(_Methods):
    """Every `RuntimeStore` method as `POST <base_url>/api/v1/runtime/<method>`."""

    def __init__(
        self,
        base_url: str,
        *,
        runtime_key: str | None = None,
        aws_credentials: Any = None,
        region: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`aws_credentials` (botocore credentials) and `region` turn on SigV4 signing."""
        self._base = base_url.rstrip("/") + "/api/v1/runtime/"
        self._key = runtime_key
        self._credentials = aws_credentials
        self._region = region
        self._client = httpx.Client(timeout=timeout, transport=transport, verify=verified_context())

    def close(self) -> None:
        """Close the connections this store keeps open."""
        self._client.close()

    def _invoke(self, method: Method, request: Any) -> Any:
        """Send one request; its decoded answer, or the exception the service raised."""
        url = self._base + method.name
        body = json.dumps(wire.encode(request)).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        if self._credentials is not None:
            signed = AWSRequest(method="POST", url=url, data=body, headers=headers)
            SigV4Auth(self._credentials, "execute-api", self._region or "us-east-1").add_auth(signed)
            headers = dict(signed.headers.items())
        try:
            response = self._client.post(url, content=body, headers=headers)
        except httpx.HTTPError as error:
            raise RuntimeStoreUnavailable(f"runtime store unreachable: {error}") from error
        if response.is_success:
            return wire.decode(method.result, response.json())
        raise error_from(response)


def _remote(method: Method) -> Callable[..., Any]:
    """`HttpRuntimeStore.<method>`: the protocol method's signature and documentation, served over HTTP."""
    declared = getattr(RuntimeStore, method.name)
    signature = inspect.signature(declared)

    def call(self: HttpRuntimeStore, /, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        _, *arguments = bound.arguments.items()  # the first is `self`
        return method.returned(self._invoke(method, method.request_for(dict(arguments))))

    # Name, docstring and annotations from the protocol; `__wrapped__` gives `inspect.signature` its signature.
    functools.update_wrapper(call, declared)
    call.__module__ = __name__
    call.__qualname__ = f"{HttpRuntimeStore.__qualname__}.{method.name}"
    return call


for _method in METHODS.values():
    setattr(HttpRuntimeStore, _method.name, _remote(_method))
del _method


def error_from(response: httpx.Response) -> RuntimeStoreError:
    """The exception the service raised, rebuilt from its `{error: {code, message, contract}}`."""
    try:
        error = response.json()["error"]
        code, message, contract = error["code"], error.get("message", ""), bool(error.get("contract"))
    except (ValueError, KeyError, TypeError):
        return RuntimeStoreUnavailable(f"runtime store answered {response.status_code}")
    kind = SENTINELS.get(code)
    if contract:
        return ContractError(kind() if kind else message, message)
    if kind is not None:
        return kind(message)
    failure = RuntimeStoreError(message)
    failure.code = code
    return failure
