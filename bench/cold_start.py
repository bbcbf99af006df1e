"""What a new Lambda container of each entry point costs before and until its first answer.

Each figure is the median of fresh Python processes, as Lambda starts one
per new container: the time to import the entry point's module (which
builds its services, as Lambda's init does), the time from the start of
the import to the first request's answer (a provisioning for the API, an
ingested message for email, an attachment through the download function's
handler), and the process's peak memory. Beside them in the same run, a
fresh process's `import boto3`, and its first DynamoDB answer (a client and
one GetItem), as the ratio each figure is read against, and two floors: the
API's libraries imported without any of Cairn's modules, and `boto3` with one
pydantic model. The processes talk to the same DynamoDB Local; the wall clock
includes nothing but Python.

Each process sees what a Lambda container has: Cairn and the packages its
bundle installs (pyproject's own dependencies, installed apart once for
this interpreter), not this environment's development tools. A module
imported only when present (httpcore takes `trio` when it finds it, and
selenium brings it) would otherwise count in a figure Lambda never pays.
"""

from __future__ import annotations

import compileall
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from bench.report import Table
from cairn.addresses.models import sequence_of
from cairn.dynamodb import keys
from cairn.dynamodb.client import make_client
from cairn.dynamodb.raw_messages import raw_message_store
from cairn.email.ingest import Delivery
from cairn.services import Services
from cairn.settings import Settings
from infra.dependencies import runtime_dependencies
from tests.support.lambda_client import LambdaClient
from tests.support.mail import fixture_message, new_message_id, ses_event

ROOT = Path(__file__).resolve().parents[1]
# The packages a Lambda bundle installs, for this interpreter: kept between runs, named by what they hold.
PACKAGES_DIR = ROOT / ".cairn" / "bench"
CONTEXT = (
    "types.SimpleNamespace(function_name='cairn', memory_limit_in_mb=1024, aws_request_id='bench', "
    "invoked_function_arn='arn:aws:lambda:us-east-1:123456789012:function:cairn')"
)
# {imports} then {first}: `event` and `context` are bound before `{first}` runs.
SCRIPT = """
import time
began = time.perf_counter()
{imports}
imported = time.perf_counter()
import json, re, types
event = json.loads({event!r})
context = {context}
{first}
answered = time.perf_counter()
# The high-water mark of this process image (getrusage's would include the parent's, from before exec).
peak = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
print(json.dumps({{"import": imported - began, "first": answered - began, "peak": peak, "answer": str(answer)[:80]}}))
"""


@dataclass(frozen=True)
class EntryPoint:
    name: str
    imports: str
    first: str
    # A new first request for each process.
    event: Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Start:
    import_ms: float
    first_ms: float
    peak_mb: float
    answer: str


def measure_cold_starts(settings: Settings, table_name: str, blob_dir: Path, processes: int) -> Table:
    settings = settings.replace(table_name=table_name, email_blob_dir=blob_dir)
    # pip byte-compiled boto3 when it installed it; Cairn's modules get the same, or every process
    # would compile them from source where writing byte code is off (PYTHONDONTWRITEBYTECODE).
    compileall.compile_dir(ROOT / "functions" / "cairn", quiet=1)
    environment = _environment(settings, _lambda_packages())
    entry_points = _entry_points(settings)
    boto3 = EntryPoint(
        "import boto3",
        "import boto3",
        "client = boto3.client('dynamodb', region_name='us-east-1', endpoint_url="
        f"{settings.dynamodb_endpoint!r}, aws_access_key_id='local', aws_secret_access_key='local')\n"
        f"answer = client.get_item(TableName={table_name!r}, Key={{'pk': {{'S': 'none'}}, 'sk': {{'S': 'none'}}}})"
        "['ResponseMetadata']['HTTPStatusCode']",
        dict,
    )
    floors = _library_floors(boto3.first)
    boto3_start, *starts = _medians([boto3, *entry_points, *floors], environment, processes)
    table = Table(
        f"Cold start per Lambda entry point (fresh processes, median of {processes})",
        ["entry point", "import ms", "x import boto3", "first answer ms", "x boto3's first answer", "peak MB",
         "first answer"],
    )  # fmt: skip
    table.add("import boto3 (baseline)", boto3_start.import_ms, 1.0, boto3_start.first_ms, 1.0,
              boto3_start.peak_mb, f"GetItem {boto3_start.answer}")  # fmt: skip
    for entry_point, start in zip([*entry_points, *floors], starts, strict=True):
        table.add(
            entry_point.name, start.import_ms, round(start.import_ms / boto3_start.import_ms, 2), start.first_ms,
            round(start.first_ms / boto3_start.first_ms, 2), start.peak_mb, start.answer,
        )  # fmt: skip
    table.notes += [
        "Import: the entry point's module, which builds its services as Lambda's init does; the DynamoDB client "
        "is made with the first request (or before a SnapStart snapshot). Every module has its byte code, "
        "as pip leaves boto3's and the Lambda asset ships Cairn's.",
        "Every process (boto3's too) runs without site-packages, on Cairn and the packages of its Lambda bundle "
        "installed apart (pyproject's dependencies), as a Lambda container has them.",
        "First answer: from the start of the import to the first request's answer. boto3's: a client and one "
        "GetItem on the same DynamoDB Local.",
        "Downloads: the download function's loop resolves with the API handler; its first request is an "
        "attachment download through that handler.",
        "Floors: the libraries alone, without any of Cairn's modules; their first answer is boto3's (a client and "
        "one GetItem). The API's floor is what its import costs before Cairn's own code: the DynamoDB client's "
        "botocore, pydantic, and Powertools' Logger and REST resolver with its validation middleware.",
    ]
    return table


# The libraries an entry point imports, without Cairn: the least its import can cost.
FLOOR_OF_THE_API = "floor: the API's libraries, no Cairn"
FLOOR_OF_PYDANTIC = "floor: boto3 and a pydantic model, no Cairn"


def _library_floors(first_answer: str) -> list[EntryPoint]:
    api_libraries = """
import botocore.session
import pydantic
from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import OpenAPIRequestValidationMiddleware
"""
    pydantic_model = """
import boto3
import pydantic
class Request(pydantic.BaseModel):
    task_id: str | None = None
"""
    answer = f"import boto3\n{first_answer}"
    return [
        EntryPoint(FLOOR_OF_THE_API, api_libraries, answer, dict),
        EntryPoint(FLOOR_OF_PYDANTIC, pydantic_model, answer, dict),
    ]


def _entry_points(settings: Settings) -> list[EntryPoint]:
    """Each Lambda entry point, with a first request prepared in this process."""
    services = Services.build(settings, client=make_client(settings))
    caller = cast(LambdaClient, types.SimpleNamespace(source_ip="198.51.100.7"))  # `event` reads only this
    provision = LambdaClient.event(caller, "POST", "/api/v1/addresses", json_body={"task_id": "cold"})
    created = services.provisioning.provision(client_ip="198.51.100.7", task_id="cold")
    address = created.record
    delivered = Delivery(message_id=_stored_message(settings, address.email), recipients=[address.email])
    services.email.ingest(delivered)
    event_id, attachment = _first_attachment(services, address.id, created.read_token)
    download = LambdaClient.event(
        caller,
        "GET",
        f"/api/v1/addresses/{address.id}/events/{event_id}/attachments/{attachment}",
        token=created.read_token,
    )
    stream_batch = {"Records": [_stream_record(address.id, event_id)]}
    api_answer = "answer = handler.lambda_handler(event, context)['statusCode']"
    return [
        EntryPoint("API (cairn.entrypoints.api_handler)", "import cairn.entrypoints.api_handler as handler",
                   api_answer, lambda: provision),
        EntryPoint("email ingest (cairn.entrypoints.email_handler)",
                   "import cairn.entrypoints.email_handler as handler",
                   "answer = handler.lambda_handler(event, context) or 'ingested'",
                   lambda: ses_event(_stored_message(settings, address.email), [address.email])),
        EntryPoint("downloads (cairn.entrypoints.streaming)",
                   "import cairn.entrypoints.streaming\nimport cairn.entrypoints.api_handler as handler",
                   api_answer, lambda: download),
        EntryPoint("wake-ups (cairn.entrypoints.wake_handler)", "import cairn.entrypoints.wake_handler as handler",
                   "answer = handler.stream_handler(event, context)", lambda: stream_batch),
        EntryPoint("mail outcomes (cairn.entrypoints.outbound_events_handler)",
                   "import cairn.entrypoints.outbound_events_handler as handler",
                   "answer = handler.lambda_handler(event, context) or 'recorded'",
                   lambda: _delivery_notification(address.id, event_id)),
    ]  # fmt: skip


def _stream_record(address_id: str, event_id: str) -> dict[str, Any]:
    """The table stream's record of the event `event_id`, as Lambda's event source mapping hands it over."""
    key = {"pk": {"S": keys.address_pk(address_id)}, "sk": {"S": keys.event_sk(sequence_of(event_id) or 0)}}
    return {"eventName": "INSERT", "dynamodb": {"Keys": key, "NewImage": key, "SequenceNumber": "1"}}


def _delivery_notification(address_id: str, event_id: str) -> dict[str, Any]:
    """SNS's notification of SES's delivery report for a send of the address."""
    record = {
        "eventType": "Delivery",
        "mail": {
            "messageId": f"ses-{uuid.uuid4()}",
            "commonHeaders": {"messageId": "<bench@cairn.localhost>"},
            "tags": {"cairn_address": [address_id], "cairn_send": [event_id]},
        },
        "delivery": {"smtpResponse": "250 2.0.0 OK"},
    }
    notification: dict[str, Any] = {"MessageId": str(uuid.uuid4()), "Message": json.dumps(record), "Subject": None,
                    "Timestamp": "2026-01-01T00:00:00.000Z", "TopicArn": "arn:aws:sns:us-east-1:123456789012:cairn",
                    "Type": "Notification", "MessageAttributes": {}}  # fmt: skip
    return {"Records": [{"EventSource": "aws:sns", "EventVersion": "1.0", "Sns": notification}]}


def _stored_message(settings: Settings, recipient: str) -> str:
    """The id of a new message with attachments (its own Message-ID too), stored where the ingest reads it."""
    message_id = new_message_id()
    raw = fixture_message("nested_attachments.eml", recipient)
    raw = raw.replace(b"Message-ID: <5f1d2c3b", f"Message-ID: <{message_id[:12]}".encode(), 1)
    raw_message_store(settings).save(message_id, raw)
    return message_id


def _first_attachment(services: Services, address_id: str, token: str) -> tuple[str, str]:
    """The mail event's id and its first attachment's."""
    page = services.feed.poll(address_id, token, after=0, wait=0, limit=10)
    event = next(event for event in page.events if event.type == "email.received")
    return event.id, str(event.data["attachments"][0]["id"])


def _lambda_packages() -> Path:
    """A folder holding the Lambda bundle's packages for this interpreter, installed on first use."""
    wanted = sorted(runtime_dependencies())
    name = hashlib.sha256(json.dumps([sys.version, wanted]).encode()).hexdigest()[:16]
    folder = PACKAGES_DIR / f"lambda-packages-{name}"
    if not folder.is_dir():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts"]
        subprocess.run([*pip, f"--target={partial}", *wanted], check=True)
        partial.rename(folder)
    return folder


def _environment(settings: Settings, packages: Path) -> dict[str, str]:
    return {
        **os.environ,
        # With `-S` (no site-packages) these are all a process can import besides the standard library.
        "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(packages)]),
        "CAIRN_TABLE_NAME": settings.table_name,
        "CAIRN_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint or "",
        "CAIRN_EMAIL_BLOB_DIR": str(settings.email_blob_dir),
        "CAIRN_POLL_RATE_PER_MINUTE": str(settings.poll_rate_per_minute),
        "CAIRN_CREATE_RATE_PER_MINUTE": str(settings.create_rate_per_minute),
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
    }


def _medians(entry_points: list[EntryPoint], environment: dict[str, str], processes: int) -> list[Start]:
    """Each entry point's median start, the processes taken in turns (one of each, then again), so a
    machine that slows or speeds up during the run moves every figure alike and the ratios hold."""
    runs: list[list[dict[str, Any]]] = [[] for _ in entry_points]
    for _ in range(processes):
        for entry_point, taken in zip(entry_points, runs, strict=True):
            taken.append(_start(entry_point, environment))
    return [
        Start(
            import_ms=round(statistics.median(run["import"] for run in taken) * 1000, 1),
            first_ms=round(statistics.median(run["first"] for run in taken) * 1000, 1),
            peak_mb=round(statistics.median(run["peak"] for run in taken), 1),
            answer=taken[-1]["answer"],
        )
        for taken in runs
    ]


def _start(entry_point: EntryPoint, environment: dict[str, str]) -> dict[str, Any]:
    """One fresh process's import, first answer and peak memory."""
    script = SCRIPT.format(
        imports=entry_point.imports, first=entry_point.first, event=json.dumps(entry_point.event()), context=CONTEXT
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", textwrap.dedent(script)],
        capture_output=True, text=True, check=True, cwd=ROOT, env=environment,
    )  # fmt: skip
    return cast(dict[str, Any], json.loads(done.stdout.splitlines()[-1]))
