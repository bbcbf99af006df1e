import json

import pytest

from cairn.addresses.inbox import event_from_body
from cairn.errors import InvalidRequest


def test_type_source_and_data_come_from_the_body():
    event = event_from_body({"type": "render.completed", "source": "renderer", "data": {"frames": 3}})
    assert (event.type, event.source, json.loads(event.data_json)) == ("render.completed", "renderer", {"frames": 3})


def test_without_data_the_whole_body_is_the_data_and_defaults_apply():
    event = event_from_body({"status": "ok", "type": 7})
    assert event.type == "message.received"
    assert event.source == "http"
    assert json.loads(event.data_json) == {"status": "ok", "type": 7}


def test_non_object_bodies_are_kept_whole():
    assert json.loads(event_from_body([1, 2]).data_json) == [1, 2]
    assert json.loads(event_from_body("text").data_json) == "text"


def test_explicit_null_data_is_kept():
    assert event_from_body({"data": None}).data_json == "null"


def test_overlong_type_is_refused():
    with pytest.raises(InvalidRequest):
        event_from_body({"type": "x" * 257})
