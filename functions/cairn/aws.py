"""Clients for AWS services, made from botocore alone.

boto3's session adds nothing a low-level client uses, and importing boto3
loads s3transfer, which every new Lambda container would pay for before its
first answer.
"""

from __future__ import annotations

from typing import Any

import botocore.session
from botocore.config import Config


def client(service: str, region: str, config: Config | None = None) -> Any:
    """A low-level client of `service` in `region`, with the default credential chain."""
    return botocore.session.get_session().create_client(service, region_name=region, config=config)
