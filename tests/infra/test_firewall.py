"""The per-client limit: a WAF web ACL on the stage when `waf_ip_rate_limit` is set, and none otherwise."""

from __future__ import annotations

import json

import pytest

from infra.config import StageConfig
from tests.infra.synthesis import Synthesis


def test_a_client_ip_past_its_limit_is_blocked_with_cairns_429(full: Synthesis) -> None:
    _, acl = full.only("AWS::WAFv2::WebACL")
    properties = acl["Properties"]
    assert properties["Scope"] == "REGIONAL"
    assert properties["DefaultAction"] == {"Allow": {}}
    [rule] = properties["Rules"]
    assert rule["Statement"] == {
        "RateBasedStatement": {"AggregateKeyType": "IP", "Limit": 3000, "EvaluationWindowSec": 300}
    }
    answer = rule["Action"]["Block"]["CustomResponse"]
    assert answer["ResponseCode"] == 429
    headers = {header["Name"]: header["Value"] for header in answer["ResponseHeaders"]}
    assert headers["Retry-After"] == "60"
    assert headers["Access-Control-Allow-Origin"] == "*", "a page holding a token can read the refusal"
    body = properties["CustomResponseBodies"][answer["CustomResponseBodyKey"]]
    assert body["ContentType"] == "APPLICATION_JSON"
    assert json.loads(body["Content"])["error"]["code"] == "rate_limited", "the code the gateway's throttle answers"
    assert rule["VisibilityConfig"]["CloudWatchMetricsEnabled"] is True


def test_the_web_acl_guards_the_apis_stage(full: Synthesis) -> None:
    acl_id, _ = full.only("AWS::WAFv2::WebACL")
    stage_id, _ = full.only("AWS::ApiGateway::Stage")
    rest_api_id, _ = full.only("AWS::ApiGateway::RestApi")
    _, association = full.only("AWS::WAFv2::WebACLAssociation")
    properties = association["Properties"]
    assert properties["WebACLArn"] == {"Fn::GetAtt": [acl_id, "Arn"]}
    arn = json.dumps(properties["ResourceArn"])
    assert f'{{"Ref": "{rest_api_id}"}}' in arn and f'{{"Ref": "{stage_id}"}}' in arn
    assert not any(key.endswith("AwsSolutions-APIG3") for key in full.acknowledgments), "cdk-nag's WAF check passes"


def test_without_a_limit_there_is_no_web_acl(default: Synthesis) -> None:
    assert default.resources("AWS::WAFv2::WebACL") == {}
    assert default.resources("AWS::WAFv2::WebACLAssociation") == {}
    assert any(key.endswith("AwsSolutions-APIG3") for key in default.acknowledgments), "cdk-nag's finding, answered"


@pytest.mark.parametrize("limit", [0, 9, 2_000_000_001])
def test_a_limit_waf_cannot_take_fails_synthesis(limit: int) -> None:
    with pytest.raises(ValueError, match="waf_ip_rate_limit"):
        StageConfig(waf_ip_rate_limit=limit)
