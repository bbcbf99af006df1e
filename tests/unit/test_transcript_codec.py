"""The canonical message JSON: goa-ai's `model/json_test.go` cases, its text
rules (§2.3), and properties over generated messages."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.transcript import exactjson
from cairn.transcript.codec import decode_message, decode_messages, encode_message, encode_messages
from cairn.transcript.errors import MessageFormatError
from cairn.transcript.exactjson import Number
from cairn.transcript.model import (
    CacheCheckpointPart,
    Citation,
    CitationLocation,
    CitationsPart,
    DocumentPart,
    DocumentRange,
    ImagePart,
    Message,
    Role,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)

# What Go's json.Marshal writes for one message holding every kind of part.
CANONICAL = (
    '{"role":"assistant","parts":['
    '{"kind":"thinking","text":"plan \\u003cfirst\\u003e","signature":"sig","redacted":"AQI=","index":3,"final":true},'
    '{"kind":"text","text":"é e\u0301 🙂 \\u0026 \\u2028"},'
    '{"kind":"image","format":"png","bytes":"iVBORw=="},'
    '{"kind":"document","name":"spec","format":"txt","bytes":null,"text":"","chunks":["a","b"],"uri":"",'
    '"context":"","cite":true},'
    '{"kind":"citations","text":"supported","citations":[{"title":"t","source":"s","location":{"document_char":'
    '{"document_index":0,"start":1,"end":5},"document_chunk":null,"document_page":null},"source_content":["x"]}]},'
    '{"kind":"tool_use","id":"call-1","name":"search","input":{"z":9007199254740993,"q":"old","f":1e-7},'
    '"thought_signature":"opaque"},'
    '{"kind":"tool_result","tool_use_id":"call-1","content":{"hits":[1.50,-0],"reading":9007199254740993},'
    '"is_error":false},'
    '{"kind":"cache_checkpoint"}],'
    '"meta":{"sequence":9007199254740995,"source":"\\u003cexact\\u003e"}}'
)


def test_a_canonical_message_reencodes_to_the_same_bytes():
    message = decode_message(CANONICAL)
    assert [part.kind for part in message.parts] == [
        "thinking",
        "text",
        "image",
        "document",
        "citations",
        "tool_use",
        "tool_result",
        "cache_checkpoint",
    ]
    assert encode_message(message) == CANONICAL.encode()
    assert encode_messages([message, message]) == f"[{CANONICAL},{CANONICAL}]".encode()


def test_decoded_parts_hold_exact_values():
    message = decode_message(CANONICAL)
    thinking, text, image, document, citations, use, result, _ = message.parts
    assert thinking == ThinkingPart(text="plan <first>", signature="sig", redacted=b"\x01\x02", index=3, final=True)
    assert text == TextPart(text="é e\u0301 🙂 & \u2028")
    assert image == ImagePart(format="png", bytes=b"\x89PNG")
    assert document == DocumentPart(name="spec", format="txt", chunks=["a", "b"], cite=True)
    assert citations.citations == [
        Citation(
            title="t", source="s", location=CitationLocation(document_char=DocumentRange(0, 1, 5)), source_content=["x"]
        )
    ]
    assert use.thought_signature == "opaque"
    assert list(use.input) == ["z", "q", "f"]  # raw input keeps its order
    assert use.input["z"] == 9007199254740993
    assert result.content == {"hits": [Decimal("1.5"), 0], "reading": 9007199254740993}
    assert message.meta == {"sequence": 9007199254740995, "source": "<exact>"}


def test_every_part_is_written_with_its_kind_first_and_all_its_keys():
    parts = {
        "thinking": ThinkingPart(text="think", signature="sig", index=1, final=True),
        "text": TextPart(text="hello"),
        "image": ImagePart(format="png", bytes=b"\x01"),
        "document": DocumentPart(name="doc", format="txt", text="hello"),
        "citations": CitationsPart(text="supported", citations=[Citation(title="t")]),
        "tool_use": ToolUsePart(id="call-1", name="search", input={"q": "golang"}),
        "tool_result": ToolResultPart(tool_use_id="tu", content={"hits": 1}),
        "cache_checkpoint": CacheCheckpointPart(),
    }
    written = {kind: encode_message(Message(role=Role.USER, parts=[part])) for kind, part in parts.items()}
    assert written["text"] == b'{"role":"user","parts":[{"kind":"text","text":"hello"}],"meta":null}'
    assert (
        b'{"kind":"thinking","text":"think","signature":"sig","redacted":null,"index":1,"final":true}'
        in written["thinking"]
    )
    assert b'{"kind":"cache_checkpoint"}' in written["cache_checkpoint"]
    assert (
        b'"citations":[{"title":"t","source":"","location":{"document_char":null,"document_chunk":null,'
        b'"document_page":null},"source_content":null}]' in written["citations"]
    )
    for kind, text in written.items():
        assert decode_message(text).parts == [parts[kind]]


def test_empty_parts_are_written_as_null_and_empty_meta_stays_an_object():
    assert encode_message(Message(role=Role.SYSTEM)) == b'{"role":"system","parts":null,"meta":null}'
    assert decode_message('{"role":"system","parts":[],"meta":{}}') == Message(role=Role.SYSTEM, meta={})
    assert encode_message(Message(role=Role.SYSTEM, meta={})) == b'{"role":"system","parts":null,"meta":{}}'


def test_null_reads_as_the_zero_value():
    payload = '{"role":"user","parts":[{"kind":"thinking","text":null,"index":null,"final":null}]}'
    assert decode_message(payload).parts == [ThinkingPart()]


def test_numbers_in_meta_content_and_input_stay_exact():
    payload = (
        '{"role":"user","parts":[{"kind":"tool_result","tool_use_id":"call-1","content":{"reading":9007199254740993},'
        '"is_error":false}],"meta":{"sequence":9007199254740995}}'
    )
    message = decode_message(payload)
    assert message.parts[0].content["reading"] == 9007199254740993
    assert message.meta["sequence"] == 9007199254740995
    use = decode_message(
        '{"role":"assistant","parts":[{"kind":"tool_use","id":"call-1","name":"search",'
        '"input":{"z":9007199254740993,"q":"old"}}]}'
    ).parts[0]
    assert exactjson.dumps(use.input, sort_keys=False) == '{"z":9007199254740993,"q":"old"}'


def test_go_maps_are_written_with_sorted_keys():
    message = Message(
        role=Role.USER,
        parts=[ToolResultPart(tool_use_id="t", content={"b": 1, "a": {"d": 2, "c": 3}})],
        meta={"z": 1, "y": 2},
    )
    text = encode_message(message)
    assert b'"content":{"a":{"c":3,"d":2},"b":1}' in text
    assert text.endswith(b'"meta":{"y":2,"z":1}}')


def test_floats_are_written_as_go_writes_float64():
    assert exactjson.dumps([1e-7, 1e21, 1.0, 0.1, 1e16, -0.0, 123456789012345678.0, 2.5e-300]) == (
        "[1e-7,1e+21,1,0.1,10000000000000000,-0,123456789012345680,2.5e-300]"
    )
    with pytest.raises(exactjson.JsonError):
        exactjson.dumps(float("nan"))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"role":"user","parts":[],"unknown":true}', 'unknown field "unknown"'),
        ('{"role":"user","parts":[{"kind":"text","text":"hello","unknown":true}]}', 'unknown field "unknown"'),
        ('{"Role":"user","Parts":[]}', 'unknown field "Parts"'),
        ('{"role":"user","parts":[{"Kind":"text","Text":"hello"}]}', "message part requires kind"),
        ('{"role":"user","parts":[{"text":"hello"}]}', "message part requires kind"),
        ('{"role":"user","parts":[{"kind":"","text":"hello"}]}', "message part requires kind"),
        ('{"role":"user","parts":[{"kind":"video"}]}', 'unknown part kind "video"'),
        ('{"role":"user","parts":["hello"]}', "decode part object"),
        ("null", "expected JSON object"),
        ('{"role":"robot"}', "message role must be system, user or assistant"),
        ('{"role":"user","parts":[{"kind":"image","format":"png"}]}', "ImagePart requires format and bytes"),
        ('{"role":"user","parts":[{"kind":"image","bytes":"AQ=="}]}', "ImagePart requires format and bytes"),
        ('{"role":"user","parts":[{"kind":"document","text":"x"}]}', "DocumentPart requires Name"),
        ('{"role":"user","parts":[{"kind":"document","name":"d"}]}', "exactly one of Bytes, Text, Chunks, or URI"),
        (
            '{"role":"user","parts":[{"kind":"document","name":"d","text":"x","uri":"s3://b/k"}]}',
            "exactly one of Bytes, Text, Chunks, or URI",
        ),
        (
            '{"role":"user","parts":[{"kind":"document","name":"d","chunks":["a",""]}]}',
            "DocumentPart requires non-empty Chunks[1]",
        ),
        (
            '{"role":"assistant","parts":[{"kind":"tool_use","name":"search","input":{"q":"old"}}]}',
            "requires id and name",
        ),
        (
            '{"role":"assistant","parts":[{"kind":"tool_use","name":"search","args":{"q":"old"}}]}',
            'unknown field "args"',
        ),
        (
            '{"role":"assistant","parts":[{"kind":"tool_use","id":"c","name":"lookup"}]}',
            "requires input to be a JSON object",
        ),
        ('{"role":"user","parts":[{"kind":"tool_result","content":"ok"}]}', "ToolResultPart requires tool_use_id"),
        (
            '{"role":"user","parts":[{"kind":"citations","citations":[{"title":"t","location":{"document_page":'
            '{"page":1}}}]}]}',
            'unknown field "page"',
        ),
        ('{"role":"user","parts":[{"kind":"thinking","index":1.5}]}', 'field "index" must be a 64-bit integer'),
        ('{"role":"user","parts":[{"kind":"thinking","redacted":"***"}]}', 'field "redacted" must be base64 text'),
        ('{"role":"user","parts":[{"kind":"text","text":5}]}', 'field "text" must be a string'),
    ],
)
def test_non_canonical_messages_are_refused_with_goa_ai_messages(payload: str, message: str):
    with pytest.raises(MessageFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        decode_message(payload)


@pytest.mark.parametrize("value", ["null", "[]", '"value"'])
def test_tool_input_must_be_an_object(value: str):
    payload = f'{{"role":"assistant","parts":[{{"kind":"tool_use","id":"c","name":"lookup","input":{value}}}]}}'
    with pytest.raises(MessageFormatError, match="requires input to be a JSON object"):
        decode_message(payload)


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (ToolUsePart(id="c", name="lookup"), "requires input to be a JSON object"),
        (ToolUsePart(name="lookup", input={}), "requires id and name"),
        (ImagePart(format="png", bytes=b""), "ImagePart requires format and bytes"),
        (ToolResultPart(content="ok"), "requires tool_use_id"),
        (TextPart(text=b"bytes"), 'field "text" must be a string'),
        (ToolResultPart(tool_use_id="t", content=object()), "unsupported type"),
    ],
)
def test_what_cannot_be_read_back_is_never_written(part, message: str):
    with pytest.raises(MessageFormatError, match=message):
        encode_messages([Message(role=Role.ASSISTANT, parts=[part])])


def test_a_delta_is_an_array_and_errors_name_the_message():
    assert decode_messages(b"[]") == []
    assert decode_messages(b"null") == []
    with pytest.raises(MessageFormatError, match=r"unmarshal runlog delta: message\[1\]: decode parts\[0\]"):
        decode_messages(b'[{"role":"user"},{"role":"user","parts":[{"kind":"nope"}]}]')
    with pytest.raises(MessageFormatError, match="expected a JSON array"):
        decode_messages(b'{"role":"user"}')


# -- text (goa-ai hooks/codec_utf8_test.go, applied to transcript payloads) ------------

PRESERVED_TEXT = [
    ('"plain text"', "plain text"),
    ('"éΩ雪🙂"', "éΩ雪🙂"),
    ('"\\u00e9\\u03a9\\u96ea\\ud83d\\ude42"', "éΩ雪🙂"),
    ('"\ufffd"', "\ufffd"),
    ('"\\ufffd"', "\ufffd"),
    ('"é e\\u0301"', "é e\u0301"),
    ('"\\u0000\\b\\f\\n\\r\\t\\/\\\\\\""', '\x00\b\f\n\r\t/\\"'),
    ('"\\ud800"', "\ufffd"),
]


@pytest.mark.parametrize(("quoted", "text"), PRESERVED_TEXT)
def test_valid_text_is_preserved_and_rewritten_canonically(quoted: str, text: str):
    canonical = encode_messages([Message(role=Role.USER, parts=[TextPart(text=text)])])
    payload = f'[{{"role":"user","parts":[{{"kind":"text","text":{quoted}}}],"meta":null}}]'.encode()
    decoded = decode_messages(payload)
    assert decoded[0].parts[0].text == text
    assert encode_messages(decoded) == canonical


@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\x80", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"],
    ids=["invalid byte", "isolated continuation", "truncated", "overlong", "encoded surrogate", "above range"],
)
def test_invalid_utf8_is_refused_and_the_payload_left_alone(bad: bytes):
    payload = b'[{"role":"user","parts":[{"kind":"text","text":"' + bad + b'"}],"meta":null}]'
    original = bytes(payload)
    with pytest.raises(MessageFormatError, match="invalid UTF-8"):
        decode_messages(payload)
    assert payload == original


@pytest.mark.parametrize(("tail", "message"), [(b" {}", "invalid JSON"), (b" !", "invalid JSON")])
def test_trailing_data_is_refused(tail: bytes, message: str):
    with pytest.raises(MessageFormatError, match=message):
        decode_messages(b"[]" + tail)


# -- properties ------------------------------------------------------------------------

# Unpaired surrogates are not text: they become U+FFFD (tested above).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
small_ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
exact_numbers = st.decimals(allow_nan=False, allow_infinity=False, places=3).map(lambda d: Number(str(d)))
json_values = st.recursive(
    st.none() | st.booleans() | texts | st.integers() | exact_numbers,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
optional_bytes = st.none() | st.binary(max_size=8)
ranges = st.none() | st.builds(DocumentRange, small_ints, small_ints, small_ints)
non_empty = st.text(min_size=1, max_size=8)

parts = st.one_of(
    st.builds(ThinkingPart, texts, texts, optional_bytes, small_ints, st.booleans()),
    st.builds(TextPart, texts),
    st.builds(ImagePart, non_empty, st.binary(min_size=1, max_size=8)),
    st.builds(DocumentPart, non_empty, texts, st.just(None), non_empty, st.none(), st.just(""), texts, st.booleans()),
    st.builds(DocumentPart, non_empty, texts, st.none(), st.just(""), st.lists(non_empty, min_size=1, max_size=3)),
    st.builds(
        CitationsPart,
        texts,
        st.none()
        | st.lists(
            st.builds(
                Citation,
                texts,
                texts,
                st.builds(CitationLocation, ranges, ranges, ranges),
                st.none() | st.lists(texts, max_size=2),
            ),
            max_size=2,
        ),
    ),
    st.builds(ToolUsePart, non_empty, non_empty, json_objects, texts),
    st.builds(ToolResultPart, non_empty, json_values, st.booleans()),
    st.just(CacheCheckpointPart()),
)
messages = st.builds(Message, st.sampled_from(Role), st.lists(parts, max_size=4), st.none() | json_objects)


@given(st.lists(messages, max_size=4))
def test_decoding_an_encoding_gives_the_messages_back(generated: list[Message]):
    encoded = encode_messages(generated)
    decoded = decode_messages(encoded)
    assert decoded == generated
    assert encode_messages(decoded) == encoded
