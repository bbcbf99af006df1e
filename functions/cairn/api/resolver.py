"""A REST resolver whose per-request state belongs to the request.

Powertools keeps the current event on `BaseRouter` class attributes, which
is right for Lambda (one request per process at a time) but lets concurrent
requests of the local server overwrite each other. Here that state lives in
a context variable, so the same resolver and the same routes run in Lambda
and under the local server's worker threads without a second
implementation.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar, cast
from urllib.parse import unquote

import msgspec
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, ResponseBuilder, Route
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import OpenAPIRequestValidationMiddleware
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from cairn import jsontext
from cairn.api import requests
from cairn.errors import CrossOriginRefused, PayloadTooLarge

ExceptionHandler = TypeVar("ExceptionHandler", bound=Callable[..., Any])


class _RequestState(msgspec.Struct):
    event: APIGatewayProxyEvent | None = None
    lambda_context: Any = None
    context: dict[str, Any] = msgspec.field(default_factory=dict)
    processed_stack_frames: list[str] = msgspec.field(default_factory=list)


class JsonBodyValidation(OpenAPIRequestValidationMiddleware):
    """Request validation that reads every body as JSON, whatever type it declares.

    Powertools would decode form-encoded and multipart bodies into a JSON
    model (`value=1` would be stored as `["1"]`) and answer other types with
    an exception no handler maps. The validated routes are the public address
    routes, and there the bytes decide, as the inbox does: `curl -d` labels a
    JSON body as a form, and a body that parses as JSON is taken as JSON; one
    that does not is `invalid_json`, whatever its label. (The worker routes
    read their bodies themselves and refuse any type but JSON: `json_body`.)
    """

    def _get_body(self, app: ApiGatewayResolver) -> dict[str, Any]:
        # Validation names every problem it finds, about 1.5 KB of memory each until the answer is made:
        # the 700,000 unknown fields 6 MB can hold would take the function past its memory and crash it.
        limit = jsontext.MAX_VALIDATED_VALUES
        if jsontext.holds_more_values(app.current_event.decoded_body or "", limit):
            message = f"The body holds more than {limit:,} JSON values; send less at once."
            raise PayloadTooLarge(message, max_values=limit)
        return self._parse_json_data(app)

    def handler(self, app: ApiGatewayResolver, next_middleware: NextMiddleware) -> Response[Any]:
        """Validation, then the route with its validated arguments in a dict that formats without its values.

        Powertools writes the route's arguments into a debug message on every
        request, in an f-string formatted whether or not debug is logged: the
        repr of a validated body walks all of it (0.6 ms for a 58 KB state
        value, more for larger bodies, billed each time), and a debug log would
        copy whatever the body holds.
        """

        def route(app: ApiGatewayResolver) -> Response[Any]:
            app.context["_route_args"] = RouteArguments(app.context["_route_args"])
            return next_middleware(app)

        # Powertools' `NextMiddleware` declares `__name__` a method, so no function matches it for mypy.
        return super().handler(app, cast(NextMiddleware, route))


class RouteArguments(dict[str, Any]):
    """A route's arguments, formatted as their names and types only."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{name!r}: {type(value).__name__}" for name, value in self.items()) + "}"


def _refuse_cross_origin() -> None:
    raise CrossOriginRefused("This route serves workers and tools, not web pages of other origins.")


class ConcurrentRestResolver(APIGatewayRestResolver):
    """`APIGatewayRestResolver` that is safe to call from many threads at once."""

    def __init__(self, *, same_origin_prefixes: tuple[str, ...] = (), **kwargs: Any) -> None:
        """`same_origin_prefixes`: paths no web page of another origin may use (see `route`)."""
        self._same_origin_prefixes = same_origin_prefixes
        self._request_state: ContextVar[_RequestState] = ContextVar("cairn_request_state")
        self._idle_state = _RequestState()
        self._deferred: list[tuple[re.Pattern[str], Callable[[], None]]] = []
        self._deferred_lock = threading.Lock()
        # Validated bodies go through the same strict parser as raw ones, so nesting too deep for
        # Python and integers too long to convert are `invalid_json`, not an unhandled error.
        kwargs.setdefault("json_body_deserializer", jsontext.parse)
        super().__init__(**kwargs)
        if kwargs.get("enable_validation"):
            # Powertools leaves this constructor unannotated.
            self._request_validation_middleware = JsonBodyValidation()  # type: ignore[no-untyped-call]
        self.use([_same_origin_guard])

    def route(self, rule: str, method: Any, cors: bool | None = None, *args: Any, **kwargs: Any) -> Any:
        """Routes under a same-origin prefix never carry CORS headers, whatever the app's CORS setting."""
        if rule.startswith(self._same_origin_prefixes):
            cors = False
        return super().route(rule, method, cors, *args, **kwargs)

    def exception_handler(
        self, exc_class: type[Exception] | list[type[Exception]]
    ) -> Callable[[ExceptionHandler], ExceptionHandler]:
        """Powertools' decorator, typed: it registers the handler and returns it unchanged."""
        register: Callable[[ExceptionHandler], ExceptionHandler] = super().exception_handler(exc_class)
        return register

    def defer(self, paths: re.Pattern[str], register: Callable[[], None]) -> None:
        """Run `register` (which adds routes for `paths`) when a request first asks for such a path.

        A container that only answers inbox posts and polls then never imports
        what the runtime, memory, MCP, mail or discovery routes need; the OpenAPI
        document registers every group first, so it always describes them all.
        """
        self._deferred.append((paths, register))

    def _register_deferred(self, path: str | None) -> None:
        """Register the deferred groups `path` falls under (all of them for None).

        Most requests name no deferred group; they look without the lock, so
        the local server's threads do not queue on it for every request.
        """
        if path is not None and not any(paths.match(path) for paths, _ in list(self._deferred)):
            return
        with self._deferred_lock:
            for group in list(self._deferred):
                paths, register = group
                if path is None or paths.match(path):
                    register()
                    self._deferred.remove(group)

    def get_openapi_schema(self, **kwargs: Any) -> Any:
        self._register_deferred(None)
        return super().get_openapi_schema(**kwargs)

    def _handle_not_found(self, method: str, path: str) -> ResponseBuilder[Any]:
        """A preflight for a same-origin path is refused, so a page elsewhere never sends its request.

        Powertools answers every preflight with the app's CORS headers; a browser
        that got them would go on to send the cross-origin JSON request.
        """
        if method != "OPTIONS" or not path.startswith(self._same_origin_prefixes):
            return super()._handle_not_found(method, path)
        route = Route(
            rule=self._compile_regex(r".*"),
            method=method,
            path=path,
            func=_refuse_cross_origin,
            cors=False,
            compress=False,
        )
        self.context.update(_route=route, _path=path)
        return self._call_route(route=route, route_arguments={})

    def _convert_matches_into_route_keys(self, match: re.Match[str]) -> dict[str, str]:
        """Each path parameter decoded once: API Gateway REST (and `cairn serve`, as it) keeps the path
        percent-encoded, so a client that sends the key `a:b` as `a%3Ab` names the same key as one that does not."""
        return {name: unquote(value) for name, value in match.groupdict().items()}

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        proxy_event = cast(APIGatewayProxyEvent, self._to_proxy_event(dict(event)))
        self._register_deferred(proxy_event.path)
        token = self._request_state.set(_RequestState(event=proxy_event, lambda_context=context))
        try:
            return super().resolve(event, context)
        finally:
            self._request_state.reset(token)

    @property
    def _state(self) -> _RequestState:
        return self._request_state.get(self._idle_state)

    # The REST resolver narrows the router's `BaseProxyEvent` attribute to the REST event;
    # a property cannot narrow a settable attribute in mypy's eyes, though it is the same type.
    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEvent:
        # Unset outside a request, exactly like the attribute it replaces.
        return cast(APIGatewayProxyEvent, self._state.event)

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEvent) -> None:
        self._state.event = value

    @property
    def lambda_context(self) -> Any:
        return self._state.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._state.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        return self._state.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._state.context = value

    @property
    def processed_stack_frames(self) -> list[str]:
        return self._state.processed_stack_frames

    @processed_stack_frames.setter
    def processed_stack_frames(self, value: list[str]) -> None:
        self._state.processed_stack_frames = value


def _same_origin_guard(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """A same-origin route refuses any request a page of another origin sent, even one needing no preflight.

    A function, not a method: Powertools keeps what it learns of a middleware's signature on the
    middleware itself, which a bound method (made anew on each access) cannot hold, so a method was
    inspected again on every request.
    """
    event = app.current_event
    prefixes = app._same_origin_prefixes if isinstance(app, ConcurrentRestResolver) else ()
    if event.path.startswith(prefixes) and requests.foreign_origin(event):
        raise CrossOriginRefused("This route serves workers and tools, not web pages of other origins.")
    return next_middleware(app)
