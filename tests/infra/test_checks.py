"""Quality gates: cdk-nag's AWS Solutions rules and cfn-lint on every deployment shape."""

from __future__ import annotations

import json

from cfnlint.api import ManualArgs, lint

from tests.infra.synthesis import Synthesis


def test_cdk_nag_finds_nothing_unacknowledged(every_shape: Synthesis) -> None:
    assert every_shape.violations == []


def test_every_acknowledgment_gives_a_reason(every_shape: Synthesis) -> None:
    assert every_shape.acknowledgments, "no acknowledgments found: is cdk-nag running?"
    for finding, reason in every_shape.acknowledgments.items():
        assert " AwsSolutions::AwsSolutions-" in finding
        # A reason says why the rule does not fit here, in more than a few words.
        assert len(reason.split()) >= 15, (finding, reason)


def test_cfn_lint_finds_no_errors(every_shape: Synthesis) -> None:
    matches = lint(json.dumps(every_shape.raw), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    errors = [f"{m.rule.id} {m.message} at {m.path}" for m in matches if m.rule.id.startswith("E")]
    assert errors == []
