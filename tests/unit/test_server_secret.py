"""The deployment's own secret: where it comes from, and what sealing under it guarantees."""

from __future__ import annotations

import boto3
import pytest

from cairn.server_secret import ServerSecret, ServerSecretUnavailable
from cairn.settings import Settings

SECRET = "a-deployment-secret-of-forty-three-or-more-characters"


def test_a_sealed_value_opens_only_in_its_own_context_and_under_its_own_secret() -> None:
    server = ServerSecret.from_settings(Settings(server_secret=SECRET))
    sealed = server.seal("whsec_provider", context="inbox-verifier/addr_a/github")

    assert "whsec_provider" not in sealed
    assert server.unseal(sealed, context="inbox-verifier/addr_a/github") == "whsec_provider"
    # A random nonce each time: equal secrets are not seen to be equal.
    assert server.seal("whsec_provider", context="inbox-verifier/addr_a/github") != sealed
    with pytest.raises(ValueError):
        server.unseal(sealed, context="inbox-verifier/addr_b/github")
    other = ServerSecret.from_settings(Settings(server_secret=SECRET + "-other"))
    with pytest.raises(ValueError):
        other.unseal(sealed, context="inbox-verifier/addr_a/github")


def test_provisioning_keys_depend_on_the_server_secret() -> None:
    ours = ServerSecret.from_settings(Settings(server_secret=SECRET))
    theirs = ServerSecret.from_settings(Settings(server_secret=SECRET + "-other"))
    assert ours.provisioning_key("client-key") == ours.provisioning_key("client-key")
    assert ours.provisioning_key("client-key") != theirs.provisioning_key("client-key")
    assert ours.provisioning_key("client-key") != ours.provisioning_key("client-key2")


@pytest.mark.parametrize(
    "settings",
    [Settings(server_secret=None, server_secret_arn=None), Settings(server_secret="too-short")],
    ids=["none", "short"],
)
def test_without_a_usable_secret_nothing_is_derived(settings: Settings) -> None:
    server = ServerSecret.from_settings(settings)
    with pytest.raises(ServerSecretUnavailable):
        server.provisioning_key("client-key")


def test_in_aws_the_secret_is_read_from_secrets_manager_once_per_process(moto_env: None) -> None:
    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    arn = secrets.create_secret(Name="cairn-server-secret", SecretString=SECRET)["ARN"]
    server = ServerSecret.from_settings(Settings(server_secret_arn=arn))
    expected = ServerSecret.from_settings(Settings(server_secret=SECRET)).provisioning_key("client-key")

    assert server.provisioning_key("client-key") == expected
    secrets.delete_secret(SecretId=arn, ForceDeleteWithoutRecovery=True)
    # Read already: the process keeps what it read, for every use.
    assert server.provisioning_key("client-key") == expected
    assert server.unseal(server.seal("s", context="c"), context="c") == "s"
