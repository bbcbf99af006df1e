"""Lambda entry point of the HTTP API (API Gateway REST, proxy integration)."""

from __future__ import annotations

from typing import Any

from cairn.entrypoints.container_init import container_init

with container_init():
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging import correlation_paths
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from cairn.api.app import create_app
    from cairn.api.lambda_answer import carriable
    from cairn.entrypoints import snapstart
    from cairn.services import Services
    from cairn.settings import get_settings

    logger = Logger(service="cairn")

    # Built at cold start and reused by every invocation of this container.
    services = Services.build(get_settings())
    app = create_app(services)
    snapstart.install(services.client)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The buffered API function: an answer past what Lambda returns is a 413, not API Gateway's 502."""
    return carriable(app.resolve(event, context))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def streaming_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The streaming function's: its answers are sent in chunks, past the buffered limit."""
    return app.resolve(event, context)
