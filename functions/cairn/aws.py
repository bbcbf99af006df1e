"""Clients for AWS services, made from botocore alone.

boto3's session adds nothing a low-level client uses, and importing boto3
loads s3transfer, which every new Lambda container would pay for before its
first answer.

Every client comes from a new botocore session (sessions are cheap and hold
credentials), but all of them read service models through one loader per
process: reading and parsing a model's JSON is most of what making a client
costs (DynamoDB's alone is tens of milliseconds), and the loader keeps each
model once parsed.
"""

from __future__ import annotations

import threading
from typing import Any

import botocore.loaders
import botocore.session
from botocore.config import Config

_loader_lock = threading.Lock()
_loader: botocore.loaders.Loader | None = None


def session() -> botocore.session.Session:
    """A new botocore session (default credential chain) that reads models through the process's one loader."""
    global _loader
    made = botocore.session.get_session()
    with _loader_lock:
        if _loader is None:
            _loader = made.get_component("data_loader")
        else:
            made.register_component("data_loader", _loader)
    return made


def client(service: str, region: str, config: Config | None = None) -> Any:
    """A low-level client of `service` in `region`, with the default credential chain."""
    return session().create_client(service, region_name=region, config=config)
