"""How the inbox reads a body: JSON whatever its label, else form fields, text or bytes by its type."""

import base64
import json

import pytest

from cairn.addresses.inbox_bodies import Labels, read
from cairn.errors import InvalidJson, InvalidRequest
from tests.support.lambda_client import LambdaClient, path_of

FORM = "application/x-www-form-urlencoded"


def test_type_source_and_data_come_from_a_json_body():
    body = read(b'{"type": "render.completed", "source": "renderer", "data": {"frames": 3}}', "application/json")
    assert (body.type, body.source, json.loads(body.data_json)) == ("render.completed", "renderer", {"frames": 3})
    assert body.content_type == "application/json"


def test_without_data_the_whole_json_body_is_the_data_and_labels_are_absent():
    body = read(b'{"status": "ok", "type": 7}', "")
    assert (body.type, body.source) == (None, None)
    assert json.loads(body.data_json) == {"status": "ok", "type": 7}
    assert json.loads(read(b"[1, 2]", "").data_json) == [1, 2]
    assert read(b'{"data": null}', "").data_json == "null"


def test_a_body_that_parses_as_json_is_json_whatever_its_label():
    """`curl -d '{...}'` labels JSON as a form."""
    for label in (FORM, "text/plain", "application/octet-stream", ""):
        body = read(b'{"type": "build.finished", "data": {"ok": true}}', label)
        assert (body.type, body.content_type, json.loads(body.data_json)) == (
            "build.finished",
            "application/json",
            {"ok": True},
        )


def test_a_body_labelled_json_must_be_json():
    with pytest.raises(InvalidJson):
        read(b"token=x&text=hello", "application/json; charset=utf-8")
    with pytest.raises(InvalidJson):
        read(b"<a/>", "application/vnd.github+json")
    with pytest.raises(InvalidJson):
        read(b"{not json", "")  # no label: the body is taken to be JSON


def test_form_fields_become_an_object_with_repeated_names_as_lists():
    body = read(b"token=x&text=hello+world&channel=%23ops&tag=a&tag=b&tag=&empty=", FORM)
    assert body.content_type == FORM
    assert json.loads(body.data_json) == {
        "token": "x",
        "text": "hello world",
        "channel": "#ops",
        "tag": ["a", "b", ""],
        "empty": "",
    }
    assert json.loads(read("name=%C3%A9l%C3%A8ve&city=Zürich".encode(), FORM).data_json) == {
        "name": "élève",
        "city": "Zürich",
    }
    latin = read(b"name=%E9l%E8ve", f"{FORM}; charset=iso-8859-1")
    assert json.loads(latin.data_json) == {"name": "élève"}


def test_text_is_kept_as_text_in_its_charset():
    body = read(b"deploy finished\nall green", "text/plain; charset=utf-8")
    assert (body.content_type, json.loads(body.data_json)) == ("text/plain", "deploy finished\nall green")
    assert json.loads(read("café".encode("latin-1"), 'text/csv; charset="latin-1"').data_json) == "café"


@pytest.mark.parametrize(
    ("raw", "declared"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "image/png"),
        (b"<invoice id='7'/>", "application/xml"),
        (b"\x00\x01binary", "application/octet-stream"),
        (b"\xff\xfe not utf-8", "text/plain"),  # undecodable text is bytes
        (b"bell\x07", "text/plain"),  # control characters are not text
        (b"a=%FF", FORM),  # fields that are not UTF-8 are bytes
        (b"\\ud800 half a pair", "text/plain; charset=unicode_escape"),  # no answer could carry the text
        # Codecs not run on a stranger's bytes: two fail without a UnicodeDecodeError, punycode takes quadratic time.
        (b"plain", "text/plain; charset=undefined"),
        (b"xn--zz", "text/plain; charset=idna"),
        (b"a\\b", "text/plain; charset=punycode"),
        (b"e28h" + b"a" * 200_000, "text/plain; charset=PunyCode"),
        (b"e28h" + b"a" * 200_000, f"{FORM}; charset=punycode"),
        (b'--x\r\nContent-Disposition: form-data; name="v"\r\n\r\n1\r\n--x--\r\n', "multipart/form-data; boundary=x"),
    ],
)
def test_anything_else_is_kept_as_base64_with_its_declared_type(raw: bytes, declared: str):
    body = read(raw, declared)
    data = json.loads(body.data_json)
    assert base64.b64decode(data["base64"]) == raw
    assert data["content_type"] == declared
    assert body.content_type == declared.partition(";")[0]


def test_query_labels_apply_when_the_body_carries_none():
    labels = Labels(type="slack.command", source="slack")
    form = read(b"command=%2Fdeploy&text=prod", FORM, labels)
    assert (form.type, form.source) == ("slack.command", "slack")
    labelled = read(b'{"type": "own.type", "data": 1}', "", labels)
    assert (labelled.type, labelled.source) == ("own.type", "slack")


def test_a_retry_is_the_same_request_only_with_the_same_bytes_type_and_labels():
    assert read(b"a=1", FORM).request_digest == read(b"a=1", FORM).request_digest
    assert read(b"a=1", FORM).request_digest != read(b"a=1", "text/plain").request_digest
    assert read(b"a=1", FORM).request_digest != read(b"a=1&", FORM).request_digest
    assert read(b"a=1", FORM).request_digest != read(b"a=1", FORM, Labels(type="x")).request_digest
    # JSON bodies are the same request in any spacing or key order, as before.
    assert read(b'{"a": 1, "b": 2}', "").request_digest == read(b'{"b":2,"a":1}', FORM).request_digest


def test_overlong_labels_are_refused():
    with pytest.raises(InvalidRequest):
        read(json.dumps({"type": "x" * 257}).encode(), "")
    with pytest.raises(InvalidRequest):
        read(b"a=1", FORM, Labels(source="x" * 257))


def test_the_inbox_route_records_each_kind(memory_api: LambdaClient):
    created = memory_api.provision()
    inbox = path_of(created["endpoints"]["inbox_url"])
    sent = [
        (b"token=x&text=hello", FORM, {"token": "x", "text": "hello"}),
        (b"hello", "text/plain", "hello"),
        (b"\x00\x01", "application/octet-stream", {"base64": "AAE=", "content_type": "application/octet-stream"}),
        (b'{"type": "build.finished"}', FORM, {"type": "build.finished"}),
    ]
    for raw, declared, _ in sent:
        reply = memory_api.request(
            "POST", f"{inbox}?type=hook&source=tests", body=raw, headers={"Content-Type": declared}
        )
        assert reply.status == 202, reply.text
    events = memory_api.poll(created).json()["events"]
    assert [(event["type"], event["source"], event["data"]) for event in events] == [
        ("hook", "tests", sent[0][2]),
        ("hook", "tests", "hello"),
        ("hook", "tests", sent[2][2]),
        ("build.finished", "tests", sent[3][2]),
    ]
    assert [event["content_type"] for event in events] == [
        FORM,
        "text/plain",
        "application/octet-stream",
        "application/json",
    ]
    assert all(event["ingress_surface"] == "http" and event["verified_by"] is None for event in events)


def test_idempotency_works_for_every_kind(memory_api: LambdaClient):
    created = memory_api.provision()
    inbox = path_of(created["endpoints"]["inbox_url"])

    def post(raw: bytes, declared: str, key: str):
        return memory_api.request("POST", inbox, body=raw, headers={"Content-Type": declared, "Idempotency-Key": key})

    first = post(b"a=1&a=2", FORM, "k1")
    again = post(b"a=1&a=2", FORM, "k1")
    assert (first.status, again.status) == (202, 200)
    assert again.json() == {**first.json(), "duplicate": True}
    assert (post(b"a=1", FORM, "k1").status, post(b"a=1&a=2", "text/plain", "k1").status) == (422, 422)
    assert post(b"\x00", "image/png", "k2").status == 202 and post(b"\x00", "image/png", "k2").status == 200
    assert len(memory_api.poll(created).json()["events"]) == 2


def test_an_overlong_query_label_is_refused(memory_api: LambdaClient):
    created = memory_api.provision()
    inbox = path_of(created["endpoints"]["inbox_url"])
    reply = memory_api.request("POST", f"{inbox}?type={'x' * 257}", body=b"a=1", headers={"Content-Type": FORM})
    assert reply.status in (400, 422)
    assert memory_api.poll(created).json()["events"] == []
