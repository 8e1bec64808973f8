"""The HTML report as a browser shows it: opened from disk in headless Chromium, offline.

Why a real browser: escaping bugs, a CSP that blocks our own styles, or a chart with zero size
only show up when a browser parses and lays out the page; string checks on the HTML miss them.

How: one Chromium per module, driven over the DevTools protocol through
--remote-debugging-pipe (NUL-terminated JSON on fds 3 and 4), so the standard library is
enough. The checks read the browser's own events rather than scraping its logs, which change
wording between versions and mix in unrelated noise (dbus, GPU):
- network: Network.requestWillBeSent for every request the page makes (only the report's own
  file:// URL is allowed); the network is also cut off (host names resolve to nothing, the proxy
  is a closed port, background networking is off), so a leak could not reach anything anyway;
- console errors: Runtime.consoleAPICalled (error/assert), Runtime.exceptionThrown,
  Log.entryAdded at error level (CSP violations and failed loads are reported there) and
  Network.loadingFailed;
- scripts that ran: Page.javascriptDialogOpening (alert/confirm/prompt; dismissed at once so the
  page never blocks). The report's CSP admits its one packaged script by hash and no other, and
  a blocked script is a CSP error.
`test_harness_detects_requests_errors_and_dialogs` proves each detector fires on a page built
to trip it, so a silent detector cannot make the report tests pass.
The DOM is read after the load with Runtime.evaluate (DevTools evaluation is not subject to
the page's CSP); the test opens every <details> as a reader would click it before measuring.
Screenshots are kept under tests/artifacts/ (gitignored) and decoded with zlib/struct.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import DEMO, FIXTURE_DIR, ROOT

from advisor.cli import main
from advisor.render.format import findings_by_rank
from advisor.render.html import _script

ARTIFACTS = ROOT / "tests/artifacts"
CHROMIUM = shutil.which("chromium")
TIMEOUT_S = 30.0
VIEWPORT = (1280, 900)
STEP_BLUE = (0x4C, 0x78, 0xA8)  # "Computing" in the step chart (advisor/render/html.py)
HOSTILE = (
    "<script>alert(1)</script>",
    '"onmouseover="alert(1)',
    "</style><b>x</b>",
    "javascript:alert(1)",
)
HOSTILE_FOLDER = 'PROF_000001_20260105100000000_<img src=x onerror="alert(1)">'

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="headless Chromium not found: install Debian's chromium "
        "(apt-get install chromium) to run the browser tests",
    ),
]

# Everything the tests read from the page, in one round trip.
DOM_SUMMARY = """(() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const visible = el => {
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'
      && Number(s.opacity) > 0;
  };
  const box = el => { const r = el.getBoundingClientRect();
    return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; };
  const all = [...document.querySelectorAll('*')];
  return {
    titles: [...document.querySelectorAll('article.finding h4')]
      .map(h => ({text: h.textContent, visible: visible(h)})),
    evidence: [...document.querySelectorAll('table.evidence')].map(t => ({
      visible: visible(t),
      rows: [...t.tBodies[0].rows].map(r => ({visible: visible(r),
                                              cells: [...r.cells].map(c => c.textContent)}))})),
    charts: [...document.querySelectorAll('svg')].map(s => ({
      cls: s.getAttribute('class'), viewBox: s.getAttribute('viewBox'), box: box(s),
      visible: visible(s),
      bars: [...s.querySelectorAll('rect')].filter(r =>
        Number(r.getAttribute('width')) > 0 && Number(r.getAttribute('height')) > 0).length})),
    tags: [...new Set(all.map(e => e.localName))],
    scripts: [...document.scripts].map(s => s.textContent),
    handlers: all.flatMap(e => [...e.attributes].filter(a => a.name.startsWith('on'))
      .map(a => e.localName + ' ' + a.name)),
    urls: all.flatMap(e => [...e.attributes]
      .filter(a => ['href', 'src', 'xlink:href', 'action', 'formaction'].includes(a.name))
      .map(a => a.value)),
    styleSheets: document.styleSheets.length,
    timeline: [...document.querySelectorAll('svg.timeline')].map(s => ({
      box: box(s), visible: visible(s),
      lanes: [...s.querySelectorAll('g.lane')].map(g => ({
        lane: g.getAttribute('data-lane'), label: box(g.querySelector('text')),
        drawn: [...g.querySelectorAll('rect')].filter(r =>
          r.getBoundingClientRect().width > 0 && r.getBoundingClientRect().height > 0).length})),
      markers: [...s.querySelectorAll('a.marker')].map(a => ({
        n: Number(a.getAttribute('data-finding')), box: box(a.querySelector('circle')),
        target: document.getElementById(a.getAttribute('href').slice(1)) !== null}))})),
    traceLinks: [...document.querySelectorAll('a.trace-link')].map(a => a.getAttribute('href')),
    text: document.body.textContent,
  };
})()"""


class Browser:
    """Headless Chromium spoken to over the DevTools pipe; one page (target) per load()."""

    def __init__(self, workdir: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        args = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--remote-debugging-pipe",
            f"--user-data-dir={workdir / 'profile'}",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=http://127.0.0.1:9",
            "--disable-background-networking",
            "--disable-extensions",
            "--disable-component-update",
            "--disable-sync",
            "--disable-gpu",
            "--hide-scrollbars",
            "about:blank",
        ]
        self._log = (workdir / "chromium.log").open("wb")
        # The pipe must be fds 3 and 4 in Chromium; bash (dash cannot name fds above 9) maps
        # them without a preexec_fn.
        redirect = f"3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-"
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$@" {redirect}', "bash", *args],
            pass_fds=(to_chrome_r, from_chrome_w),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: dict[str, list[dict]] = {}

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send a command and return its result; raise on a protocol error."""
        self._next_id += 1
        ident = self._next_id
        self._post(
            {
                "id": ident,
                "method": method,
                "params": params or {},
                **({"sessionId": session} if session else {}),
            }
        )
        reply = self._wait(lambda m: m.get("id") == ident)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def _post(self, message: dict) -> None:
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")

    def _wait(self, done: Any) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self._event(message)
                if done(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            if select.select([self._from_chrome], [], [], left)[0]:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise EOFError("Chromium closed the DevTools pipe")
                self._buffer += chunk

    def _event(self, message: dict) -> None:
        session = message.get("sessionId", "")
        self.events.setdefault(session, []).append(message)
        if message["method"] == "Page.javascriptDialogOpening":
            # Dismiss without waiting for the reply, so a dialog never blocks the page.
            self._next_id += 1
            self._post(
                {
                    "id": self._next_id,
                    "method": "Page.handleJavaScriptDialog",
                    "params": {"accept": False},
                    "sessionId": session,
                }
            )

    def load(self, path: Path) -> Page:
        """Open `path` in a fresh tab, wait for its load event, and return the tab."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        width, height = VIEWPORT
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        url = path.resolve().as_uri()
        self.send("Page.navigate", {"url": url}, session)
        self._wait(
            lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session
        )
        return Page(self, session, url)

    def close(self) -> None:
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except (OSError, TimeoutError, EOFError, RuntimeError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._to_chrome)
            os.close(self._from_chrome)
            self._log.close()


class Page:
    """A loaded tab and what it did while loading."""

    def __init__(self, browser: Browser, session: str, url: str) -> None:
        self.browser, self.session, self.url = browser, session, url

    def evaluate(self, expression: str) -> Any:
        result = self.browser.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session
        )
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"]["value"]

    def _events(self, method: str) -> list[dict]:
        return [
            e["params"] for e in self.browser.events.get(self.session, []) if e["method"] == method
        ]

    def requests(self) -> list[str]:
        """URLs requested besides the page itself."""
        return [
            e["request"]["url"]
            for e in self._events("Network.requestWillBeSent")
            if e["request"]["url"] != self.url
        ]

    def errors(self) -> list[str]:
        console = [
            " ".join(str(a.get("value", a.get("description", ""))) for a in e["args"])
            for e in self._events("Runtime.consoleAPICalled")
            if e["type"] in ("error", "assert")
        ]
        thrown = [e["exceptionDetails"]["text"] for e in self._events("Runtime.exceptionThrown")]
        logged = [
            e["entry"]["text"]
            for e in self._events("Log.entryAdded")
            if e["entry"]["level"] == "error"
        ]
        failed = [e["errorText"] for e in self._events("Network.loadingFailed")]
        return console + thrown + logged + failed

    def dialogs(self) -> list[str]:
        return [
            f"{e['type']}: {e['message']}" for e in self._events("Page.javascriptDialogOpening")
        ]

    def screenshot(self, name: str) -> Path:
        """The whole page as PNG, kept under tests/artifacts/ for a person to look at."""
        size = self.browser.send("Page.getLayoutMetrics", session=self.session)["cssContentSize"]
        shot = self.browser.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": size["width"],
                    "height": size["height"],
                    "scale": 1,
                },
            },
            self.session,
        )
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        path.write_bytes(base64.b64decode(shot["data"]))
        print(f"screenshot: {path}")
        return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    chromium = Browser(tmp_path_factory.mktemp("chromium"))
    try:
        yield chromium
    finally:
        chromium.close()


def png_rows(png: bytes, limit: int) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, the first `limit` rows of pixels) of an 8-bit RGB(A)
    PNG; rows depend only on the rows above, so the rest is never decoded (it is slow in
    pure Python)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        body = png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, colour, interlace) in ((8, 2, 0), (8, 6, 0)), "unexpected PNG kind"
        elif kind == b"IDAT":
            idat.append(body)
    bpp = 3 if colour == 2 else 4
    stride, count = width * bpp, min(limit, height)
    raw = zlib.decompressobj().decompress(b"".join(idat), (stride + 1) * count)
    rows, prev = [], bytearray(stride)
    for y in range(count):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 :][:stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + prev[i]) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + prev[i]) // 2) & 255
            elif kind == 4:
                corner = prev[i - bpp] if i >= bpp else 0
                p = left + prev[i] - corner
                pa, pb, pc = abs(p - left), abs(p - prev[i]), abs(p - corner)
                line[i] = (
                    line[i] + (left if pa <= pb and pa <= pc else prev[i] if pb <= pc else corner)
                ) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def run_advisor(profile: Path, out: Path) -> list[dict]:
    result = CliRunner().invoke(main, ["run", str(profile), "-o", str(out), "-q", "--lang", "en"])
    assert result.exit_code == 0, result.output
    return [json.loads(p.read_text(encoding="utf-8")) for p in out.glob("prof_rule_*.json")]


def hostile_profile(tmp_path: Path) -> Path:
    """The demo profile with hostile operator names (so findings' evidence shows them), a
    hostile op type (so findings' messages do) and a hostile folder name (the profile label)."""
    profile = tmp_path / HOSTILE_FOLDER
    shutil.copytree(DEMO, profile)
    csvs = profile / "mindstudio_profiler_output"
    for pattern, column, rename in (
        ("op_summary_*.csv", "Op Name", None),
        ("op_statistic_*.csv", "OP Type", "SoftmaxV2"),
    ):
        (path,) = csvs.glob(pattern)
        with path.open(newline="", encoding="utf-8") as handle:
            header, *rows = list(csv.reader(handle))
        col = header.index(column)
        for i, row in enumerate(rows):
            if rename is None:
                row[col] = HOSTILE[i % len(HOSTILE)] + ("" if i < len(HOSTILE) else row[col])
            elif row[col] == rename:
                row[col] = HOSTILE[0]
        with path.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([header, *rows])
    return profile


def check_report_page(page: Page, reports: list[dict], shot: str) -> dict:
    """The checks every report passes: offline, quiet, complete, visible, drawn."""
    assert page.requests() == []
    assert page.errors() == []
    assert page.dialogs() == []
    dom = page.evaluate(DOM_SUMMARY)
    assert page.dialogs() == [] and page.errors() == []
    assert dom["styleSheets"] == 1, "the inline stylesheet did not load (CSP or a broken <style>)"

    findings = [f for report in reports for _, f in findings_by_rank(report)]
    assert findings, "the profile should produce findings"
    assert [t["text"] for t in dom["titles"]] == [f["title"] for f in findings]
    assert all(t["visible"] for t in dom["titles"])

    expected_rows = [len(f["evidence"]["rows"]) for f in findings if f["evidence"]]
    assert [len(t["rows"]) for t in dom["evidence"]] == expected_rows
    assert all(t["visible"] and all(r["visible"] for r in t["rows"]) for t in dom["evidence"])

    steps = [c for c in dom["charts"] if c["cls"] == "steps"]
    cores = [c for c in dom["charts"] if c["cls"] == "cores"]
    assert steps and cores
    for chart in dom["charts"]:
        _, _, vb_width, vb_height = map(float, chart["viewBox"].split())
        assert vb_width > 0 and vb_height > 0
        assert chart["visible"] and chart["box"]["width"] > 100 and chart["box"]["height"] > 50
        assert chart["bars"] > 0

    path = page.screenshot(shot)
    assert 20_000 < path.stat().st_size < 20_000_000
    chart = steps[0]["box"]
    bottom = int(chart["y"] + chart["height"])
    width, height, bpp, rows = png_rows(path.read_bytes(), bottom + 1)
    assert width == VIEWPORT[0] and VIEWPORT[1] <= height < 50_000
    pixels = [row[x : x + 3] for row in rows[::7] for x in range(0, width * bpp, bpp * 7)]
    background = rows[0][:3]
    assert len(set(pixels)) > 50, "the screenshot is (nearly) a single colour"
    assert sum(p != background for p in pixels) > len(pixels) // 20
    x0, x1 = int(chart["x"]), int(chart["x"] + chart["width"])
    chart_pixels = [
        tuple(row[x : x + 3])
        for row in rows[int(chart["y"]) : bottom]
        for x in range(x0 * bpp, x1 * bpp, bpp)
    ]
    assert chart_pixels.count(STEP_BLUE) > len(chart_pixels) // 50, "step bars were not drawn"
    return dom


def test_harness_detects_requests_errors_and_dialogs(browser: Browser, tmp_path: Path) -> None:
    """A page that does everything the report must not: each detector has to see it."""
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><title>control</title><script>console.error("boom");'
        'alert("ran")</script><img src="http://advisor.invalid/x.png">',
        encoding="utf-8",
    )
    page = browser.load(control)
    page.evaluate("1")  # a round trip, so events raised after the load have arrived
    assert page.dialogs() == ["alert: ran"]
    assert page.requests() == ["http://advisor.invalid/x.png"]
    errors = page.errors()
    assert any("boom" in e for e in errors)
    assert any(e.startswith("net::ERR_") for e in errors), "the request should fail offline"


def test_demo_report_in_browser(browser: Browser, tmp_path: Path) -> None:
    reports = run_advisor(DEMO, tmp_path / "out")
    page = browser.load(tmp_path / "out/report.html")
    dom = check_report_page(page, reports, "browser-demo.png")
    check_timeline(dom, reports[0], tmp_path / "out")


def check_timeline(dom: dict, report: dict, out: Path) -> None:
    """The timeline is laid out and drawn: a visible lane per lane the report has, each
    with its stretches and a label that fits its column, a marker per finding window inside
    the steps shown, side by side and linked to its finding; every snippet link resolves."""
    (timeline,) = dom["timeline"]
    assert timeline["visible"] and timeline["box"]["width"] > 500
    rows = report["metrics"]["timeline"]
    counts = {lane: sum(r["lane"] == lane for r in rows) for lane in {r["lane"] for r in rows}}
    lanes = {lane["lane"]: lane for lane in timeline["lanes"]}
    assert {lane for lane, n in counts.items() if n} <= set(lanes)
    for name, lane in lanes.items():
        assert lane["drawn"] == counts.get(name, 0)
        assert lane["label"]["width"] > 0 and lane["label"]["x"] >= timeline["box"]["x"]
    lo = min(r["start_us"] for r in rows)
    hi = max(r["end_us"] for r in rows)
    windows = [f for _, f in findings_by_rank(report) if f.get("window")]
    inside = [
        f["rank"] for f in windows if f["window"]["end_us"] >= lo and f["window"]["start_us"] <= hi
    ]
    markers = sorted(timeline["markers"], key=lambda m: m["box"]["x"])
    assert sorted(m["n"] for m in markers) == sorted(inside)
    assert all(m["target"] and m["box"]["width"] > 0 for m in markers)
    assert all(
        b["box"]["x"] >= a["box"]["x"] + a["box"]["width"] for a, b in zip(markers, markers[1:])
    )
    assert len(dom["traceLinks"]) == len(windows)
    assert all((out / link).is_file() for link in dom["traceLinks"])


def test_hostile_names_are_shown_as_text_and_never_run(browser: Browser, tmp_path: Path) -> None:
    reports = run_advisor(hostile_profile(tmp_path), tmp_path / "out")
    html = (tmp_path / "out/report.html").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html and "</style><b>" not in html
    page = browser.load(tmp_path / "out/report.html")
    dom = check_report_page(page, reports, "browser-hostile.png")

    assert dom["scripts"] == [_script()], "only the report's own script may be on the page"
    assert not {"b", "img"} & set(dom["tags"]), "markup from the profile was parsed"
    assert dom["handlers"] == []
    assert not [u for u in dom["urls"] if "javascript:" in u.lower().replace(" ", "")]
    for name in (*HOSTILE, HOSTILE_FOLDER):
        assert name in dom["text"]
    cells = {c for t in dom["evidence"] for r in t["rows"] for c in r["cells"]}
    assert all(any(c.startswith(name) for c in cells) for name in HOSTILE), (
        "the evidence tables should show every hostile name"
    )
    assert page.dialogs() == [] and page.errors() == []


def test_compare_page_in_browser(browser: Browser, tmp_path: Path) -> None:
    own = FIXTURE_DIR / "kineto_own"
    out = tmp_path / "cmp"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "compare",
            str(own / "compare_base.pt.trace.json.gz"),
            str(own / "compare_slow.pt.trace.json.gz"),
            "-o",
            str(out),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "prof_rule_compare.json").read_text(encoding="utf-8"))
    page = browser.load(out / "compare.html")
    page.evaluate("1")
    assert page.requests() == [] and page.errors() == [] and page.dialogs() == []
    dom = page.evaluate("""(() => {
      const seen = el => {
        const b = el.getBoundingClientRect();
        return b.width > 0 && b.height > 0;
      };
      return {
        sheets: document.styleSheets.length,
        metrics: [...document.querySelectorAll('#overall-table tr[data-metric]')].map(r => [
          r.dataset.metric, seen(r),
          [...r.querySelectorAll('.bar')].map(b => b.getBoundingClientRect().width)]),
        titles: [...document.querySelectorAll('.finding h4')].map(h => [h.textContent, seen(h)]),
        worse: [...document.querySelectorAll('td.worse')].length,
        sections: [...document.querySelectorAll('section.profile h2')].map(h => h.textContent),
      };
    })()""")
    assert dom["sheets"] == 2  # the report stylesheet and the compare page's own
    findings = [f["title"] for _, f in findings_by_rank(report)]
    assert [t for t, _ in dom["titles"]] == findings and all(v for _, v in dom["titles"])
    metrics = {m: (visible, bars) for m, visible, bars in dom["metrics"]}
    assert {"e2e", "operators"} <= set(metrics) and all(v for v, _ in metrics.values())
    base_bar, comp_bar = metrics["e2e"][1]
    assert 0 < base_bar < comp_bar  # the slower run's bar is the longer one
    assert dom["worse"] >= 3
    assert any("Operators that changed most" in s for s in dom["sections"])
    page.screenshot("browser-compare.png")


ROWS_OF = """(sel => [...document.querySelector(sel).tBodies[0].rows]
  .map(r => [...r.cells].map(c => c.textContent.trim())))"""


def test_tables_sort_and_printing_opens_every_details_block(
    browser: Browser, tmp_path: Path
) -> None:
    run_advisor(DEMO, tmp_path / "out")
    page = browser.load(tmp_path / "out/report.html")
    ranking = "table.ranking"
    before = page.evaluate(f"{ROWS_OF}('{ranking}')")
    assert [int(r[0]) for r in before] == list(range(1, len(before) + 1))

    # sort by the share column, lowest first, then highest first; a finding without a time
    # ("–", the demo's informational OP-005) stays last both ways
    def shares() -> tuple[list[float], list[str]]:
        cells = [r[4] for r in page.evaluate(f"{ROWS_OF}('{ranking}')")]
        numbers = [c for c in cells if c != "–"]
        assert cells[len(numbers) :] == ["–"] * (len(cells) - len(numbers)), cells
        return [float(c.rstrip("%")) for c in numbers], cells

    page.evaluate(f"document.querySelector('{ranking} thead th:nth-child(5)').click(); 1")
    ascending, cells = shares()
    assert ascending == sorted(ascending) and cells != [r[4] for r in before]
    assert len(ascending) < len(cells)  # the demo has a finding without a time
    page.evaluate(f"document.querySelector('{ranking} thead th:nth-child(5)').click(); 1")
    descending, _ = shares()
    assert descending == sorted(ascending, reverse=True)
    # an evidence table sorts by the raw number, not by the text ("9.5" after "10.1")
    evidence = page.evaluate("""(() => { const t = document.querySelector('table.evidence');
      const th = [...t.tHead.rows[0].cells].findIndex(c => c.classList.contains('num'));
      t.tHead.rows[0].cells[th].click();
      return [...t.tBodies[0].rows].map(r => Number(r.cells[th].dataset.sort)); })()""")
    assert evidence == sorted(evidence) and len(evidence) > 1
    closed = page.evaluate("document.querySelectorAll('details:not([open])').length")
    assert closed > 0
    page.evaluate("window.dispatchEvent(new Event('beforeprint')); 1")
    assert page.evaluate("document.querySelectorAll('details:not([open])').length") == 0
    page.evaluate("window.dispatchEvent(new Event('afterprint')); 1")
    assert page.evaluate("document.querySelectorAll('details:not([open])').length") == closed
    assert page.errors() == [] and page.dialogs() == [] and page.requests() == []


def test_readable_at_700_px_and_dark_when_the_system_is(browser: Browser, tmp_path: Path) -> None:
    run_advisor(DEMO, tmp_path / "out")
    page = browser.load(tmp_path / "out/report.html")
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    browser.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 700, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        page.session,
    )
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; }); 1")
    assert page.evaluate("document.documentElement.scrollWidth") <= 700, (
        "the page scrolls sideways at 700 px"
    )
    browser.send(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        page.session,
    )
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    text = page.evaluate("getComputedStyle(document.body).color")
    assert dark != light
    luminance = [sum(map(int, c[c.index("(") + 1 : -1].split(",")[:3])) for c in (dark, text)]
    assert luminance[0] < 150 < luminance[1], (dark, text)  # dark page, light text
