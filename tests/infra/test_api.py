"""The REST API: routes and who may call them, throttling, logs, errors, domain, outputs."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

from tests.infra.synthesis import Synthesis


def api_function_id(synthesis: Synthesis) -> str:
    [found] = [
        logical_id
        for logical_id, resource in synthesis.resources("AWS::Lambda::Function").items()
        if resource["Properties"]["Handler"] == "cairn.entrypoints.api_handler.lambda_handler"
    ]
    return found


def api_entry_id(synthesis: Synthesis) -> str:
    """The alias API Gateway invokes: `live`, on a published version of the API function (SnapStart)."""
    function_id = api_function_id(synthesis)
    [found] = [
        logical_id
        for logical_id, resource in synthesis.resources("AWS::Lambda::Alias").items()
        if resource["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    return found


def method_paths(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    """Each ANY method by its full resource path (the streamed GETs are `tests/infra/test_streaming.py`'s)."""
    return {path: properties for (path, verb), properties in synthesis.gateway_methods().items() if verb == "ANY"}


def test_worker_routes_require_iam_and_every_other_path_is_open(default: Synthesis) -> None:
    authorization = {path: m["AuthorizationType"] for path, m in method_paths(default).items()}
    assert authorization == {
        "/": "NONE",
        "/{proxy+}": "NONE",
        "/api": "NONE",
        "/api/{proxy+}": "NONE",
        "/api/v1": "NONE",
        "/api/v1/{proxy+}": "NONE",
        "/api/v1/runtime": "AWS_IAM",
        "/api/v1/runtime/{proxy+}": "AWS_IAM",
        "/api/v1/memory": "AWS_IAM",
        "/api/v1/memory/{proxy+}": "AWS_IAM",
        "/api/v1/addresses": "NONE",
        "/api/v1/addresses/{address_id}": "NONE",
        "/api/v1/addresses/{address_id}/{proxy+}": "NONE",
        "/api/v1/addresses/{address_id}/events": "NONE",
        "/api/v1/addresses/{address_id}/events/{proxy+}": "NONE",
        "/mcp": "NONE",
        "/mcp/{proxy+}": "NONE",
    }


def test_every_method_proxies_any_verb_to_the_api_functions_live_alias(default: Synthesis) -> None:
    entry_id = api_entry_id(default)
    for path, method in method_paths(default).items():
        assert method["HttpMethod"] == "ANY", path
        integration = method["Integration"]
        assert integration["Type"] == "AWS_PROXY", path
        assert {"Ref": entry_id} in integration["Uri"]["Fn::Join"][1], path


def test_the_api_function_starts_new_containers_from_a_snapshot_of_the_version_it_serves(
    default: Synthesis,
) -> None:
    function_id = api_function_id(default)
    function = default.resources("AWS::Lambda::Function")[function_id]["Properties"]
    assert function["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    alias = default.resources("AWS::Lambda::Alias")[api_entry_id(default)]["Properties"]
    [(version_id, version)] = [
        (logical_id, resource["Properties"])
        for logical_id, resource in default.resources("AWS::Lambda::Version").items()
        if resource["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    assert alias["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
    # SnapStart refuses provisioned concurrency: none is configured.
    assert "ProvisionedConcurrencyConfig" not in alias


def test_api_gateway_may_invoke_the_live_alias_for_each_route(default: Synthesis) -> None:
    entry_id = api_entry_id(default)
    permissions = [
        p["Properties"]
        for p in default.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    to_api = [p for p in permissions if p["FunctionName"] == {"Ref": entry_id}]
    assert len(to_api) == len(method_paths(default))


def test_stage_throttles_with_the_context_values(default: Synthesis, full: Synthesis) -> None:
    for synthesis, rate, burst in ((default, 100, 200), (full, 250, 500)):
        synthesis.template.has_resource_properties(
            "AWS::ApiGateway::Stage",
            {
                "MethodSettings": [
                    Match.object_like(
                        {
                            "HttpMethod": "*",
                            "ResourcePath": "/*",
                            "ThrottlingRateLimit": rate,
                            "ThrottlingBurstLimit": burst,
                        }
                    )
                ]
            },
        )


def test_stage_is_named_after_the_stage_and_never_traces_urls(default: Synthesis) -> None:
    """X-Ray would keep each request's URL, and an inbox URL's path is its secret; the functions are traced."""
    _, stage = default.only("AWS::ApiGateway::Stage")
    assert stage["Properties"]["StageName"] == "test"
    assert stage["Properties"].get("TracingEnabled", False) is False
    functions = default.template.find_resources("AWS::Lambda::Function")
    traced = [name for name, function in functions.items() if function["Properties"].get("TracingConfig")]
    assert traced and all(functions[name]["Properties"]["TracingConfig"] == {"Mode": "Active"} for name in traced)


def test_access_log_is_json_and_never_records_the_path(default: Synthesis) -> None:
    _, stage = default.only("AWS::ApiGateway::Stage")
    settings = stage["Properties"]["AccessLogSetting"]
    fields = json.loads(settings["Format"])
    assert {"requestId", "ip", "httpMethod", "status", "integrationLatency", "caller"} <= set(fields)
    # Inbox URLs carry their secret in the path.
    assert "$context.path" not in settings["Format"]
    log_group_id = settings["DestinationArn"]["Fn::GetAtt"][0]
    assert default.resources("AWS::Logs::LogGroup")[log_group_id]["Properties"]["RetentionInDays"] == 30


def test_binary_answers_pass_through(default: Synthesis) -> None:
    default.template.has_resource_properties(
        "AWS::ApiGateway::RestApi",
        {"BinaryMediaTypes": ["*/*"], "EndpointConfiguration": {"Types": ["REGIONAL"]}},
    )


def test_gateway_errors_use_cairns_error_shape(default: Synthesis) -> None:
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in default.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    expected = {"THROTTLED", "ACCESS_DENIED", "MISSING_AUTHENTICATION_TOKEN", "DEFAULT_4XX", "DEFAULT_5XX"}
    assert expected <= set(responses)
    throttled = responses["THROTTLED"]
    body = throttled["ResponseTemplates"]["application/json"]
    assert body.startswith('{"error": {"code": "rate_limited", "message": ')
    assert throttled["ResponseParameters"]["gatewayresponse.header.Retry-After"] == "'1'"
    for response in responses.values():
        assert response["ResponseParameters"]["gatewayresponse.header.Access-Control-Allow-Origin"] == "'*'"


def test_api_url_output_is_the_execute_api_stage_url_by_default(default: Synthesis) -> None:
    rest_api_id, _ = default.only("AWS::ApiGateway::RestApi")
    url = default.raw["Outputs"]["ApiUrl"]["Value"]["Fn::Join"][1]
    assert url[0] == "https://"
    assert {"Ref": rest_api_id} in url
    assert "ApiDomainTarget" not in default.raw["Outputs"]


def test_execute_api_endpoint_is_off_exactly_when_a_custom_domain_serves(default: Synthesis, full: Synthesis) -> None:
    """Otherwise the execute-api URL is a second way in that skips the domain."""
    assert full.only("AWS::ApiGateway::RestApi")[1]["Properties"]["DisableExecuteApiEndpoint"] is True
    assert not default.only("AWS::ApiGateway::RestApi")[1]["Properties"].get("DisableExecuteApiEndpoint", False)


def test_custom_domain_serves_the_stage_and_is_the_api_url(full: Synthesis) -> None:
    domain_id, domain = full.only("AWS::ApiGateway::DomainName")
    assert domain["Properties"]["DomainName"] == "api.example.com"
    assert domain["Properties"]["SecurityPolicy"] == "TLS_1_2"
    assert domain["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}
    full.template.has_resource_properties("AWS::ApiGateway::BasePathMapping", {"DomainName": {"Ref": domain_id}})
    outputs = full.raw["Outputs"]
    assert outputs["ApiUrl"]["Value"] == {"Fn::Join": ["", ["https://", {"Ref": domain_id}, "/"]]}
    assert outputs["ApiDomainTarget"]["Value"] == {"Fn::GetAtt": [domain_id, "RegionalDomainName"]}


def test_runtime_invoke_arn_output_names_only_the_runtime_routes(default: Synthesis) -> None:
    arn = default.raw["Outputs"]["RuntimeInvokeArn"]["Value"]["Fn::Join"][1]
    assert arn[-1] == "/*/api/v1/runtime/*"
