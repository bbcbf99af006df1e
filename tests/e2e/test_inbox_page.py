"""The inbox page for people, in a real headless Chromium against `cairn serve`."""

from __future__ import annotations

import re
import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as shown

from tests.e2e.test_serve import auth, provision
from tests.support.browser import chromium, downloaded, until_script, wait
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

FORGED_HTML = "<img src=x onerror=alert(1)>"
REPORT = b"%PDF-1.4\n" + bytes(range(256)) * 8 + b"\n%%EOF\n"
EVENT_TYPES = "return [...document.querySelectorAll('#feed .event .type')].map(node => node.textContent)"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver = chromium(downloads)
    try:
        yield driver
    finally:
        driver.quit()


def visible_text(browser: webdriver.Chrome, element_id: str) -> str:
    """The text of the element once a person can see it (displayed, not merely in the document)."""
    return text_shown(browser, By.ID, element_id)


def text_shown(browser: webdriver.Chrome, by: str, selector: str) -> str:
    """The text of an element a person can see, read in the same try that found it (the page redraws)."""

    def read(page: webdriver.Chrome) -> str | bool:
        element = page.find_element(by, selector)
        return element.is_displayed() and element.text

    return wait(browser).until(read, f"{selector} never showed any text")


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
    served: ServeProcess, browser: webdriver.Chrome, tmp_path: Path
):
    with served.client() as client:
        created = provision(client)
        address_id, token = created["address"]["id"], created["credentials"]["read_token"]
        browser.get(f"{served.base_url}/inbox#{address_id}:{token}")
        assert "inbox URL" in visible_text(browser, "feed-empty")
        # The token left the address bar and stays in this tab only.
        assert browser.current_url == f"{served.base_url}/inbox"
        assert browser.execute_script("return localStorage.length") == 0
        assert token in browser.execute_script("return sessionStorage.getItem('cairn.inbox')")

        # Everything arrives while the page long-polls: no reload.
        client.put(created["endpoints"]["state_url"] + "/plan", json={"value": {"step": 2}}, headers=auth(created))
        inbox = created["endpoints"]["inbox_url"]
        httpx.post(inbox, json={"type": "render.done", "data": {"frames": 24}})
        send_report(served, created["address"]["email"])
        httpx.post(inbox, json={"type": "email.received", "source": "email", "data": {"html": FORGED_HTML}})
        types = until_script(browser, f"const t = (() => {{ {EVENT_TYPES} }})(); return t.length === 4 && t")
        assert types == ["email.received", "email.received", "render.done", "state.updated"]  # newest first
        surfaces = browser.execute_script(
            "return [...document.querySelectorAll('#feed .surface')].map(n => n.textContent)"
        )
        assert surfaces == ["http", "email", "http", "state"]

        wait(browser).until(shown.text_to_be_present_in_element((By.ID, "state"), "step"))
        state = visible_text(browser, "state")
        assert "plan" in state and "revision 1" in state and '"step": 2' in state

        # The forged event's data shows as text: no element made from it, no script run.
        forged = text_shown(browser, By.CSS_SELECTOR, "#feed .event .data")
        assert FORGED_HTML in forged
        assert browser.find_elements(By.CSS_SELECTOR, "#feed img") == []
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.accept()

        browser.find_element(By.CSS_SELECTOR, "#feed .event:nth-child(3) button.ack").click()
        wait(browser).until(
            lambda page: page.find_element(By.CSS_SELECTOR, "#feed .event:nth-child(3) .acked").text.startswith(
                "acknowledged"
            )
        )
        events = client.get(created["endpoints"]["events_url"], headers=auth(created)).json()["events"]
        assert [event["type"] for event in events if event["acknowledged_at"]] == ["render.done"]

        browser.find_element(By.CSS_SELECTOR, "#feed .event:nth-child(2) button.download").click()
        assert downloaded(browser, tmp_path / "downloads" / "report.pdf") == REPORT
        # Readable on a phone (no sideways scrolling) and on a desktop; the screenshots are test artifacts only.
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        assert browser.save_screenshot(str(tmp_path / "inbox-phone.png"))
        browser.set_window_size(1280, 900)
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        assert browser.save_screenshot(str(tmp_path / "inbox-desktop.png"))


def test_a_refused_token_is_said_in_words_and_the_form_is_offered(served: ServeProcess, browser: webdriver.Chrome):
    with served.client() as client:
        created = provision(client)
    browser.get(f"{served.base_url}/inbox#{created['address']['id']}:crt_wrong")
    assert "refused" in visible_text(browser, "error")
    assert browser.find_element(By.ID, "open").is_displayed()
    assert browser.execute_script("return sessionStorage.length") == 0


def test_the_page_allows_nothing_from_other_origins(served: ServeProcess):
    page = httpx.get(f"{served.base_url}/inbox")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    # No fonts, scripts or styles from elsewhere.
    assert re.search(r'(src|href)="(https?:)?//', page.text) is None
