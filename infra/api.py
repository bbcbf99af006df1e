"""The HTTP front door: an API Gateway REST API proxying every request to the API function,
but for the reads that may be held, which go to the streaming function.

Routing happens in the application, so the routes Lambda runs are the routes
`cairn serve` runs. API Gateway only decides who may call and which function
runs: the runtime store routes require IAM (SigV4) callers, everything else
is open at the gateway and authenticated by the application (read tokens,
inbox secrets) or deliberately anonymous (provisioning, discovery). `GET` on
an address's feed (polls, long-polls, event streams) and on an attachment,
and `POST /mcp` (whose `poll_events` may wait), run in the streaming
function, through API Gateway's STREAM transfer mode: REST APIs cannot route
on the query string (`wait`), the `Accept` header or a JSON-RPC body, so
every feed read and every call of that MCP endpoint goes there, and waiting
readers never hold the API function's concurrency.
"""

from __future__ import annotations

import json

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.checks import acknowledge
from infra.config import STREAM_LIMIT_SECONDS, StageConfig
from infra.firewall import IpRateLimit

# Named by string: CDK never imports the application package.
API_HANDLER = "cairn.entrypoints.api_handler.lambda_handler"

# Reads that go to the streaming function: a GET on the feed (it may wait up to
# 25 s, or stream events for up to 15 minutes), and on an attachment (its answer
# outgrows Lambda's 6 MB buffered payload).
FEED_PATH = ("addresses", "{address_id}", "events")
DOWNLOAD_PATH = (*FEED_PATH, "{event_id}", "attachments", "{attachment_id}")
# The MCP endpoint whose `poll_events` takes `wait` (up to 25 s). Each JSON-RPC message is one POST and
# the tool is named in its body, which API Gateway cannot route on: every POST goes to the streaming
# function, so its role holds what the endpoint's tools write. `/api/mcp` (AgentAddress's tools, whose
# poll answers at once) holds nothing and stays on the API function.
MCP_PATH = ("mcp",)

WORKER_ROOT = ("api", "v1")
# Subtrees for agent runtimes (AWS principals), authorized by IAM.
WORKER_RESOURCES = ("runtime", "memory")
RUNTIME_PATH = (*WORKER_ROOT, "runtime")

# Access log record. There is deliberately no `$context.path`: inbox URLs carry
# their secret in the path, and a log line must never hold a credential.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "extendedRequestId": "$context.extendedRequestId",
    "requestTime": "$context.requestTimeEpoch",
    "ip": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    "caller": "$context.identity.userArn",
    "httpMethod": "$context.httpMethod",
    "resourcePath": "$context.resourcePath",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationStatus": "$context.integration.status",
    "errorType": "$context.error.responseType",
    "errorMessage": "$context.error.message",
}

# Answers API Gateway gives on its own (before or instead of the function) in
# Cairn's error shape `{"error": {"code", "message"}}`, so clients parse one format.
GATEWAY_ERRORS = {
    "THROTTLED": "rate_limited",
    "REQUEST_TOO_LARGE": "payload_too_large",
    # IAM failures on the runtime routes: unsigned, badly signed, expired, denied.
    "MISSING_AUTHENTICATION_TOKEN": "forbidden",
    "INVALID_SIGNATURE": "forbidden",
    "EXPIRED_TOKEN": "forbidden",
    "ACCESS_DENIED": "forbidden",
    "DEFAULT_4XX": "invalid_request",
    "DEFAULT_5XX": "internal_error",
}

_OPEN_ROUTE_REASON = (
    "Cairn's address API authenticates in the application: read tokens and inbox "
    "secrets are capability credentials checked against their SHA-256 in DynamoDB, and "
    "provisioning and discovery are anonymous by design (an agent gets an address with "
    "no account). A gateway authorizer would add a call per request and a second "
    "credential the AgentAddress clients do not have. Runtime and memory routes use IAM."
)
_IAM_ROUTE_REASON = (
    "The runtime and memory routes are authorized by IAM (SigV4): their callers are agent runtimes "
    "running as AWS principals, not people with Cognito identities."
)
_OPEN_ROUTE = {"AwsSolutions-APIG4": _OPEN_ROUTE_REASON, "AwsSolutions-COG4": _OPEN_ROUTE_REASON}
_IAM_ROUTE = {"AwsSolutions-COG4": _IAM_ROUTE_REASON}


class CairnApi(Construct):
    """REST API for one stage: routes, throttling, access logs, tracing, optional custom domain and per-IP limit."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        config: StageConfig,
        streaming: lambda_.IFunction,
        downloads: bool = False,
    ) -> None:
        """`streaming` serves the feed's reads, and attachments when `downloads` (the stage has email)."""
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        self.rest_api = apigateway.RestApi(
            self,
            "RestApi",
            rest_api_name=config.resource_name_prefix,
            description="Cairn HTTP API",
            # Regional: agents call from AWS regions, and a custom domain then
            # points straight at the API instead of through CloudFront.
            endpoint_types=[apigateway.EndpointType.REGIONAL],
            default_integration=apigateway.LambdaIntegration(handler, allow_test_invoke=False),
            # Attachment downloads answer raw bytes; with every type binary,
            # API Gateway passes base64 answers through as bytes and hands
            # request bodies to the function base64-encoded, which the
            # application decodes.
            binary_media_types=["*/*"],
            deploy_options=apigateway.StageOptions(
                stage_name=config.stage,
                throttling_rate_limit=config.api_throttle_rate,
                throttling_burst_limit=config.api_throttle_burst,
                access_log_destination=apigateway.LogGroupLogDestination(access_logs),
                access_log_format=apigateway.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS)),
                # Stage tracing records each request's full URL, and an inbox URL's path is its
                # capability secret: the functions are traced instead (active tracing), which never
                # sees a URL.
                tracing_enabled=False,
            ),
            domain_name=_custom_domain(self, config),
            # With a custom domain, the execute-api URL would be a second way in that skips it.
            disable_execute_api_endpoint=config.api_domain_name is not None,
            # The CloudWatch role is one per account and region; a stack that
            # owns it would fight every other stage over it.
            cloud_watch_role=False,
        )
        self._add_routes(streaming, downloads)
        self._add_gateway_errors()
        self._acknowledge_findings()
        if config.waf_ip_rate_limit is not None:
            IpRateLimit(
                self,
                "IpRateLimit",
                stage=self.stage,
                limit=config.waf_ip_rate_limit,
                name=config.resource_name_prefix,
            )
        else:
            acknowledge(
                self.stage,
                "AwsSolutions-APIG3",
                "Abuse is bounded by the stage throttle (context) and the application's own limits "
                "(address creations per client IP, polls per address, body sizes). A WAF web ACL limiting "
                "each client IP (`waf_ip_rate_limit`) bills by the month and the request, so it is the "
                "deployment's choice.",
            )

    @property
    def stage(self) -> apigateway.Stage:
        """The one stage, named after the deployment's stage."""
        return self.rest_api.deployment_stage

    @property
    def url(self) -> str:
        """The base URL clients use: the custom domain when there is one."""
        domain = self.rest_api.domain_name
        return f"https://{domain.domain_name}/" if domain is not None else self.rest_api.url

    @property
    def runtime_invoke_arn(self) -> str:
        """What an IAM policy names to let a principal call the runtime routes."""
        return self.rest_api.arn_for_execute_api(
            method="*", path=f"/{'/'.join(RUNTIME_PATH)}/*", stage=self.stage.stage_name
        )

    def _add_routes(self, streaming: lambda_.IFunction, downloads: bool) -> None:
        """ANY on every path; IAM on the worker subtrees (runtime store, memory); the streamed GETs and MCP POST.

        Each level from the root to the worker resources gets its own
        `{proxy+}`, so a path beside them (like /api/v1/addresses) matches an
        open catch-all at its own level and never depends on how API Gateway
        falls back from a partly matched static path.
        """
        resource = self.rest_api.root
        for part in WORKER_ROOT:
            _add_open_methods(resource)
            resource = resource.add_resource(part)
        _add_open_methods(resource)
        iam = apigateway.AuthorizationType.IAM
        for name in WORKER_RESOURCES:
            worker = resource.add_resource(name)
            _acknowledge_all(worker.add_method("ANY", authorization_type=iam), _IAM_ROUTE)
            proxy = worker.add_proxy(default_method_options=apigateway.MethodOptions(authorization_type=iam))
            _acknowledge_all(proxy.any_method, _IAM_ROUTE)
        _add_streamed_routes(resource, (FEED_PATH, DOWNLOAD_PATH) if downloads else (FEED_PATH,), streaming)
        _add_streamed_routes(self.rest_api.root, (MCP_PATH,), streaming, http_method="POST")

    def _add_gateway_errors(self) -> None:
        for response_type, code in GATEWAY_ERRORS.items():
            headers = {
                # The application allows any origin; the gateway's own answers must too,
                # or a browser hides them from the page.
                "Access-Control-Allow-Origin": "'*'",
                "Access-Control-Expose-Headers": "'Retry-After'",
            }
            if code == "rate_limited":
                headers["Retry-After"] = "'1'"
            body = f'{{"error": {{"code": "{code}", "message": $context.error.messageString}}}}'
            self.rest_api.add_gateway_response(
                f"Gateway{response_type.title().replace('_', '')}",
                type=apigateway.ResponseType.of(response_type),
                response_headers=headers,
                templates={"application/json": body},
            )

    def _acknowledge_findings(self) -> None:
        acknowledge(
            self.rest_api,
            "AwsSolutions-APIG2",
            "Every body is validated by the application's pydantic models, which answer with "
            "Cairn's documented error codes and field list; a gateway validator would reject "
            "first, in another shape, from a second copy of the schema.",
        )
        acknowledge(
            self.stage,
            "AwsSolutions-APIG6",
            "Execution logging needs the account-wide API Gateway CloudWatch role, which a "
            "stage stack must not own (one per account and region, shared by every API). Each "
            "request is recorded in the stage's access log, and the function logs its own work.",
        )


def _custom_domain(scope: Construct, config: StageConfig) -> apigateway.DomainNameOptions | None:
    """The custom domain from context, mapped to this stage at its root, or None."""
    if config.api_domain_name is None or config.api_certificate_arn is None:
        return None
    return apigateway.DomainNameOptions(
        domain_name=config.api_domain_name,
        certificate=acm.Certificate.from_certificate_arn(scope, "Certificate", config.api_certificate_arn),
        endpoint_type=apigateway.EndpointType.REGIONAL,
        security_policy=apigateway.SecurityPolicy.TLS_1_2,
    )


def _add_open_methods(resource: apigateway.IResource) -> None:
    """ANY on the resource and on a `{proxy+}` below it, with no gateway authorizer."""
    _acknowledge_all(resource.add_method("ANY"), _OPEN_ROUTE)
    _acknowledge_all(resource.add_proxy().any_method, _OPEN_ROUTE)


def _add_streamed_routes(
    parent: apigateway.IResource,
    paths: tuple[tuple[str, ...], ...],
    streaming: lambda_.IFunction,
    *,
    http_method: str = "GET",
) -> None:
    """`http_method` on each path streams from `streaming`; every other method and path still reaches the API
    function.

    Every resource on the way keeps ANY for the API function. API Gateway
    allows one variable child per resource, so a level whose paths go on
    through `{name}` has no `{proxy+}`: that `{name}` (with ANY, and a
    `{proxy+}` below where the path goes on statically) catches what the
    catch-all would have.
    """
    resources: dict[tuple[str, ...], apigateway.IResource] = {(): parent}
    for path in paths:
        for depth, part in enumerate(path, start=1):
            if path[:depth] not in resources:
                resources[path[:depth]] = resources[path[: depth - 1]].add_resource(part)
                _acknowledge_all(resources[path[:depth]].add_method("ANY"), _OPEN_ROUTE)
    for prefix, resource in resources.items():
        variable_child = any(key[:-1] == prefix and key[-1].startswith("{") for key in resources if key)
        if prefix and not variable_child:
            _acknowledge_all(resource.add_proxy().any_method, _OPEN_ROUTE)
    streamed = apigateway.LambdaIntegration(
        streaming,
        allow_test_invoke=False,
        response_transfer_mode=apigateway.ResponseTransferMode.STREAM,
        # STREAM mode lifts the 29 s limit up to 15 minutes: an event stream's whole life. The function's
        # runtime loop always answers in the streaming format, so everything it serves takes this mode.
        timeout=Duration.seconds(STREAM_LIMIT_SECONDS),
    )
    for path in paths:
        _acknowledge_all(resources[path].add_method(http_method, streamed), _OPEN_ROUTE)


def _acknowledge_all(method: apigateway.Method | None, findings: dict[str, str]) -> None:
    # A proxy resource's `any_method` is optional in its type, but set by `add_proxy` (any_method defaults to true).
    if method is None:
        raise ValueError("a proxy resource without its ANY method")
    for rule, reason in findings.items():
        acknowledge(method, rule, reason)
