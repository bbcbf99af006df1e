"""Which targets a deployment delivers to: webhook URL rules and the ARN allow-list of AWS targets.

AWS targets are refused unless their ARN matches a pattern of the
deployment's `wake_target_arns` (shell-style `*` wildcards); the stack
grants its functions exactly those ARNs, so a subscription can never make
Cairn call what the operator did not name. A Step Functions task token and
a durable execution's callback id name no ARN: they are taken when the
allow-list names state machines, or durable executions, and the grant on
those patterns decides which ones Cairn can complete.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

from cairn.errors import TargetRefused
from cairn.settings import Settings
from cairn.wakeups import egress
from cairn.wakeups.models import Target, TargetKind

_QUEUE_URL = re.compile(r"https://sqs\.([a-z0-9-]+)\.amazonaws\.com/(\d{12})/([A-Za-z0-9_-]{1,80}(?:\.fifo)?)")
_ARN = {
    TargetKind.EVENTBRIDGE: re.compile(r"arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus/[A-Za-z0-9._/-]{1,256}"),
    TargetKind.LAMBDA: re.compile(
        r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9$_-]{1,128})?"
    ),
}
_STATES_SERVICE = re.compile(r"arn:aws[a-z-*]*:states:")
# A pattern of durable executions (`<function ARN>:<qualifier>/durable-execution/<name>/<id>`,
# wildcards allowed): what the stack grants `lambda:SendDurableExecutionCallbackSuccess` on.
_DURABLE_EXECUTIONS = re.compile(r"arn:aws[a-z-*]*:lambda:[^/]*/durable-execution/")
# Lambda's own shape of a callback id (base64 text, at most 1,024 characters).
_CALLBACK_ID = re.compile(r"[A-Za-z0-9+/]+={0,2}")
MAX_CALLBACK_ID_LENGTH = 1024
MAX_TASK_TOKEN_LENGTH = 1024
MAX_DETAIL_TYPE_LENGTH = 128

# The parameters of each kind: required, then optional.
PARAMETERS: Mapping[TargetKind, tuple[tuple[str, ...], tuple[str, ...]]] = {
    TargetKind.WEBHOOK: (("url",), ()),
    TargetKind.SQS: (("queue_url",), ()),
    TargetKind.EVENTBRIDGE: (("event_bus_arn",), ("detail_type",)),
    TargetKind.LAMBDA: (("function_arn",), ()),
    TargetKind.STEP_FUNCTIONS: (("task_token",), ()),
    TargetKind.LAMBDA_DURABLE_CALLBACK: (("callback_id",), ()),
}


def check_target(
    target: Target, *, allowed_arns: Iterable[str], allow_local: bool, own_origins: Iterable[str] = ()
) -> None:
    """Refuse (`TargetRefused`) a target this deployment may not deliver to (`own_origins`: its own URLs)."""
    required, optional = PARAMETERS[target.kind]
    missing = [name for name in required if not target.params.get(name)]
    unknown = sorted(set(target.params) - set(required) - set(optional))
    if missing or unknown:
        raise TargetRefused(
            f"A {target.kind} target takes {', '.join(required + optional)}.", missing=missing, unknown=unknown
        )
    if target.kind is TargetKind.WEBHOOK:
        egress.check_destination(target.params["url"], allow_local=allow_local, own_origins=own_origins)
        return
    patterns = list(allowed_arns)
    if target.kind is TargetKind.STEP_FUNCTIONS:
        _check_task_token(target.params["task_token"], patterns)
        return
    if target.kind is TargetKind.LAMBDA_DURABLE_CALLBACK:
        _check_callback_id(target.params["callback_id"], patterns)
        return
    arn = target_arn(target)
    if not any(fnmatch.fnmatchcase(arn, pattern) for pattern in patterns):
        raise TargetRefused("This deployment does not deliver to that target.", arn=arn)
    detail_type = target.params.get("detail_type")
    if detail_type is not None and not 0 < len(detail_type) <= MAX_DETAIL_TYPE_LENGTH:
        raise TargetRefused(f"detail_type must be 1 to {MAX_DETAIL_TYPE_LENGTH} characters.", field="detail_type")


def deployment_origins(settings: Settings) -> list[str]:
    """The deployment's fixed URL, where it has one (a custom domain): never a webhook's target."""
    return [settings.public_base_url] if settings.public_base_url else []


def target_arn(target: Target) -> str:
    """The ARN an AWS target reaches (an SQS queue's, from its URL); `TargetRefused` if malformed."""
    if target.kind is TargetKind.SQS:
        found = _QUEUE_URL.fullmatch(target.params["queue_url"])
        if found is None:
            raise TargetRefused("queue_url must be https://sqs.<region>.amazonaws.com/<account>/<queue>.")
        region, account, name = found.groups()
        return f"arn:aws:sqs:{region}:{account}:{name}"
    field = PARAMETERS[target.kind][0][0]
    value = target.params[field]
    if not _ARN[target.kind].fullmatch(value):
        raise TargetRefused(f"{field} is not a {target.kind} ARN.", field=field)
    return value


def _check_task_token(token: str, patterns: list[str]) -> None:
    # A task token names no state machine; the allow-list admits callbacks when it names state machines,
    # which is also what the stack grants `states:SendTaskSuccess` on.
    if not 0 < len(token) <= MAX_TASK_TOKEN_LENGTH or not token.isprintable():
        raise TargetRefused(f"task_token must be 1 to {MAX_TASK_TOKEN_LENGTH} printable characters.")
    if not any(_STATES_SERVICE.match(pattern) for pattern in patterns):
        raise TargetRefused("This deployment does not complete Step Functions tasks.")


def _check_callback_id(callback_id: str, patterns: list[str]) -> None:
    # A callback id names no function either; callbacks are admitted when the allow-list names durable
    # executions, which is also what the stack grants `lambda:SendDurableExecutionCallbackSuccess` on.
    if len(callback_id) > MAX_CALLBACK_ID_LENGTH or not _CALLBACK_ID.fullmatch(callback_id):
        raise TargetRefused(
            f"callback_id must be a durable execution's callback id: 1 to {MAX_CALLBACK_ID_LENGTH} base64 characters.",
            field="callback_id",
        )
    if not any(_DURABLE_EXECUTIONS.match(pattern) for pattern in patterns):
        raise TargetRefused("This deployment does not complete Lambda durable execution callbacks.")
