"""A per-client limit in front of the API: an AWS WAF web ACL on the stage, when the deployment asks for one.

The stage throttle bounds the whole API, and the application bounds what each
address may do, but neither stops one client from taking the stage's whole
rate for everyone else, or from running up the deployment's bill with
requests that are refused one by one. A rate-based rule counts each client
IP's requests over a sliding five minutes and blocks that IP while it is over
the limit. A blocked request never reaches Lambda or DynamoDB, and it is
answered as the gateway answers its own throttling: 429 with Cairn's error
body (`rate_limited`) and a `Retry-After`.

WAF bills the web ACL, its rule and every request it inspects, so it is off
unless the deployment sets `waf_ip_rate_limit`.
"""

from __future__ import annotations

import json

from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

# WAF counts each IP's requests over this window; its rate-based rules take 60, 120, 300 or 600 s.
WINDOW_SECONDS = 300
# WAF re-checks a blocked IP's rate every few seconds and lets it through once it is under the limit.
RETRY_AFTER_SECONDS = 60
BODY_KEY = "rate_limited"
RATE_LIMITED_BODY = {
    "error": {
        "code": "rate_limited",
        "message": "Too many requests from this client IP address; retry after a minute.",
    }
}


class IpRateLimit(Construct):
    """A regional web ACL on `stage` that blocks a client IP past `limit` requests in five minutes."""

    def __init__(self, scope: Construct, construct_id: str, *, stage: apigateway.Stage, limit: int, name: str) -> None:
        super().__init__(scope, construct_id)
        headers = {
            "Retry-After": str(RETRY_AFTER_SECONDS),
            # As on the gateway's own answers: a page that holds a token must be able to read the refusal.
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Expose-Headers": "Retry-After",
        }
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            name=name,
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            custom_response_bodies={
                BODY_KEY: wafv2.CfnWebACL.CustomResponseBodyProperty(
                    content_type="APPLICATION_JSON", content=json.dumps(RATE_LIMITED_BODY)
                )
            },
            rules=[
                wafv2.CfnWebACL.RuleProperty(
                    name="requests-per-client-ip",
                    priority=0,
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            aggregate_key_type="IP", limit=limit, evaluation_window_sec=WINDOW_SECONDS
                        )
                    ),
                    action=wafv2.CfnWebACL.RuleActionProperty(
                        block=wafv2.CfnWebACL.BlockActionProperty(
                            custom_response=wafv2.CfnWebACL.CustomResponseProperty(
                                response_code=429,
                                custom_response_body_key=BODY_KEY,
                                response_headers=[
                                    wafv2.CfnWebACL.CustomHTTPHeaderProperty(name=key, value=value)
                                    for key, value in headers.items()
                                ],
                            )
                        )
                    ),
                    visibility_config=_visibility(f"{name}-per-ip"),
                )
            ],
            visibility_config=_visibility(name),
        )
        wafv2.CfnWebACLAssociation(self, "Association", resource_arn=stage.stage_arn, web_acl_arn=self.web_acl.attr_arn)


def _visibility(metric_name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    # Blocked and allowed counts in CloudWatch, and samples of matched requests in the console.
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=metric_name, sampled_requests_enabled=True
    )
