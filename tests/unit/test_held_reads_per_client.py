"""One client may hold only so many event streams and waiting long-polls across all its addresses.

Anyone may make addresses, and each may hold its own streams and polls: without a cap per client, a
few addresses' worth of held reads from one machine would take every slot of the streaming function
from everyone else. A client is its IP address, or for IPv6 its /64.
"""

from __future__ import annotations

from typing import Any

from tests.support.fakes import FakeClock
from tests.support.lambda_client import LambdaClient, path_of
from tests.unit.test_event_stream import StreamingContext, stream_request
from tests.unit.test_mcp_api import call


def open_stream(api: LambdaClient, created: dict, source_ip: str = "203.0.113.7") -> dict[str, Any]:
    api.source_ip = source_ip
    return api.app.resolve(stream_request(api, created), StreamingContext())


def capped(clock: FakeClock) -> LambdaClient:
    return LambdaClient.in_memory(clock, max_held_reads_per_client=3, max_streams_per_address=2)


def test_a_client_past_its_cap_is_refused_on_any_address_and_others_are_not(clock: FakeClock):
    api = capped(clock)
    first, second = api.provision(), api.provision()
    held = [open_stream(api, first), open_stream(api, first), open_stream(api, second)]
    assert [answer["statusCode"] for answer in held] == [200, 200, 200]
    refused = open_stream(api, second)
    assert refused["statusCode"] == 429
    assert '"too_many_held_reads"' in refused["body"] and "per client" in refused["body"]
    assert int(refused["multiValueHeaders"]["Retry-After"][-1]) >= 1
    # The refusal kept none of the second address's slots: another client takes its last one.
    assert open_stream(api, second, source_ip="198.51.100.9")["statusCode"] == 200
    held[0]["body"].close()
    assert open_stream(api, second)["statusCode"] == 429, "the second address's own cap now"
    assert open_stream(api, first)["statusCode"] == 200, "the slot a closed stream gave back"


def test_a_waiting_long_poll_counts_and_an_answered_one_does_not(clock: FakeClock):
    api = capped(clock)
    created = api.provision()
    for _ in range(2):
        assert open_stream(api, created)["statusCode"] == 200
    other = api.provision()
    assert open_stream(api, other)["statusCode"] == 200
    events = path_of(other["endpoints"]["events_url"])
    token = other["credentials"]["read_token"]
    assert api.request("GET", f"{events}?wait=0", token=token).status == 200, "it would hold nothing"
    waiting = api.request("GET", f"{events}?wait=5", token=token)
    assert (waiting.status, waiting.error_code) == (429, "too_many_held_reads")


def test_ipv6_clients_are_counted_by_their_64(clock: FakeClock):
    api = capped(clock)
    addresses = [api.provision() for _ in range(3)]
    for index, created in enumerate(addresses):
        assert open_stream(api, created, source_ip=f"2001:db8:1:2::{index + 1}")["statusCode"] == 200
    assert open_stream(api, addresses[0], source_ip="2001:db8:1:2:ffff::9")["statusCode"] == 429, "the same /64"
    assert open_stream(api, addresses[0], source_ip="2001:db8:1:3::1")["statusCode"] == 200, "another /64"


def test_a_waiting_poll_events_over_mcp_counts_too(clock: FakeClock):
    api = capped(clock)
    created = api.provision()
    for _ in range(2):
        assert open_stream(api, created)["statusCode"] == 200
    assert open_stream(api, api.provision())["statusCode"] == 200
    arguments = {"address_id": created["address"]["id"], "read_token": created["credentials"]["read_token"]}
    refused = call(api, "poll_events", **arguments, wait=5)
    assert refused["isError"] and refused["structuredContent"]["error"]["code"] == "too_many_held_reads"
    assert call(api, "poll_events", **arguments)["isError"] is False, "an answered poll holds nothing"
