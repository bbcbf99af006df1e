"""The inbox page for people, in a real headless Chromium against `cairn serve`.

The tests look at what a person sees: whether an element is displayed, its
rendered text, whether the page fits the screen, never a property the page
set. Screenshots at phone and desktop width are kept as test artifacts in
`inbox-screenshots/` under the run's pytest base temporary directory
(`pytest-<n>`, or `--basetemp`); nothing asserts on them.
"""

from __future__ import annotations

import re
import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from importlib import resources
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.select import Select

from cairn.api.routes.viewer import FILES
from cairn.local.dynamodb_local import DynamoDBLocal
from tests.e2e.test_serve import auth, provision
from tests.support.browser import (
    chromium,
    console_errors,
    downloaded,
    screenshot,
    scrolls_sideways,
    viewport,
    wait,
)
from tests.support.relay import Relay, running_relay
from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server (the reply test adds one with a relay).
pytestmark = pytest.mark.one_server

PERSON = "ada@example.org"
QUESTION = "Hello,\nMay I pay invoice 42?\n\nAda"
REPORT = b"%PDF-1.4\n" + bytes(range(256)) * 8 + b"\n%%EOF\n"
FORGED_HTML = "<img src=x onerror=alert(1)>"
PAGE_SIZE = 20


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with chromium(downloads) as driver:
        yield driver


@pytest.fixture
def relayed(dynamodb_local: DynamoDBLocal, streamed_table: str, tmp_path: Path) -> Iterator[tuple[ServeProcess, Relay]]:
    """A `cairn serve` of its own that hands outbound mail to a real SMTP relay, and the relay."""
    with running_relay() as (relay, port):
        relaying = ["--smtp-relay", f"127.0.0.1:{port}"]
        with ServeProcess(
            tmp_path, dynamodb_endpoint=dynamodb_local.endpoint, table=streamed_table, extra_args=relaying
        ) as served:
            yield served, relay


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`inbox-screenshots/` in the run's pytest base temporary directory: artifacts, never compared."""
    return tmp_path_factory.getbasetemp() / "inbox-screenshots"


def open_address(browser: webdriver.Chrome, served: ServeProcess, created: dict) -> None:
    browser.get(f"{served.base_url}/inbox#{created['address']['id']}:{created['credentials']['read_token']}")
    shown(browser, "#events-section")


def shown(browser: webdriver.Chrome, css: str) -> WebElement:
    """The first element matching `css` once a person can see it."""
    return wait(browser).until(
        lambda page: next((found for found in page.find_elements(By.CSS_SELECTOR, css) if found.is_displayed()), None),
        f"nothing shown matches {css}",
    )


def texts(browser: webdriver.Chrome, css: str) -> list[str]:
    """The rendered text of every displayed element matching `css`, read in one go (the page redraws)."""
    return [found.text for found in browser.find_elements(By.CSS_SELECTOR, css) if found.is_displayed()]


def until_texts(browser: webdriver.Chrome, css: str, check, message: str) -> list[str]:
    return wait(browser).until(lambda page: (found := texts(page, css)) and check(found) and found, message)


def lines(browser: webdriver.Chrome, count: int, part: str = "") -> list[str]:
    """The event lines shown (or one `part` of each, such as `.what`), once there are `count` of them."""
    return until_texts(browser, f"#events .line {part}", lambda found: len(found) == count, f"never {count} lines")


def focused_line(browser: webdriver.Chrome) -> str:
    """What the event line holding the keyboard's focus is about."""
    return browser.switch_to.active_element.find_element(By.CSS_SELECTOR, ".what").text


def field(browser: webdriver.Chrome, name: str) -> str:
    """A mail header as shown in the open mail's list of fields."""
    names = texts(browser, ".mail .fields dt")
    return texts(browser, ".mail .fields dd")[names.index(name)]


def send_mail(served: ServeProcess, to: str, subject: str, **parts) -> str:
    """Mail `to` through `cairn serve`'s SMTP listener; returns its Message-ID."""
    message = EmailMessage()
    message["From"] = parts.get("sender", f"Ada Lovelace <{PERSON}>")
    message["To"] = to
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain="example.org")
    for header in ("In-Reply-To", "References"):
        if header in parts:
            message[header] = parts[header]
    if "html" in parts:
        message.set_content(parts["html"], subtype="html")
    else:
        message.set_content(parts.get("text", "Hello."))
    for name, data in parts.get("attachments", []):
        message.add_attachment(data, maintype="application", subtype="pdf", filename=name)
    with smtplib.SMTP("127.0.0.1", served.smtp_port, timeout=10) as smtp:
        assert smtp.send_message(message) == {}
    return message["Message-ID"]


def post(created: dict, **event) -> None:
    assert httpx.post(created["endpoints"]["inbox_url"], json=event).status_code == 202


def no_markup_made(browser: webdriver.Chrome) -> None:
    """Strangers' HTML made no element and ran no script."""
    assert browser.find_elements(By.CSS_SELECTOR, "main img, main svg, main script, main b, main iframe") == []
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.accept()


def test_a_person_reads_mail_as_mail_and_answers_its_sender(
    relayed: tuple[ServeProcess, Relay], browser: webdriver.Chrome, tmp_path: Path, screenshots: Path
):
    served, relay = relayed
    with served.client() as client:
        created = provision(client)
    question = send_mail(
        served,
        created["address"]["email"],
        "May I pay invoice 42?",
        text=QUESTION,
        attachments=[("report.pdf", REPORT)],
    )
    open_address(browser, served, created)
    # Once an address is open, the form that opens one is gone from the screen.
    assert not browser.find_element(By.ID, "open").is_displayed()
    [line] = lines(browser, 1)
    assert f"Ada Lovelace <{PERSON}> — May I pay invoice 42?" in line and "not acknowledged" in line

    shown(browser, "#events .line").click()
    assert shown(browser, "#detail-heading").text == "May I pay invoice 42?"
    assert not browser.find_element(By.ID, "events-section").is_displayed()
    assert field(browser, "From") == f"Ada Lovelace <{PERSON}>"
    assert field(browser, "To") == created["address"]["email"]
    assert field(browser, "Date")
    # The body as written, line breaks and the blank line included.
    assert shown(browser, ".mail-body").text.splitlines() == QUESTION.splitlines()
    # `cairn serve`'s SMTP listener checks nothing; SES's verdicts would show here.
    assert texts(browser, ".badges .verdict") == ["SPF not checked", "DKIM not checked", "DMARC not checked"]
    assert texts(browser, ".attachments li") == ["report.pdf\n2.1 kB · application/pdf"]
    shown(browser, ".attachments button.download").click()
    assert downloaded(browser, tmp_path / "downloads" / "report.pdf") == REPORT

    # Ada is not a contact yet: the page offers her a code, then the reply once she confirms it.
    assert browser.find_elements(By.ID, "reply-text") == []
    shown(browser, ".reply button.verify").click()
    relay.wait_for(1)
    shown(browser, ".reply .code-form input").send_keys(relay.last_code() + Keys.ENTER)
    shown(browser, "#reply-text").send_keys("Yes, pay it.\nThank you.")
    shown(browser, ".reply-form button[type=submit]").click()
    answer = relay.wait_for(2)
    assert (answer["To"], answer["In-Reply-To"]) == (PERSON, question)
    assert answer["Subject"] == "Re: May I pay invoice 42?"
    assert answer.get_content().splitlines() == ["Yes, pay it.", "Thank you."]
    assert until_texts(browser, ".reply .status", lambda found: found == [f"Sent to {PERSON}."], "no word of the send")

    # Her answer to the reply joins the same conversation, through In-Reply-To and References.
    send_mail(
        served,
        created["address"]["email"],
        "Re: Re: May I pay invoice 42?",
        text="Paid.",
        **{"In-Reply-To": answer["Message-ID"], "References": f"{question} {answer['Message-ID']}"},
    )
    thread = until_texts(browser, ".thread li", lambda found: len(found) == 3, "the conversation never had 3 mails")
    assert thread[0].startswith(f"from Ada Lovelace <{PERSON}> — May I pay invoice 42?")
    assert thread[1].startswith(f"to {PERSON} — Re: May I pay invoice 42?")
    assert thread[2].startswith(f"from Ada Lovelace <{PERSON}> — Re: Re: May I pay invoice 42?")

    viewport(browser, 360, 780, phone=True)
    assert not scrolls_sideways(browser)
    screenshot(browser, screenshots / "mail-phone.png")
    viewport(browser, 1280, 900, phone=False)
    assert not scrolls_sideways(browser)
    screenshot(browser, screenshots / "mail-desktop.png")
    assert console_errors(browser) == []


def test_filters_narrow_the_list_and_long_feeds_page(served: ServeProcess, browser: webdriver.Chrome):
    with served.client() as client:
        created = provision(client)
        # n = 0..23: every third a deploy, odd ones from "ci"; 3 and 9 already handled.
        for n in range(24):
            post(
                created,
                type="deploy.finished" if n % 3 == 0 else "build.finished",
                source="ci" if n % 2 else "cd",
                data={"n": n},
            )
        events = client.get(created["endpoints"]["events_url"], headers=auth(created)).json()["events"]
        for event in events:
            if event["data"]["n"] in (3, 9):
                client.post(f"{created['endpoints']['events_url']}/{event['id']}/ack", headers=auth(created))
    open_address(browser, served, created)

    # Newest first, one line each: type, time, who/what, source, acknowledged or not.
    assert lines(browser, PAGE_SIZE, ".what") == [f'{{"n":{n}}}' for n in range(23, 3, -1)]
    top = texts(browser, "#events .line")[0].splitlines()
    assert top[0] == "build.finished" and events[0]["created_at"][:4] in top[1]
    assert top[2:] == ['{"n":23}', "ci", "via http", "not acknowledged"]
    assert shown(browser, "#page-status").text == "1–20 of 24"
    assert not browser.find_element(By.ID, "newer").is_enabled()

    browser.find_element(By.ID, "older").click()
    assert lines(browser, 4, ".what") == ['{"n":3}', '{"n":2}', '{"n":1}', '{"n":0}']
    assert shown(browser, "#page-status").text == "21–24 of 24"

    Select(browser.find_element(By.ID, "filter-type")).select_by_visible_text("deploy.finished")
    assert set(lines(browser, 8, ".type")) == {"deploy.finished"}
    assert not browser.find_element(By.ID, "pager").is_displayed()
    Select(browser.find_element(By.ID, "filter-source")).select_by_visible_text("ci")
    assert lines(browser, 4, ".what") == ['{"n":21}', '{"n":15}', '{"n":9}', '{"n":3}']
    browser.find_element(By.ID, "filter-unacked").click()
    assert lines(browser, 2, ".what") == ['{"n":21}', '{"n":15}']

    # Acknowledged from its detail view, an event leaves the unacknowledged list.
    shown(browser, "#events .line").click()
    shown(browser, "#detail-actions button.ack").click()
    assert shown(browser, "#detail-actions .acked").text.startswith("acknowledged")
    browser.find_element(By.ID, "back").click()
    assert lines(browser, 1, ".what") == ['{"n":15}']
    with served.client() as client:
        events = client.get(created["endpoints"]["events_url"], headers=auth(created)).json()["events"]
    assert sorted(event["data"]["n"] for event in events if event["acknowledged_at"]) == [3, 9, 21]

    browser.find_element(By.ID, "filter-unacked").click()
    Select(browser.find_element(By.ID, "filter-type")).select_by_visible_text("All types")
    Select(browser.find_element(By.ID, "filter-source")).select_by_visible_text("All sources")
    lines(browser, PAGE_SIZE)
    assert shown(browser, "#page-status").text == "1–20 of 24"


def test_a_state_edit_applies_only_to_the_revision_read_and_a_conflict_shows_both(
    served: ServeProcess, browser: webdriver.Chrome, screenshots: Path
):
    with served.client() as client:
        created = provision(client)
        key_url = created["endpoints"]["state_url"] + "/plan"
        client.put(key_url, json={"value": {"step": 1}}, headers=auth(created))
        open_address(browser, served, created)
        [listed] = client.get(created["endpoints"]["state_url"], headers=auth(created)).json()["keys"]
        key = until_texts(browser, "#state-keys .key-line", lambda found: "revision 1" in found[0], "no key shown")
        assert key[0].startswith(f"plan\nrevision 1 · {listed['size']} bytes · ")
        shown(browser, "#state-keys .key-line").click()
        assert shown(browser, "#state-view pre.value").text == '{\n  "step": 1\n}'
        shown(browser, "#state-view button.edit").click()

        # Someone else writes while the person edits.
        moved = client.put(key_url, json={"value": {"step": 2, "by": "agent"}, "if_revision": 1}, headers=auth(created))
        assert moved.json()["revision"] == 2
        editor = shown(browser, "#state-view textarea")
        editor.clear()
        editor.send_keys('{"step": 3}')
        shown(browser, "#state-view button[type=submit]").click()
        mine = shown(browser, ".conflict .yours pre").text
        theirs = shown(browser, ".conflict .theirs").text
        assert mine == '{"step": 3}'
        assert theirs.startswith("Stored now, revision 2") and '"by": "agent"' in theirs
        kept = client.get(key_url, headers=auth(created)).json()
        assert (kept["revision"], kept["value"]) == (2, {"step": 2, "by": "agent"})
        for name, width, phone in (("phone", 360, True), ("desktop", 1280, False)):
            viewport(browser, width, 900, phone=phone)
            assert not scrolls_sideways(browser)
            screenshot(browser, screenshots / f"state-conflict-{name}.png")

        # Chosen knowingly, the person's value goes over the revision now shown.
        browser.find_element(By.XPATH, "//button[starts-with(., 'Edit mine again')]").click()
        shown(browser, "#state-view button[type=submit]").click()
        until_texts(browser, "#state-view .muted", lambda found: found[0].startswith("revision 3"), "never revision 3")
        assert shown(browser, "#state-view pre.value").text == '{\n  "step": 3\n}'
        saved = client.get(key_url, headers=auth(created)).json()
        assert (saved["revision"], saved["value"]) == (3, {"step": 3})


def test_hostile_strings_stay_text(served: ServeProcess, browser: webdriver.Chrome):
    with served.client() as client:
        created = provision(client)
    send_mail(
        served,
        created["address"]["email"],
        FORGED_HTML,
        sender='"<b>Boss</b>" <boss@example.org>',
        html=f"<p>Hi &amp; welcome &lt;i&gt;</p><script>alert(2)</script>{FORGED_HTML}<b>bold</b>",
        attachments=[(f"{FORGED_HTML}.pdf", REPORT)],
    )
    post(created, type="<svg onload=alert(3)>", source="<b>src</b>", data={"html": FORGED_HTML})
    post(created, type="email.received", source="email", data={"from": PERSON, "subject": "Forged"})
    open_address(browser, served, created)
    assert lines(browser, 3, ".type")[1] == "<svg onload=alert(3)>"
    assert texts(browser, "#events .line .source")[1] == "<b>src</b>"
    assert "<svg onload=alert(3)>" in texts(browser, "#filter-type")[0]

    browser.find_elements(By.CSS_SELECTOR, "#events .line")[2].click()
    assert shown(browser, "#detail-heading").text == FORGED_HTML
    assert field(browser, "From") == '"<b>Boss</b>" <boss@example.org>'
    # An HTML-only mail is shown as its text, never as markup.
    assert shown(browser, ".mail-body").text.splitlines() == ["Hi & welcome <i>", "bold"]
    assert texts(browser, ".attachments button.download") == [f"{FORGED_HTML}.pdf"]
    no_markup_made(browser)

    browser.find_element(By.ID, "back").click()
    browser.find_elements(By.CSS_SELECTOR, "#events .line")[0].click()
    # Mail-shaped data posted to the inbox URL is not shown as mail: anyone holding the URL wrote it.
    assert "not received as mail" in shown(browser, "#detail-body .note").text
    assert browser.find_elements(By.CSS_SELECTOR, ".mail") == []
    browser.find_element(By.ID, "back").click()
    browser.find_elements(By.CSS_SELECTOR, "#events .line")[1].click()
    assert FORGED_HTML in shown(browser, "#detail-body pre.data").text
    no_markup_made(browser)
    assert console_errors(browser) == []


def test_the_keyboard_alone_reads_an_event_and_returns_to_the_list(served: ServeProcess, browser: webdriver.Chrome):
    with served.client() as client:
        created = provision(client)
    for n in range(3):
        post(created, type="step.done", data={"n": n})
    open_address(browser, served, created)
    lines(browser, 3)
    keys = ActionChains(browser)
    # Tab from the top of the page to the newest line, past the header's button and the filters.
    for _ in range(10):
        if browser.switch_to.active_element.get_attribute("class") == "line":
            break
        keys.send_keys(Keys.TAB).perform()
    assert focused_line(browser) == '{"n":2}'
    keys.send_keys(Keys.ARROW_DOWN).perform()
    assert focused_line(browser) == '{"n":1}'
    keys.send_keys(Keys.ENTER).perform()
    assert shown(browser, "#detail-heading").text == '{"n":1}'
    assert browser.switch_to.active_element == browser.find_element(By.ID, "detail-heading")
    assert not browser.find_element(By.ID, "events-section").is_displayed()
    keys.send_keys(Keys.ESCAPE).perform()
    shown(browser, "#events .line")
    assert focused_line(browser) == '{"n":1}'


def test_a_phone_width_needs_no_sideways_scrolling(served: ServeProcess, browser: webdriver.Chrome, screenshots: Path):
    """360 CSS pixels, long unbroken strings everywhere a stranger can put one."""
    endless = "x" * 250  # labels may be 256 characters long
    with served.client() as client:
        created = provision(client)
        key = endless[:128]  # the longest key there may be
        written = client.put(
            f"{created['endpoints']['state_url']}/{key}", json={"value": endless}, headers=auth(created)
        )
        assert written.status_code == 201
    send_mail(served, created["address"]["email"], endless, text=endless, attachments=[(endless + ".pdf", REPORT)])
    post(created, type="t" + endless, source="s" + endless, data={endless: endless})
    viewport(browser, 360, 780, phone=True)
    open_address(browser, served, created)
    lines(browser, 3)
    shown(browser, "#state-keys .key-line").click()
    shown(browser, "#state-view pre.value")
    assert not scrolls_sideways(browser)
    screenshot(browser, screenshots / "list-phone.png")
    for index in range(3):  # the posted event, the mail, the state change
        browser.find_elements(By.CSS_SELECTOR, "#events .line")[index].click()
        shown(browser, "#detail-body")
        assert not scrolls_sideways(browser)
        browser.find_element(By.ID, "back").click()
        lines(browser, 3)
    viewport(browser, 1280, 900, phone=False)
    assert not scrolls_sideways(browser)
    screenshot(browser, screenshots / "list-desktop.png")


def test_the_form_opens_an_address_and_the_token_stays_in_the_tab(served: ServeProcess, browser: webdriver.Chrome):
    with served.client() as client:
        created = provision(client)
    address_id, token = created["address"]["id"], created["credentials"]["read_token"]
    browser.get(f"{served.base_url}/inbox")
    shown(browser, "#address-id").send_keys(address_id)
    browser.find_element(By.ID, "read-token").send_keys(token + Keys.ENTER)
    assert "inbox URL" in shown(browser, "#events-empty").text
    assert not browser.find_element(By.ID, "open").is_displayed()
    # The address's email, to hand to whoever should write to it.
    until_texts(browser, "#who", lambda found: created["address"]["email"] in found[0], "the email is not shown")
    assert browser.current_url == f"{served.base_url}/inbox"
    assert browser.execute_script("return localStorage.length") == 0
    assert token in browser.execute_script("return sessionStorage.getItem('cairn.inbox')")
    # Every request the page made: the token is in none of their URLs.
    requested = browser.execute_script("return performance.getEntriesByType('resource').map(entry => entry.name)")
    assert any("/events?" in url for url in requested) and not any(token in url for url in requested)


def test_the_page_with_a_trailing_slash_is_the_page(served: ServeProcess, browser: webdriver.Chrome):
    """`/inbox/` was answered with the page, whose relative module URLs then pointed under it: a blank page."""
    browser.get(f"{served.base_url}/inbox/")
    shown(browser, "#address-id")
    assert browser.current_url == f"{served.base_url}/inbox"


def test_a_fragment_that_does_not_decode_offers_the_form(served: ServeProcess, browser: webdriver.Chrome):
    """`#%E0%A4%A` is no percent-encoding: the page opened nothing at all when it threw on it."""
    browser.get(f"{served.base_url}/inbox")
    browser.execute_script("sessionStorage.clear()")
    browser.get("about:blank")
    browser.get(f"{served.base_url}/inbox#%E0%A4%A")
    assert shown(browser, "#open").is_displayed()


def test_a_refused_token_is_said_in_words_and_the_form_is_offered(served: ServeProcess, browser: webdriver.Chrome):
    with served.client() as client:
        created = provision(client)
    browser.get(f"{served.base_url}/inbox#{created['address']['id']}:crt_wrong")
    assert "refused" in shown(browser, "#error").text
    assert shown(browser, "#open").is_displayed()
    assert not browser.find_element(By.ID, "events-section").is_displayed()
    assert browser.execute_script("return sessionStorage.length") == 0


def test_the_page_allows_nothing_from_other_origins(served: ServeProcess):
    page = httpx.get(f"{served.base_url}/inbox")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    # No fonts, scripts or styles from elsewhere.
    assert re.search(r'(src|href)="(https?:)?//', page.text) is None
    # Every module and style sheet of the page is served, under the same policy; no file is left out.
    static = resources.files("cairn.api").joinpath("static", "viewer")
    assert sorted(name for name, _ in FILES.values()) == sorted(item.name for item in static.iterdir())
    for path in FILES:
        served_file = httpx.get(served.base_url + path)
        assert served_file.status_code == 200 and served_file.headers["content-security-policy"] == policy
        assert not re.search(r"""(from|import)\s*\(?\s*["'](https?:)?//""", served_file.text)
