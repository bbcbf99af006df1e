"""SES v2 `SendEmail` as the outbound mailer in AWS.

The raw message goes out as composed (`Content.Raw`), from the address's
own email on the configured domain, through the configuration set whose
event destination reports delivery, bounce, complaint and rejection back
to `entrypoints/outbound_events_handler.py`. The message tags name the
address and the send, so an outcome needs no lookup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from cairn import aws
from cairn.email.outbound_ports import ComposedMessage, Handoff, MailerError

if TYPE_CHECKING:
    from types_boto3_sesv2 import SESV2Client

# Refusals SES will repeat for the same message; anything else may pass later.
_PERMANENT = {"MessageRejected", "MailFromDomainNotVerifiedException", "BadRequestException", "NotFoundException"}


class SesMailer:
    def __init__(self, client: SESV2Client, configuration_set: str | None) -> None:
        self._client = client
        self._configuration_set = configuration_set

    @classmethod
    def for_region(cls, region: str, configuration_set: str | None) -> SesMailer:
        client = aws.client("sesv2", region, Config(retries={"mode": "standard"}))
        return cls(client, configuration_set)

    def send(self, message: ComposedMessage) -> Handoff:
        params: dict[str, Any] = {
            "FromEmailAddress": message.sender,
            "Destination": {"ToAddresses": [message.recipient]},
            "Content": {"Raw": {"Data": message.raw}},
        }
        if message.tags:
            params["EmailTags"] = [{"Name": name, "Value": value} for name, value in message.tags]
        if self._configuration_set:
            params["ConfigurationSetName"] = self._configuration_set
        try:
            response = self._client.send_email(**params)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            raise MailerError(f"SES refused: {code}", permanent=code in _PERMANENT) from error
        except BotoCoreError as error:
            raise MailerError(f"SES unreachable: {error}", permanent=False) from error
        return Handoff(provider_message_id=response["MessageId"])
