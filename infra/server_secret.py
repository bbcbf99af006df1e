"""The deployment's own secret (`cairn.server_secret`), kept in Secrets Manager.

It derives the credentials of addresses provisioned under an `Idempotency-Key`
and seals inbox verifier and webhook secrets, so it lives and goes with the
table: a new secret would leave those sealed secrets unreadable and those
retries unanswerable. Only the API function, which provisions and checks
signatures, and the wake-up dispatcher and sweep, which sign deliveries, may
read it.
"""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.checks import acknowledge
from infra.config import StageConfig

# Where the application finds it (`Settings.server_secret_arn`).
SECRET_ARN_VARIABLE = "CAIRN_SERVER_SECRET_ARN"


class ServerSecret(Construct):
    """A random secret made at deployment (Secrets Manager, under its AWS managed key), never rotated."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.secret = secretsmanager.Secret(
            self,
            "Secret",
            description="Cairn's server secret: derives provisioning credentials, seals verifier and webhook secrets",
            generate_secret_string=secretsmanager.SecretStringGenerator(password_length=64, exclude_punctuation=True),
            removal_policy=config.removal_policy,
        )
        acknowledge(
            self.secret,
            "AwsSolutions-SMG4",
            "Rotating it would make the verifier and webhook secrets sealed under it unreadable and the credentials "
            "derived from it unanswerable on retry; only the functions that need it read it, and it lives as long "
            "as the table.",
        )

    def grant_read(self, function: lambda_.Function) -> None:
        """Let `function` read the secret, and tell it where the secret is."""
        self.secret.grant_read(function)
        function.add_environment(SECRET_ARN_VARIABLE, self.secret.secret_arn)
