"""The server secret: made by the stack, kept with the table, readable by the API function and the wake-up
functions that sign webhook deliveries alone."""

from __future__ import annotations

from infra.wakeups import DISPATCH_HANDLER, SWEEP_HANDLER
from tests.infra.synthesis import Synthesis
from tests.infra.test_functions import API_HANDLER, as_list, cairn_functions, policy_statements, role_of

SECRET = "AWS::SecretsManager::Secret"


def readers(synthesis: Synthesis, secret_id: str) -> set[str]:
    return {
        resource["Properties"]["Handler"]
        for resource in cairn_functions(synthesis).values()
        for statement in policy_statements(synthesis, role_of(resource["Properties"]))
        if "secretsmanager:GetSecretValue" in as_list(statement["Action"])
        and {"Ref": secret_id} in as_list(statement["Resource"])
    }


def test_the_stack_makes_a_random_secret_that_only_the_api_and_the_webhook_signers_read(full: Synthesis) -> None:
    secret_id, secret = full.only(SECRET)
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 43
    signers = {API_HANDLER, DISPATCH_HANDLER, SWEEP_HANDLER}
    assert readers(full, secret_id) == signers
    for resource in cairn_functions(full).values():
        variables = resource["Properties"]["Environment"]["Variables"]
        expected = {"Ref": secret_id} if resource["Properties"]["Handler"] in signers else None
        assert variables.get("CAIRN_SERVER_SECRET_ARN") == expected
    full.template.resource_count_is("AWS::SecretsManager::RotationSchedule", 0)


def test_the_secret_is_kept_with_the_table(full: Synthesis, ephemeral: Synthesis) -> None:
    _, kept = full.only(SECRET)
    _, table = full.only("AWS::DynamoDB::GlobalTable")
    assert kept["DeletionPolicy"] == table["DeletionPolicy"] == "Retain"
    _, dropped = ephemeral.only(SECRET)
    assert dropped["DeletionPolicy"] == "Delete"
