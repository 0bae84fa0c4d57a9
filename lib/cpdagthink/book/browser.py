"""Headless Chromium driven over the DevTools protocol, for the explorer's browser test, the chapter
screenshots and the book's PDF.

The browser is Debian's ``chromium`` (``scripts/install-system-packages.sh book``); nothing is downloaded.
It is started with ``--remote-debugging-pipe``: the protocol's JSON messages travel over file descriptors 3
(to the browser) and 4 (from it), each ended by a NUL byte, so no port, websocket or client library is needed.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import CpdagthinkError

# Without the networking flags the browser tries Google's hosts at every start, which this machine refuses.
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
]


# The PDF's page (A4) and margins, in inches; a CSS pixel is 1/96 inch.
PAPER = (8.27, 11.69)
MARGINS = {"marginTop": 0.5, "marginBottom": 0.5, "marginLeft": 0.4, "marginRight": 0.4}
PRINT_AREA = (round((PAPER[0] - MARGINS["marginLeft"] - MARGINS["marginRight"]) * 96),
              round((PAPER[1] - MARGINS["marginTop"] - MARGINS["marginBottom"]) * 96))  # CSS pixels


class BrowserError(CpdagthinkError, RuntimeError):
    """Chromium is missing, died, or answered a command with an error."""


def find_chromium() -> str | None:
    """The Chromium executable: ``$CHROMIUM`` if set, else ``chromium`` or ``chromium-browser`` on PATH."""
    named = os.environ.get("CHROMIUM")
    if named:
        return named if shutil.which(named) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are numbered 10 or above (close-on-exec), so moving them onto 3 and 4 in the
    child cannot overwrite one with the other."""
    ends = []
    for fd in os.pipe():
        ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    return ends[0], ends[1]


class Browser:
    """One headless Chromium with one page. Use as a context manager; the browser ends on exit.

    ``width`` and ``height`` are the viewport in CSS pixels; ``timeout`` bounds every command (seconds).
    ``scripts=False``: no script of a page runs (Chromium's ``Emulation.setScriptExecutionDisabled``: no
    ``<script>``, event handler or ``javascript:`` URL), while :meth:`evaluate` still does, for what is printed.
    """

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 60.0, scripts: bool = True):
        executable = find_chromium()
        if executable is None:
            raise BrowserError("Chromium not found: run scripts/install-system-packages.sh book "
                               "(Debian's `chromium` package)")
        self.timeout = timeout
        self.width, self.height = width, height
        self._profile = tempfile.TemporaryDirectory(prefix="cpdagthink-chromium-")
        to_browser_read, self._to_browser = _high_pipe()
        self._from_browser, from_browser_write = _high_pipe()

        def _wire() -> None:  # in the child: the browser expects the pipe ends as fds 3 and 4
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        # close_fds=False keeps the dup2'd fds 3 and 4 (not close-on-exec); every fd Python opened is
        # close-on-exec (PEP 446), so nothing else leaks into the browser.
        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=_wire,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        try:
            target = self._command("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self._command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.send("Page.enable")
            self.send("Runtime.enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
            if not scripts:
                self.send("Emulation.setScriptExecutionDisabled", {"value": True})
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------------------------- the protocol

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError("Chromium did not answer in time")
            if self._process.poll() is not None:
                raise BrowserError(f"Chromium exited with code {self._process.returncode}")
            ready, _, _ = select.select([self._from_browser], [], [], 0.2)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium closed the DevTools pipe")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _command(self, method: str, params: dict | None = None, session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self._to_browser, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            if "method" in message:
                self._events.append(message)

    def send(self, method: str, params: dict | None = None) -> dict[str, Any]:
        """One DevTools command on the page (e.g. ``Page.navigate``); its result."""
        return self._command(method, params, self._session)

    def _wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == self._session:
                    return self._events.pop(i)
            self._events.append(self._read_message(deadline))

    # ----------------------------------------------------------------------------------- page actions

    def open(self, url_or_path: str | Path) -> None:
        """Load a URL or a local file and wait for its load event."""
        url = Path(url_or_path).resolve().as_uri() if isinstance(url_or_path, Path) else url_or_path
        self._events.clear()
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        self._wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """Run JavaScript in the page; its value (JSON-serialisable). A thrown error raises BrowserError."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"JavaScript error: {details.get('exception', {}).get('description', details)}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = True, max_height: int = 20000) -> Path:
        """A PNG of the viewport, or of the whole page (capped at ``max_height`` CSS pixels)."""
        if not full_page:
            data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        else:
            # The viewport grows to the page's height for the shot (a clip beyond the viewport lets wide
            # pages scroll sideways), then goes back.
            viewport = self.send("Page.getLayoutMetrics")["cssLayoutViewport"]
            height = min(int(self.evaluate("document.documentElement.scrollHeight")), max_height)
            self.send("Emulation.setDeviceMetricsOverride", {"width": viewport["clientWidth"], "height": height,
                                                             "deviceScaleFactor": 1, "mobile": False})
            try:
                data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
            finally:
                self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                                 "deviceScaleFactor": 1, "mobile": False})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def emulate_print(self) -> None:
        """Lay the page out as :meth:`pdf` prints it: print media, and a viewport as wide as the printed area
        (:data:`PRINT_AREA`), so that what a script measures is what the PDF shows."""
        self.send("Emulation.setEmulatedMedia", {"media": "print"})
        self.send("Emulation.setDeviceMetricsOverride", {"width": PRINT_AREA[0], "height": PRINT_AREA[1],
                                                         "deviceScaleFactor": 1, "mobile": False})

    def pdf(self, path: Path) -> Path:
        """The loaded page printed to PDF (A4, :data:`MARGINS`, backgrounds on)."""
        data = self.send("Page.printToPDF", {"printBackground": True, "paperWidth": PAPER[0],
                                             "paperHeight": PAPER[1], **MARGINS})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    # ------------------------------------------------------------------------------------------ ending

    def close(self) -> None:
        """End the browser and remove its profile."""
        if self._process.poll() is None:
            try:
                os.write(self._to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                self._process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
