"""Inbound email: SES stores the raw message, then invokes the ingest function."""

from __future__ import annotations

import math

from tests.infra.synthesis import FULL_CONTEXT, Synthesis

BUCKET = "AWS::S3::Bucket"


def ingest_function_id(synthesis: Synthesis) -> str:
    [found] = [
        logical_id
        for logical_id, resource in synthesis.resources("AWS::Lambda::Function").items()
        if resource["Properties"]["Handler"] == "cairn.entrypoints.email_handler.lambda_handler"
    ]
    return found


def test_without_an_email_domain_there_is_nothing_of_email(default: Synthesis) -> None:
    for resource_type in (BUCKET, "AWS::SES::ReceiptRuleSet", "AWS::SES::ReceiptRule"):
        default.template.resource_count_is(resource_type, 0)
    # The one queue left is wake-ups' (infra/wakeups.py).
    assert [queue_id for queue_id in default.resources("AWS::SQS::Queue") if queue_id.startswith("Email")] == []


def test_rule_stores_the_message_then_invokes_ingest(full: Synthesis) -> None:
    bucket_id, _ = full.only(BUCKET)
    _, rule = full.only("AWS::SES::ReceiptRule")
    properties = rule["Properties"]["Rule"]
    assert properties["Recipients"] == ["mail.example.com"]
    assert properties["Enabled"] is True
    # Spam and virus verdicts are part of every email event.
    assert properties["ScanEnabled"] is True
    store, invoke = properties["Actions"]
    assert store == {"S3Action": {"BucketName": {"Ref": bucket_id}, "ObjectKeyPrefix": "inbound/"}}
    assert invoke == {
        "LambdaAction": {
            "FunctionArn": {"Fn::GetAtt": [ingest_function_id(full), "Arn"]},
            "InvocationType": "Event",
        }
    }


def test_rule_set_is_named_after_the_stack(full: Synthesis) -> None:
    full.template.has_resource_properties("AWS::SES::ReceiptRuleSet", {"RuleSetName": "cairn-prod"})


RULE_ARN = {
    "Fn::Join": [
        "",
        [
            "arn:",
            {"Ref": "AWS::Partition"},
            ":ses:",
            {"Ref": "AWS::Region"},
            ":",
            {"Ref": "AWS::AccountId"},
            ":receipt-rule-set/cairn-prod:receipt-rule/inbound",
        ],
    ]
}


def test_only_this_stacks_receipt_rule_may_write_messages(full: Synthesis) -> None:
    """Another rule set of the account (another stage's) must not drop mail here."""
    bucket_id, _ = full.only(BUCKET)
    _, policy = full.only("AWS::S3::BucketPolicy")
    by_effect = {
        s["Effect"]: s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Principal") == {"Service": "ses.amazonaws.com"}
    }
    allow, deny = by_effect["Allow"], by_effect["Deny"]
    assert allow["Action"] == deny["Action"] == "s3:PutObject"
    assert allow["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/inbound/*"]]}
    assert allow["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert deny["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/*"]]}
    assert deny["Condition"] == {"StringNotEquals": {"aws:SourceArn": RULE_ARN}}
    full.template.has_resource_properties("AWS::SES::ReceiptRule", {"Rule": {"Name": "inbound"}})


def test_ses_may_invoke_only_the_ingest_function(full: Synthesis) -> None:
    [permission] = [
        p["Properties"]
        for p in full.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "ses.amazonaws.com"
    ]
    assert permission["FunctionName"] == {"Fn::GetAtt": [ingest_function_id(full), "Arn"]}
    assert permission["SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert permission["SourceArn"] == RULE_ARN


def test_bucket_is_private_encrypted_and_tls_only(full: Synthesis) -> None:
    _, bucket = full.only(BUCKET)
    properties = bucket["Properties"]
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    _, policy = full.only("AWS::S3::BucketPolicy")
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )


def test_raw_messages_expire_with_their_events(full: Synthesis) -> None:
    _, bucket = full.only(BUCKET)
    [rule] = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    # Rounded up to whole days: a message may outlive its event by hours, never the reverse.
    assert rule["ExpirationInDays"] == math.ceil(FULL_CONTEXT["event_retention_seconds"] / 86_400) == 4
    assert rule["Prefix"] == "inbound/"
    assert rule["Status"] == "Enabled"


def test_bucket_is_retained_unless_the_stage_is_ephemeral(full: Synthesis, ephemeral: Synthesis) -> None:
    _, kept = full.only(BUCKET)
    assert kept["DeletionPolicy"] == "Retain"
    assert not full.resources("Custom::S3AutoDeleteObjects")
    _, dropped = ephemeral.only(BUCKET)
    assert dropped["DeletionPolicy"] == "Delete"
    # A bucket that received mail can only be deleted once emptied.
    assert len(ephemeral.resources("Custom::S3AutoDeleteObjects")) == 1


def test_failed_ingests_land_in_an_encrypted_queue(full: Synthesis) -> None:
    ((queue_id, queue),) = [
        (queue_id, queue)
        for queue_id, queue in full.resources("AWS::SQS::Queue").items()
        if queue_id.startswith("Email")
    ]
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    full.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": ingest_function_id(full)},
            "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}},
        },
    )


def test_rule_set_is_activated_only_when_asked(full: Synthesis, ephemeral: Synthesis) -> None:
    rule_set_id, _ = full.only("AWS::SES::ReceiptRuleSet")
    [activation] = full.resources("Custom::AWS").values()
    call = "".join(
        part if isinstance(part, str) else f"<{part['Ref']}>"
        for part in activation["Properties"]["Create"]["Fn::Join"][1]
    )
    assert '"action":"setActiveReceiptRuleSet"' in call
    assert f'"RuleSetName":"<{rule_set_id}>"' in call
    assert "Delete" not in activation["Properties"]
    assert not ephemeral.resources("Custom::AWS")


def test_outputs_tell_the_operator_what_to_publish(full: Synthesis) -> None:
    outputs = full.raw["Outputs"]
    assert outputs["EmailMxRecord"]["Value"] == {
        "Fn::Join": ["", ["10 inbound-smtp.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]
    }
    assert {"ReceiptRuleSetName", "EmailBucketName", "FailedIngestQueueUrl"} <= set(outputs)
