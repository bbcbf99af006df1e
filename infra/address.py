"""CairnAddress: an address a stack declares, provisioned at deploy time through its service's own API.

The handler (`cairn.entrypoints.address_resource`) keeps the creation answer
(read token, inbox URL) in a Secrets Manager secret it creates per request;
the template only ever holds the secret's ARN, the address id and its email.
One handler and provider per service serve all its addresses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import ArnFormat, CustomResource, Duration, SecretValue, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.checks import acknowledge, finding_text
from infra.function import FunctionBase, ServiceFunction
from infra.service import CairnService

# Named by string: CDK never imports the application package.
ADDRESS_HANDLER = "cairn.entrypoints.address_resource.on_event"
# The handler's secrets are named `<prefix>/<stack name>/...` (`address_resource.secret_name`).
SECRET_PREFIX = "cairn-addresses"
SECRET_ACTIONS = [
    "secretsmanager:CreateSecret",
    "secretsmanager:GetSecretValue",
    "secretsmanager:PutSecretValue",
    "secretsmanager:DeleteSecret",
]
_PROVIDER_ID = "AddressProvider"


class CairnAddress(Construct):
    """One address of `service`, for `task_id`, living `expires_in` from its creation.

    `state` keys are written with `if_revision: 0` when the address is made. A
    change of any prop makes a new address; CloudFormation then deletes the
    old one. Deleting the resource deletes the address and its secret.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service: CairnService,
        task_id: str,
        expires_in: Duration,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._resource = CustomResource(
            self,
            "Resource",
            service_token=_provider(service).service_token,
            resource_type="Custom::CairnAddress",
            properties={
                "ServiceUrl": service.api_url,
                "TaskId": task_id,
                "ExpiresInSeconds": str(int(expires_in.to_seconds())),
                "State": dict(state or {}),
            },
        )
        # The API answers only once its routes, permissions and stage exist.
        self._resource.node.add_dependency(service.api)
        self.address_id = self._resource.get_att_string("AddressId")
        self.email = self._resource.get_att_string("Email")
        self.secret_arn = self._resource.get_att_string("SecretArn")
        self.secret = secretsmanager.Secret.from_secret_complete_arn(self, "Secret", self.secret_arn)

    @property
    def inbox_url(self) -> SecretValue:
        """The inbox URL (a credential: its path is the inbox secret), resolved from the secret at deploy time."""
        return SecretValue.secrets_manager(self.secret_arn, json_field="inbox_url")

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read the creation answer: address id, read token, URLs, email."""
        return self.secret.grant_read(grantee)


def _provider(service: CairnService) -> cr.Provider:
    """The service's one address provider, made with its first address."""
    existing = service.node.try_find_child(_PROVIDER_ID)
    if existing is not None:
        return existing.node.find_child("Provider")  # type: ignore[return-value]
    owner = Construct(service, _PROVIDER_ID)
    handler = ServiceFunction(
        owner,
        "Handler",
        # Not the service's environment: the handler reaches the service through its API only.
        base=FunctionBase(service.code, {}, service.config.log_retention, service.config.removal_policy),
        handler=ADDRESS_HANDLER,
        description="Cairn addresses declared as resources",
        timeout=Duration.minutes(1),
        memory_size=256,
    ).function
    secrets = Stack.of(service).format_arn(
        service="secretsmanager",
        resource="secret",
        resource_name=f"{SECRET_PREFIX}/{Stack.of(service).stack_name}/*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    handler.add_to_role_policy(iam.PolicyStatement(actions=SECRET_ACTIONS, resources=[secrets]))
    provider = cr.Provider(owner, "Provider", on_event_handler=handler)
    acknowledge(
        provider,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        "The role of CDK's own provider framework function, which this construct does not define; the managed "
        "policy only lets it write its CloudWatch logs, and its logging of events is off.",
    )
    acknowledge(
        provider,
        f"AwsSolutions-IAM5[Resource::{finding_text(Stack.of(service).resolve(handler.function_arn))}:*]",
        "CDK's provider framework invokes the address handler, any version of it: the grant names that one "
        "function, and the wildcard is its version qualifier.",
    )
    acknowledge(
        owner,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:"
        f"{SECRET_PREFIX}/{Stack.of(service).stack_name}/*]",
        "The handler creates one secret per address, named from the CloudFormation request, so the names "
        "are unknown at synthesis; the grant is limited to this stack's prefix and to the four calls it makes.",
    )
    return provider
