"""cdk-nag's AWS Solutions rules, and the one way this project acknowledges a finding.

Every finding is either fixed or acknowledged next to the construct it is
about, with the reason a reviewer needs; synthesis fails on any other.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

# Acknowledgment ids name the pack that reports the finding.
_PACK = "AwsSolutions"


def add_checks(app: App) -> None:
    """Run the AWS Solutions rule pack when `app` synthesizes."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Accept finding `rule` (e.g. `AwsSolutions-IAM5[Resource::*]`) for `scope` and everything in it."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{_PACK}::{rule}", reason=reason))


def finding_text(value: object) -> str:
    """A resolved ARN as cdk-nag writes it in a finding: references become `<LogicalId>` or `<Id.Attribute>`."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(finding_text(part) for part in parts)
    raise ValueError(f"cannot name {value!r} as cdk-nag does")
