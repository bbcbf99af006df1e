"""Headless Chromium for the page tests, driven with Selenium.

The system's Chromium and chromedriver (Debian's `chromium` and
`chromium-driver`) are named by path, so Selenium Manager never looks for, or
downloads, a browser or a driver. `make test` installs them when missing (as
it does Java), and so does `ensure_chromium` for a pytest run started on its own.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.wait import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# How long a page may take to show what a test waits for: a deadline, never a measure.
PATIENCE_SECONDS = 15
# Selenium picks chromedriver's port free, but another process (a test's server, a client's connection)
# may take it before chromedriver binds it: chromedriver then ends saying so, and is started again.
PORT_TAKEN = "Address already in use"
DRIVER_ATTEMPTS = 3


def ensure_chromium() -> None:
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        subprocess.run(["make", "-s", "chromium"], cwd=REPO, check=True)


@contextmanager
def chromium(downloads: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium the size of a phone (420 × 900) whose downloads land in `downloads`."""
    ensure_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=420,900"):
        options.add_argument(argument)
    # The console, so a test can see what the page reported (a CSP refusal, a script error).
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    # Without /dev/shm (`--disable-dev-shm-usage`) Chromium keeps its shared memory in files under TMPDIR,
    # and some outlive the browser: a folder of its own, removed after it (a short path, as its sockets
    # need), keeps them out of the machine's /tmp.
    with tempfile.TemporaryDirectory(prefix="chromium-") as scratch:
        driver = _started(options, Path(scratch))
        try:
            driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
            yield driver
        finally:
            driver.quit()


def _started(options: webdriver.ChromeOptions, scratch: Path) -> webdriver.Chrome:
    """Chromium under a chromedriver that listens, started again on another port if its port was taken."""
    attempt = 1
    while True:
        log = scratch / f"chromedriver-{attempt}.log"
        service = Service(str(CHROMEDRIVER), log_output=str(log), env={**os.environ, "TMPDIR": str(scratch)})
        try:
            return webdriver.Chrome(service=service, options=options)
        except WebDriverException as error:
            said = log.read_text(errors="replace") if log.exists() else ""
            if PORT_TAKEN not in said or attempt == DRIVER_ATTEMPTS:
                raise WebDriverException(f"{error.msg}; chromedriver said: {said[-2000:]}") from error
        attempt += 1


def wait(driver: webdriver.Chrome) -> WebDriverWait[webdriver.Chrome]:
    # The page redraws its lists as events arrive: an element found a moment ago may be gone, and
    # the condition is simply tried again on the new one.
    return WebDriverWait(driver, PATIENCE_SECONDS, ignored_exceptions=(StaleElementReferenceException,))


def until_script(driver: webdriver.Chrome, source: str, *args: Any) -> Any:
    """What `source` returns once it returns something truthy."""
    return wait(driver).until(lambda page: page.execute_script(source, *args), f"never true: {source}")


def downloaded(driver: webdriver.Chrome, path: Path) -> bytes:
    """The bytes of a finished download (Chromium gives it its name only once it is complete)."""
    wait(driver).until(lambda _: path.is_file() and path.stat().st_size > 0, f"{path.name} was not downloaded")
    return path.read_bytes()


def viewport(driver: webdriver.Chrome, width: int, height: int, *, phone: bool) -> None:
    """Lay the page out at `width` × `height` CSS pixels, as a phone (touch, meta viewport) or a desktop."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": phone}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def screenshot(driver: webdriver.Chrome, path: Path) -> Path:
    """The whole page, beyond the viewport too, as a PNG at `path`."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def scrolls_sideways(driver: webdriver.Chrome) -> bool:
    """Whether a person would have to scroll sideways to see all of the page."""
    return bool(driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth"))


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """What the page logged as errors since the last call: script errors, CSP refusals, failed loads."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
