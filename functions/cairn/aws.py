"""Clients for AWS services, made from botocore alone.

boto3's session adds nothing a low-level client uses, and importing boto3
loads s3transfer, which every new Lambda container would pay for before its
first answer.

Every client comes from a new botocore session (sessions hold credentials),
made cheap by what they share per process: one loader, through which every
session reads service models (reading and parsing a model's JSON is most of
what making a client costs, DynamoDB's alone tens of milliseconds, and the
loader keeps each model once parsed), and botocore's built-in event handlers,
registered once and copied into each new session (registering them costs a
new session about 14 ms, a copy about 1 ms).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import botocore.handlers
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.hooks import HierarchicalEmitter

_shared_lock = threading.Lock()
_loader: botocore.loaders.Loader | None = None
# The built-in handlers as registered, and how many there were: a library that adds one when imported
# (moto does) is registered anew.
_registered: tuple[int, HierarchicalEmitter] | None = None


def session() -> botocore.session.Session:
    """A new botocore session (default credential chain) that reads models through the process's one loader."""
    global _loader
    made = botocore.session.Session(event_hooks=copy.copy(_builtin_handlers()), include_builtin_handlers=False)
    with _shared_lock:
        if _loader is None:
            _loader = made.get_component("data_loader")
        else:
            made.register_component("data_loader", _loader)
    return made


def _builtin_handlers() -> HierarchicalEmitter:
    global _registered
    with _shared_lock:
        count = len(botocore.handlers.BUILTIN_HANDLERS)
        if _registered is None or _registered[0] != count:
            emitter = HierarchicalEmitter()
            botocore.session.Session(event_hooks=emitter)  # registers the built-in handlers on `emitter`
            _registered = (count, emitter)
        return _registered[1]


def client(service: str, region: str, config: Config | None = None) -> Any:
    """A low-level client of `service` in `region`, with the default credential chain."""
    return session().create_client(service, region_name=region, config=config)
