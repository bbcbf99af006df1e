"""Headless Chromium driven over W3C WebDriver (chromedriver), spoken with httpx.

The system's Chromium and chromedriver are used; `make test` installs them
when missing (as it does Java), and so does `ensure_chromium` for a pytest run
started on its own.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from cairn.local.dynamodb_local import free_port

REPO = Path(__file__).resolve().parents[2]
# The element reference key W3C WebDriver answers with.
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def ensure_chromium() -> None:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        subprocess.run(["make", "-s", "chromium"], cwd=REPO, check=True)


class Browser:
    """One headless Chromium session; downloads land in `downloads`."""

    def __init__(self, downloads: Path) -> None:
        ensure_chromium()
        self.downloads = downloads
        port = free_port()
        self._driver = subprocess.Popen(
            ["chromedriver", f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        deadline = time.monotonic() + 20
        while True:
            try:
                if self._http.get("/status").json()["value"]["ready"]:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.1)
        options = {
            "binary": shutil.which("chromium"),
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=420,900"],
            "prefs": {"download.default_directory": str(downloads), "download.prompt_for_download": False},
        }
        capabilities = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
        session = self._http.post("/session", json={"capabilities": capabilities}).json()["value"]
        self._session = f"/session/{session['sessionId']}"
        behavior = {"behavior": "allow", "downloadPath": str(downloads)}
        self.command("goog/cdp/execute", {"cmd": "Browser.setDownloadBehavior", "params": behavior})

    def command(self, path: str, body: dict[str, Any] | None = None, method: str = "POST") -> Any:
        reply = self._http.request(method, f"{self._session}/{path}", json=body if method == "POST" else None)
        value = reply.json()["value"]
        if reply.status_code >= 400:
            raise WebDriverError(value.get("error", ""), value.get("message", ""))
        return value

    def open(self, url: str) -> None:
        self.command("url", {"url": url})

    def script(self, source: str, *args: Any) -> Any:
        return self.command("execute/sync", {"script": source, "args": list(args)})

    def wait_for(self, source: str, *args: Any, timeout: float = 15) -> Any:
        """Run `source` until it returns something truthy; that value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.script(source, *args)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"never true: {source}")

    def click(self, selector: str) -> None:
        found = self.command("element", {"using": "css selector", "value": selector})
        self.command(f"element/{found[ELEMENT]}/click", {})

    def downloaded(self, name: str, timeout: float = 15) -> bytes:
        """The bytes of a finished download."""
        path = self.downloads / name
        deadline = time.monotonic() + timeout
        while not (path.exists() and path.stat().st_size):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} was not downloaded")
            time.sleep(0.1)
        return path.read_bytes()

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.command("screenshot", method="GET")))

    def alert_text(self) -> str | None:
        try:
            return self.command("alert/text", method="GET")
        except WebDriverError as error:
            if error.code == "no such alert":
                return None
            raise

    def close(self) -> None:
        try:
            self._http.delete(self._session)
        finally:
            self._http.close()
            self._driver.terminate()
            self._driver.wait(10)


class WebDriverError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
