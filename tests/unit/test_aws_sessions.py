"""Every botocore session `cairn.aws` makes carries botocore's built-in handlers, registered once per process,
and one session's handlers never leak into another's."""

from __future__ import annotations

from typing import Any

import botocore.handlers
import pytest
from botocore.exceptions import ParamValidationError

from cairn import aws


class Refused(Exception):
    """What the test's own handler raises, so a request that reaches it goes no further."""


def refuse(**_: Any) -> None:
    raise Refused()


def s3() -> Any:
    return aws.session().create_client(
        "s3", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def test_a_sessions_clients_run_botocores_built_in_handlers():
    # The bucket name is checked by a built-in handler, before anything is sent.
    with pytest.raises(ParamValidationError, match="Bucket name"):
        s3().put_object(Bucket="no/such bucket", Key="k", Body=b"")


def test_a_handler_registered_on_one_session_stays_there():
    first = aws.session()
    first.register("before-parameter-build.s3.PutObject", refuse)
    client = first.create_client("s3", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    with pytest.raises(Refused):
        client.put_object(Bucket="bucket", Key="k", Body=b"")
    # A later session's request is not refused by it: it goes on to the built-in check.
    with pytest.raises(ParamValidationError):
        s3().put_object(Bucket="no/such bucket", Key="k", Body=b"")


def test_a_built_in_handler_added_by_a_library_later_is_in_every_later_session(monkeypatch: pytest.MonkeyPatch):
    aws.session()  # the built-in handlers as they are now, registered
    added = [*botocore.handlers.BUILTIN_HANDLERS, ("before-parameter-build.s3.PutObject", refuse)]
    monkeypatch.setattr(botocore.handlers, "BUILTIN_HANDLERS", added)
    with pytest.raises(Refused):
        s3().put_object(Bucket="bucket", Key="k", Body=b"")
