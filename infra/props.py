"""The props table of `CairnService`, generated from `CairnProps` for the docs (docs/cdk.md).

Names, types and defaults come from the dataclass itself; only the meaning of
each prop is written here. `python -m infra.props` prints the table, and a
test keeps the docs' copy equal to it.
"""

from __future__ import annotations

from dataclasses import MISSING, fields

from infra.config import StageConfig

# What each prop means; a test fails when a field has no entry (or an entry no field).
MEANINGS = {
    "stage": "API Gateway stage name; also names Cairn's own stack (`cairn-<stage>`), whose context requires it",
    "ephemeral": "throw-away deployment: table, bucket and log groups are deleted with the stack, not retained",
    "email_domain": "turns on email: addresses receive `<address id>@<domain>` and send from it",
    "activate_receipt_rule_set": "make the service's SES rule set the account's active one (one per region)",
    "email_ingress_surface": "the `ingress_surface` of received mail; not `http`, `state` or `outbound`",
    "outbound_from": "the operator's sender (needs `email_domain`): all mail from it, `Reply-To` the address's email",
    "api_domain_name": "custom domain of the API (with `api_certificate_arn`); the public base URL",
    "api_certificate_arn": "ACM certificate for `api_domain_name`, in the stack's region",
    "alarm_topic_arn": "existing SNS topic every alarm notifies",
    "api_throttle_rate": "stage-wide API Gateway rate limit (requests per second)",
    "api_throttle_burst": "stage-wide API Gateway burst limit",
    "api_reserved_concurrency": "Lambda concurrency reserved for (and capping) the API function",
    "stream_reserved_concurrency": "Lambda concurrency reserved for (and capping) feed reads, downloads and `/mcp`",
    "log_retention_days": "retention of function and access logs (a CloudWatch value)",
    "table_max_read_request_units": "the table's most read request units a second (a cost ceiling); None: no maximum",
    "table_max_write_request_units": "the table's most write request units a second (a cost ceiling); None: no maximum",
    "monthly_budget_usd": "monthly cost budget in USD for the resources tagged `cairn:service`; None: no budget",
    "budget_emails": "who the budget emails at 80 % of it and at a forecast past it (with `alarm_topic_arn`)",
    "waf_ip_rate_limit": "requests per client IP in five minutes before a WAF web ACL blocks it (429); None: no WAF",
    "limits": "the application's limits by lower-case name (`max_events`, ...); the rest keep their defaults",
    "wake_target_arns": "ARN patterns wake-ups may target (`grant_wake_target` adds constructs)",
    "name_prefix": "start of every physical name (alarms, API, SES); default: derived from the construct's path",
}


def props_table() -> str:
    """The Markdown table: prop, type, default, meaning, in the dataclass's order."""
    rows = ["| prop | type | default | meaning |", "|---|---|---|---|"]
    for field in fields(StageConfig):
        if field.default is not MISSING:
            default = f"`{field.default!r}`"
        elif field.default_factory is not MISSING:
            default = f"`{field.default_factory()!r}`"
        else:
            default = "required"
        # A bare `|` would end the cell, even inside code.
        kind = str(field.type).replace("|", "\\|")
        rows.append(f"| `{field.name}` | `{kind}` | {default} | {MEANINGS[field.name]} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(props_table(), end="")
