"""The table: keys, TTL, recovery, encryption, its optional ceiling, and what happens to it when a stack
goes away."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from infra.config import StageConfig
from tests.infra.synthesis import Synthesis

TABLE = "AWS::DynamoDB::GlobalTable"  # what TableV2 synthesizes to


def test_table_has_string_pk_sk_keys_and_on_demand_billing(default: Synthesis) -> None:
    default.template.has_resource_properties(
        TABLE,
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ]
            ),
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


def test_the_tables_throughput_is_capped_where_the_deployment_asks(full: Synthesis, default: Synthesis) -> None:
    _, table = full.only(TABLE)
    assert table["Properties"]["WriteOnDemandThroughputSettings"] == {"MaxWriteRequestUnits": 800}
    [replica] = table["Properties"]["Replicas"]
    assert replica["ReadOnDemandThroughputSettings"] == {"MaxReadRequestUnits": 2000}
    _, uncapped = default.only(TABLE)
    assert "WriteOnDemandThroughputSettings" not in uncapped["Properties"]
    assert "ReadOnDemandThroughputSettings" not in uncapped["Properties"]["Replicas"][0]


@pytest.mark.parametrize("key", ["table_max_read_request_units", "table_max_write_request_units"])
def test_a_ceiling_below_one_request_unit_fails_synthesis(key: str) -> None:
    with pytest.raises(ValueError, match=key):
        StageConfig(**{key: 0})


def test_table_expires_items_by_expires_at(default: Synthesis) -> None:
    default.template.has_resource_properties(
        TABLE, {"TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True}}
    )


def test_table_has_point_in_time_recovery(default: Synthesis) -> None:
    default.template.has_resource_properties(
        TABLE,
        {"Replicas": [Match.object_like({"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}})]},
    )


def test_table_is_encrypted_with_the_aws_managed_key(default: Synthesis) -> None:
    default.template.has_resource_properties(TABLE, {"SSESpecification": {"SSEEnabled": True, "SSEType": "KMS"}})


def test_table_is_retained_and_protected_by_default(default: Synthesis) -> None:
    default.template.has_resource(
        TABLE,
        {
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {"Replicas": [Match.object_like({"DeletionProtectionEnabled": True})]},
        },
    )


def test_ephemeral_stage_table_is_deleted_with_the_stack(ephemeral: Synthesis) -> None:
    ephemeral.template.has_resource(
        TABLE,
        {
            "DeletionPolicy": "Delete",
            "UpdateReplacePolicy": "Delete",
            "Properties": {"Replicas": [Match.object_like({"DeletionProtectionEnabled": False})]},
        },
    )


def test_table_logical_id_is_stable(default: Synthesis) -> None:
    # Renaming the construct would replace the table, and with it every address.
    logical_id, _ = default.only(TABLE)
    assert logical_id.startswith("StorageTable")
