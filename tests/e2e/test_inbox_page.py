"""The inbox page for people, in a real headless Chromium against `cairn serve`."""

from __future__ import annotations

import re
import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_serve import auth, provision
from tests.support.browser import Browser
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

FORGED_HTML = "<img src=x onerror=alert(1)>"
REPORT = b"%PDF-1.4\n" + bytes(range(256)) * 8 + b"\n%%EOF\n"
EVENT_TYPES = "return [...document.querySelectorAll('#feed .event .type')].map(node => node.textContent)"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    session = Browser(downloads)
    try:
        yield session
    finally:
        session.close()


def send_report(served: ServeProcess, to: str) -> None:
    message = EmailMessage()
    message["From"] = "Reviewer <reviewer@example.org>"
    message["To"] = to
    message["Subject"] = "Signed report"
    message.set_content("Attached.")
    message.add_attachment(REPORT, maintype="application", subtype="pdf", filename="report.pdf")
    with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
        smtp.send_message(message)


def test_a_person_follows_acknowledges_and_downloads_and_strangers_html_stays_text(
    served: ServeProcess, browser: Browser, tmp_path: Path
):
    with served.client() as client:
        created = provision(client)
        address_id, token = created["address"]["id"], created["credentials"]["read_token"]
        browser.open(f"{served.base_url}/inbox#{address_id}:{token}")
        empty = browser.wait_for("const p = document.getElementById('feed-empty'); return !p.hidden && p.textContent")
        assert "inbox URL" in empty
        # The token left the address bar and stays in this tab only.
        assert browser.script("return location.href") == f"{served.base_url}/inbox"
        assert browser.script("return localStorage.length") == 0
        assert token in browser.script("return sessionStorage.getItem('cairn.inbox')")

        # Everything arrives while the page long-polls: no reload.
        client.put(created["endpoints"]["state_url"] + "/plan", json={"value": {"step": 2}}, headers=auth(created))
        inbox = created["endpoints"]["inbox_url"]
        httpx.post(inbox, json={"type": "render.done", "data": {"frames": 24}})
        send_report(served, created["address"]["email"])
        httpx.post(inbox, json={"type": "email.received", "source": "email", "data": {"html": FORGED_HTML}})
        types = browser.wait_for(f"const t = (() => {{ {EVENT_TYPES} }})(); return t.length === 4 && t")
        assert types == ["email.received", "email.received", "render.done", "state.updated"]  # newest first
        surfaces = browser.script("return [...document.querySelectorAll('#feed .surface')].map(n => n.textContent)")
        assert surfaces == ["http", "email", "http", "state"]

        state = browser.wait_for(
            "return document.getElementById('state').textContent.includes('step') && "
            "document.getElementById('state').innerText"
        )
        assert "plan" in state and "revision 1" in state and '"step": 2' in state

        # The forged event's data shows as text: no element made from it, no script run.
        forged = browser.script("return document.querySelector('#feed .event .data').textContent")
        assert FORGED_HTML in forged
        assert browser.script("return document.querySelectorAll('#feed img').length") == 0
        assert browser.alert_text() is None

        browser.click("#feed .event:nth-child(3) button.ack")
        browser.wait_for(
            "return document.querySelector('#feed .event:nth-child(3) .acked').textContent.startsWith('acknowledged')"
        )
        events = client.get(created["endpoints"]["events_url"], headers=auth(created)).json()["events"]
        assert [event["type"] for event in events if event["acknowledged_at"]] == ["render.done"]

        browser.click("#feed .event:nth-child(2) button.download")
        assert browser.downloaded("report.pdf") == REPORT
        # Readable on a phone (no sideways scrolling) and on a desktop; the screenshots are test artifacts only.
        assert browser.script("return document.documentElement.scrollWidth <= window.innerWidth")
        browser.screenshot(tmp_path / "inbox-phone.png")
        browser.command("window/rect", {"width": 1280, "height": 900})
        assert browser.script("return document.documentElement.scrollWidth <= window.innerWidth")
        browser.screenshot(tmp_path / "inbox-desktop.png")


def test_a_refused_token_is_said_in_words_and_the_form_is_offered(served: ServeProcess, browser: Browser):
    with served.client() as client:
        created = provision(client)
    browser.open(f"{served.base_url}/inbox#{created['address']['id']}:crt_wrong")
    message = browser.wait_for("const e = document.getElementById('error'); return !e.hidden && e.textContent")
    assert "refused" in message
    assert browser.script("return document.getElementById('open').hidden") is False
    assert browser.script("return sessionStorage.length") == 0


def test_the_page_allows_nothing_from_other_origins(served: ServeProcess):
    page = httpx.get(f"{served.base_url}/inbox")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    # No fonts, scripts or styles from elsewhere.
    assert re.search(r'(src|href)="(https?:)?//', page.text) is None
