"""Profile.save_html and `knit profile --html` (docs/profiling.md): one self-contained page with
the summary, the engine timeline, SBUF/PSUM occupancy, DMA bandwidth and the annotated source.

The figures the page draws are checked against the profile they come from (bytes, rows, peaks),
and the page itself is loaded in a real headless Chromium (installed by ./dev): it must draw every
view, log nothing to the console, and give a screenshot of the window's size.
"""
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

import knit
import knit.language as nl
import knit.typing as nt
from kernel_test_util import EXAMPLES, ROOT, load_example
from knit import _report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (./dev installs it)")
VIEWS = 5  # summary, timeline, memory, bandwidth, source


def tiled_profile():
    kernel = load_example("matmul/stages.py").tiled
    return knit.profile(kernel, nt.tensor[[512, 256], nl.bfloat16], nt.tensor[[512, 1024], nl.bfloat16],
                        target="trn1")


def attention_profile():
    kernel = load_example("attention.py").attention_kernel
    return knit.profile(kernel, *[nt.tensor[[512, 128], nl.float32]] * 3, target="trn2")


@pytest.fixture(scope="module")
def profiles():
    return {"tiled": tiled_profile(), "attention": attention_profile()}


# ---- the data the page draws -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["tiled", "attention"])
def test_the_timeline_has_every_executed_instruction(profiles, name):
    prof = profiles[name]
    data = _report.report_data(prof)
    assert len(data["timeline"]["start"]) == data["timeline"]["rows"] == sum(prof.instructions.values())
    assert all(str(i) in data["sites"] for i in data["timeline"]["ir"])


@pytest.mark.parametrize("name", ["tiled", "attention"])
def test_dma_bandwidth_over_time_adds_up_to_the_bytes_moved(profiles, name):
    prof = profiles[name]
    bw = _report.report_data(prof)["bandwidth"]
    assert sum(bw["bytes_per_ns"]) * bw["bin_ns"] == pytest.approx(prof.dma_bytes, rel=1e-9)


@pytest.mark.parametrize("name", ["tiled", "attention"])
def test_occupancy_peaks_are_the_live_tensors_and_fit_the_allocation(profiles, name):
    prof = profiles[name]
    memory = _report.report_data(prof)["memory"]
    stats = prof._program.stats()
    for buffer in ("sbuf", "psum"):
        m = memory[buffer]
        assert 0 < m["peak"] <= stats[f"{buffer}_high_water"], buffer
        assert len(m["alive"]) == min(m["alive_count"], 12)  # the page lists at most 12
        if m["alive_count"] <= 12:  # every tensor alive at the peak is listed: they make the peak
            assert sum(t["bytes"] for t in m["alive"]) == m["peak"], buffer


def test_the_psum_peak_of_the_tiled_matmul_is_whole_fp32_tiles(profiles):
    """tiled accumulates each [128, 512] output tile in an fp32 PSUM tile: 2048 bytes per
    partition each, so the PSUM peak is a whole number of them."""
    peak = _report.report_data(profiles["tiled"])["memory"]["psum"]["peak"]
    assert peak % 2048 == 0 and peak >= 2048


# ---- the page ------------------------------------------------------------------------------


def test_the_page_needs_no_network(profiles, tmp_path):
    path = profiles["attention"].save_html(tmp_path / "report.html")
    page = open(path, encoding="utf-8").read()
    assert not re.search(r"<(script|img|link|iframe)[^>]*\b(src|href)=", page)
    assert "attention_kernel on trn2" in page


def chromium(*args):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", *args], capture_output=True, text=True, timeout=120)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@needs_chromium
@pytest.mark.parametrize("name", ["tiled", "attention"])
def test_chromium_draws_every_view_without_console_messages(profiles, name, tmp_path):
    prof = profiles[name]
    path = prof.save_html(tmp_path / "report.html")
    r = chromium("--dump-dom", f"file://{path}")
    body = re.search(r"<body[^>]*>", r.stdout).group(0)
    assert f'data-rendered="{VIEWS}"' in body and "data-error" not in body, body
    assert "CONSOLE" not in r.stderr, [line for line in r.stderr.splitlines() if "CONSOLE" in line]
    # One rectangle per executed instruction on the timeline.
    timeline = r.stdout[r.stdout.index('id="timeline"'):r.stdout.index('id="memory"')]
    assert timeline.count("<rect") == sum(prof.instructions.values())
    shot = tmp_path / "report.png"
    chromium("--hide-scrollbars", "--window-size=1300,1400", f"--screenshot={shot}", f"file://{path}")
    assert png_size(shot) == (1300, 1400)
    assert os.path.getsize(shot) > 20_000  # drawn charts, not a blank page


def test_knit_profile_html_writes_the_report(tmp_path):
    out = tmp_path / "softmax.html"
    r = subprocess.run([sys.executable, "-m", "knit", "profile", f"{EXAMPLES}/softmax.py::softmax_kernel",
                        "--shape", "512x1024", "--timing-only", "--html", str(out)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert r.returncode == 0, r.stderr
    assert "HTML report written to" in r.stdout
    assert "softmax_kernel on trn2" in out.read_text(encoding="utf-8")
