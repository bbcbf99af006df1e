"""Synthesizing the stack the way app.py does (cdk.json context, cdk-nag checks), offline.

Bundling is skipped through CDK's own context switch, so no pip and no
network: the code asset is the bare functions/ folder.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.config import cdk_json_context
from infra.stack import build

SKIP_BUNDLING = {"aws:cdk:bundling-stacks": []}

# Everything switched on, and every limit away from its default so a value
# that never reaches the environment cannot pass by accident.
FULL_CONTEXT = {
    "stage": "prod",
    "email_domain": "mail.example.com",
    "activate_receipt_rule_set": "true",
    "outbound_from": "agents@example.com",
    "api_domain_name": "api.example.com",
    "api_certificate_arn": "arn:aws:acm:eu-west-1:123456789012:certificate/0f0e0d0c-1111-2222-3333",
    "alarm_topic_arn": "arn:aws:sns:eu-west-1:123456789012:cairn-alarms",
    "api_throttle_rate": "250",
    "api_throttle_burst": 500,
    "api_reserved_concurrency": "50",
    "stream_reserved_concurrency": "20",
    "log_retention_days": "90",
    "waf_ip_rate_limit": "3000",
    "table_max_read_request_units": "2000",
    "table_max_write_request_units": 800,
    "monthly_budget_usd": "250",
    "budget_emails": "ops@example.com, finance@example.com",
    "event_retention_seconds": 3 * 86_400 + 1,
    "max_events": 5_000,
    "owner_reserved_events": 120,
    "max_inbox_bytes": 2_000_000,
    "max_idempotency_key_length": 128,
    "min_expires_in_seconds": 120,
    "max_expires_in_seconds": 86_400 * 90,
    "default_expires_in_seconds": 86_400 * 30,
    "create_rate_per_minute": 7,
    "poll_rate_per_minute": 90,
    "email_rate_per_minute": 45,
    "max_wait_seconds": "20",
    "max_stream_seconds": 600,
    "stream_heartbeat_seconds": "10",
    "max_streams_per_address": 3,
    "max_waiting_polls_per_address": "6",
    "max_held_reads_per_client": 12,
    "default_page_limit": 50,
    "max_page_limit": 500,
    "max_page_bytes": 2_000_000,
    "state_max_keys": 64,
    "state_max_bytes": 131_072,
    "storage_max_bytes": 16 * 1024 * 1024,
    "email_text_max_bytes": 100_000,
    "email_attachment_max_bytes": 4_000_000,
    "outbound_max_sends_per_day": 50,
    "outbound_max_text_bytes": 20_000,
    "outbound_max_contacts": 5,
    "outbound_verifications_per_day": 7,
    "outbound_verifications_per_recipient_per_day": 4,
    "outbound_outcome_deadline_seconds": 3 * 86_400,
    "max_subscriptions_per_address": 4,
    "webhook_timeout_seconds": 7,
    "wake_retry_base_seconds": 3,
    "wake_retry_max_interval_seconds": 1_800,
    "wake_retry_window_seconds": 43_200,
    "wake_target_arns": [
        "arn:aws:sqs:eu-west-1:123456789012:agent-*",
        "arn:aws:states:eu-west-1:123456789012:stateMachine:agent-flow",
        "arn:aws:lambda:eu-west-1:123456789012:function:agent-run",
    ],
}


@dataclass(frozen=True)
class Synthesis:
    """One synthesized stack: its template, and cdk-nag's unacknowledged and acknowledged findings."""

    raw: dict[str, Any]
    violations: list[str]
    acknowledgments: dict[str, str]  # "<construct path> <rule>" -> reason

    @cached_property
    def template(self) -> Template:
        return Template.from_json(self.raw)

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.raw["Resources"].items()
            if resource["Type"] == resource_type
        }

    def only(self, resource_type: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(resource_type)
        assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
        return next(iter(found.items()))

    def gateway_methods(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Each API Gateway method by (full resource path, HTTP method); the root is "/"."""
        resources = self.resources("AWS::ApiGateway::Resource")
        rest_api_id, _ = self.only("AWS::ApiGateway::RestApi")

        def path(resource_ref: Any) -> str:
            if resource_ref == {"Fn::GetAtt": [rest_api_id, "RootResourceId"]}:
                return ""
            properties = resources[resource_ref["Ref"]]["Properties"]
            return f"{path(properties['ParentId'])}/{properties['PathPart']}"

        return {
            (path(method["Properties"]["ResourceId"]) or "/", method["Properties"]["HttpMethod"]): method["Properties"]
            for method in self.resources("AWS::ApiGateway::Method").values()
        }


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Synthesis]) -> Synthesis:
    """`make(outdir)`'s synthesis, made by one pytest-xdist worker of the run and read by the others.

    A synthesis costs seconds of node's processor time: a worker that needs one another worker made
    waits for it rather than spending them again beside it.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's own
    kept = shared / f"synthesis-{name}.json"
    with (shared / f"synthesis-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kept.exists():
            return Synthesis(**json.loads(kept.read_text()))
        synthesis = make(tmp_path_factory.mktemp(name))
        kept.write_text(json.dumps(dataclasses.asdict(synthesis)))
        return synthesis


def synthesize(context: dict[str, Any], outdir: Path) -> Synthesis:
    app = cdk.App(context={**cdk_json_context(), **SKIP_BUNDLING, **context}, outdir=str(outdir))
    return synthesize_stack(app, build(app), outdir)


def synthesize_stack(app: cdk.App, stack: cdk.Stack, outdir: Path) -> Synthesis:
    """Synthesize `app` (made with `outdir`) and read back `stack` and cdk-nag's report."""
    try:
        app.synth()
    except Exception:  # cdk-nag failed the synthesis; the report below says why
        pass
    # Warnings do not stop synthesis; the report lists them with the errors.
    report = json.loads((outdir / "validation-report.json").read_text())
    violations = [
        f"{violation['severity']} {violation['ruleName']} at {construct['constructPath']}"
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    ]
    metadata = json.loads((outdir / f"{stack.artifact_id}.metadata.json").read_text())
    return Synthesis(
        raw=json.loads((outdir / stack.template_file).read_text()),
        violations=violations,
        acknowledgments={
            f"{path} {rule}": reason
            for path, entries in metadata.items()
            for entry in entries
            if entry["type"] == "aws:cdk:acknowledged-rules"
            for rule, reason in entry["data"].items()
        },
    )
