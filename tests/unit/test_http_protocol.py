"""`cairn serve`'s HTTP protocol keeps ordinary traffic whole while it bounds a request's head.

A real uvicorn server on a socket of its own, with an application that
echoes how much of each request it read: the head bound must cut nothing a
client may send, whatever the socket hands the parser at once.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from cairn.local.http_protocol import MAX_HEAD_BYTES, JsonErrorHttpToolsProtocol


async def echo_sizes(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers each request with its path, the size of its headers and the size of its body."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = sum(len(name) + len(value) for name, value in scope["headers"])
    body = json.dumps({"path": scope["path"], "headers": headers, "body": size}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    config = uvicorn.Config(echo_sizes, http=JsonErrorHttpToolsProtocol, lifespan="off", log_level="critical")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield listening.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=10)


def exchange(port: int, request: bytes) -> bytes:
    """Everything the server answers before it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def bodies(answer: bytes) -> list[dict[str, Any]]:
    """The JSON bodies of a run of answers, in order."""
    found = []
    for part in answer.split(b"HTTP/1.1 ")[1:]:
        assert part.startswith(b"200 "), part[:200]
        found.append(json.loads(part.partition(b"\r\n\r\n")[2]))
    return found


def post(path: str, body: bytes, *, close: bool = False) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + (b"Connection: close\r\n" if close else b"") + b"\r\n" + body


def test_pipelined_requests_with_bodies_past_the_bound_are_all_read_whole(port: int):
    """Bodies of 1, 64 Ki + 1 and 1 Mi bytes sent in one write behind their heads: each is read to its
    last byte and answered in order, since only a head counts against the bound."""
    sizes = [1, MAX_HEAD_BYTES + 1, 1024 * 1024]
    requests = [post(f"/{number}", b"b" * size, close=number == len(sizes) - 1) for number, size in enumerate(sizes)]
    answers = bodies(exchange(port, b"".join(requests)))
    assert [(answer["path"], answer["body"]) for answer in answers] == [
        (f"/{number}", size) for number, size in enumerate(sizes)
    ]


def test_many_heads_each_near_the_bound_on_one_connection_are_served(port: int):
    """The bound is per request: eight heads of 60 KiB each on one keep-alive connection are all served."""
    filler = b"X-Filler: " + b"f" * (60 * 1024) + b"\r\n"
    head = b"GET /near HTTP/1.1\r\nHost: x\r\n" + filler
    requests = [head + b"\r\n"] * 7 + [head + b"Connection: close\r\n\r\n"]
    answers = bodies(exchange(port, b"".join(requests)))
    assert len(answers) == 8 and all(answer["headers"] > 60 * 1024 for answer in answers)


@pytest.mark.parametrize("pieces", [1, 7, 4096], ids=["one-write", "seven-writes", "4096-writes"])
def test_a_head_past_the_bound_is_refused_with_json_however_it_arrives(port: int, pieces: int):
    head = b"GET /long HTTP/1.1\r\nHost: x\r\nX-Filler: "
    request = head + b"f" * (MAX_HEAD_BYTES + 1 - len(head))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        step = -(-len(request) // pieces)
        for start in range(0, len(request), step):
            connection.sendall(request[start : start + step])
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head_of_answer, _, body = answer.partition(b"\r\n\r\n")
    assert head_of_answer.startswith(b"HTTP/1.1 431 ")
    assert json.loads(body)["error"]["code"] == "request_head_too_large"


def test_a_malformed_request_is_a_json_bad_request_and_the_connection_closes(port: int):
    answer = exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\nGET /next HTTP/1.1\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"connection: close" in head
    assert json.loads(body) == {
        "error": {"code": "bad_request", "message": "The request is not valid HTTP/1.1, so it was not read."}
    }
