"""Must show: the fixture report and an ``rlvr compare`` page render in headless Chromium, are not
blank, and load nothing from the network.

Network check: Chromium is pointed at a recording HTTP proxy on localhost (every request
it would send off the machine goes there). A control page with one external image proves
the recorder sees requests; the report must cause none. The rendered DOM (``--dump-dom``)
is also checked for external src/href. Installs Debian's ``chromium`` when missing and
running as root; skips with the reason otherwise.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rlvr.cli import main
from rlvr.report.html import write_report

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run_small"
TIMEOUT_S = 120
# Chromium's own background services (component updater, network time, sign-in) still call
# these despite the --disable-* flags; they are not requests of the page.
BROWSER_HOSTS = {"update.googleapis.com", "accounts.google.com", "clients2.google.com",
                 "redirector.gvt1.com", "optimizationguide-pa.googleapis.com",
                 "content-autofill.googleapis.com", "safebrowsingohttpgateway.googleapis.com"}


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.geteuid() != 0:
        pytest.skip("chromium is not installed and not running as root to apt-get install it")
    cmd = "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium"
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=900)
    exe = shutil.which("chromium")
    if res.returncode != 0 or not exe:
        pytest.skip(f"could not install chromium (apt-get rc={res.returncode}): {res.stderr[-300:]}")
    return exe


def _host(request_line: str) -> str:
    """Host of a recorded ``METHOD target`` line (CONNECT host:port or an absolute URL)."""
    method, target = request_line.split(" ", 1)
    if method == "CONNECT":
        return target.rsplit(":", 1)[0]
    return urlsplit(target).hostname or target


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def _record(self) -> None:
        type(self).seen.append(f"{self.command} {self.path}")
        self.send_response(404)
        self.end_headers()

    do_GET = do_POST = do_HEAD = do_CONNECT = _record

    def log_message(self, *args) -> None:  # silence
        pass


@pytest.fixture()
def proxy():
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], _Recorder.seen
    server.shutdown()


def _run(exe: str, tmp: Path, url: str, port: int, *extra: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp / 'profile'}", f"--proxy-server=http://127.0.0.1:{port}",
             "--proxy-bypass-list=<-loopback>", "--window-size=1200,3000"]
    return subprocess.run([exe, *flags, *extra, url], capture_output=True, text=True, timeout=TIMEOUT_S)


def test_report_renders_in_chromium_without_network(tmp_path, proxy):
    from PIL import Image

    exe = _chromium()
    port, seen = proxy
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://rlvr-control.invalid/x.png"></body></html>')
    _run(exe, tmp_path, control.as_uri(), port, f"--screenshot={tmp_path / 'control.png'}")
    assert "rlvr-control.invalid" in {_host(s) for s in seen}, f"the recorder missed the page's request: {seen}"
    seen.clear()

    report = write_report([FIXTURE], tmp_path / "report.html")
    png = tmp_path / "report.png"
    res = _run(exe, tmp_path, report.as_uri(), port, f"--screenshot={png}")
    assert png.is_file() and png.stat().st_size > 10_000, res.stderr[-500:]
    img = Image.open(png).convert("RGB")
    assert img.size == (1200, 3000)
    colours = img.getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50  # not one colour: text and plots were drawn

    dom = _run(exe, tmp_path, report.as_uri(), port, "--dump-dom").stdout
    assert '<section id="summary">' in dom and '<section id="scaling">' in dom
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) >= 10
    assert not re.search(r'(src|href)="(https?:)?//', dom)
    assert not re.search(r"<link|<script", dom, re.I)
    page = [s for s in seen if _host(s) not in BROWSER_HOSTS]
    assert page == [], f"the report made network requests: {page}"


def _compare_runs(root: Path) -> list[Path]:
    """Two groups x two seeds: copies of the fixture, each with a config seed and 8 problems x 4 samples."""
    runs = []
    for group, shift in (("cispo", 0), ("grpo", 1)):
        for seed in (0, 1):
            run = root / f"{group}-s{seed}-20250101-12000{seed}"
            shutil.copytree(FIXTURE, run)
            (run / "config.yaml").write_text(f"name: {group}\ntrain:\n  seed: {seed}\n")
            rows = [{"problem_id": f"p{p}", "correct": (p + i + shift + seed) % 3 == 0, "answer": str(i),
                     "completion": f"Q:{p}+{i}\nA:{i}", "num_tokens": 5, "mean_entropy": 1.0 + 0.1 * i}
                    for p in range(8) for i in range(4)]
            (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            runs.append(run)
    return runs


def test_compare_page_renders_in_chromium_without_network(tmp_path, proxy):
    from PIL import Image

    exe = _chromium()
    port, seen = proxy
    page = tmp_path / "compare.html"
    assert main(["compare", *map(str, _compare_runs(tmp_path / "runs")), "--out", str(page), "--plain"]) == 0
    png = tmp_path / "compare.png"
    res = _run(exe, tmp_path, page.as_uri(), port, f"--screenshot={png}")
    assert png.is_file() and png.stat().st_size > 10_000, res.stderr[-500:]
    colours = Image.open(png).convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50
    dom = _run(exe, tmp_path, page.as_uri(), port, "--dump-dom").stdout
    for section in ("runs", "differences", "training", "passk", "samples"):
        assert f'<section id="{section}">' in dom
    assert "paired by seed (0, 1)" in dom and 'id="fig-passk-difference-img"' in dom
    assert not re.search(r'(src|href)="(https?:)?//', dom) and not re.search(r"<link|<script", dom, re.I)
    assert [s for s in seen if _host(s) not in BROWSER_HOSTS] == []
