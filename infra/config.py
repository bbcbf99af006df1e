"""What differs between deployments of the same stack, read from CDK context."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from constructs import Node

# The stage becomes part of the CloudFormation stack name and the API Gateway
# stage, so it must be valid for both.
_STAGE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,63}")


@dataclass(frozen=True)
class StageConfig:
    """One deployment: its stage name and whether its data may be thrown away.

    `ephemeral` is for short-lived stages (previews, CI): the table is deleted
    with the stack instead of being retained and protected.
    """

    stage: str
    ephemeral: bool = False

    def __post_init__(self) -> None:
        if not _STAGE_NAME.fullmatch(self.stage):
            raise ValueError(
                f"stage {self.stage!r} must start with a letter and contain only "
                "letters, digits and hyphens (at most 64 characters)"
            )

    @classmethod
    def from_context(cls, node: Node) -> StageConfig:
        """Read `stage` (required) and `ephemeral` (default false) from context."""
        stage = node.try_get_context("stage")
        if stage is None:
            raise ValueError("context value 'stage' is required (cdk.json sets it)")
        ephemeral = _as_bool("ephemeral", node.try_get_context("ephemeral"))
        return cls(stage=str(stage), ephemeral=ephemeral)

    @property
    def stack_name(self) -> str:
        """CloudFormation stack name; one stack per stage in an account and region."""
        return f"cairn-{self.stage}"

    @property
    def removal_policy(self) -> RemovalPolicy:
        """What CloudFormation does with stateful resources when they leave the stack."""
        return RemovalPolicy.DESTROY if self.ephemeral else RemovalPolicy.RETAIN


def _as_bool(name: str, value: object) -> bool:
    """Accept JSON booleans (cdk.json) and the strings `-c name=true` produces."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"context value {name!r} must be true or false, got {value!r}")
