"""What a newcomer reads in the first hour: the reports' tables render, the peer matrix's PNG
reads at screen size, the console says 'differs' for peers, the harness prints no TF log
lines, no Python warnings and no carriage returns into a log, and says where its files went."""
import json
import os
import re
import subprocess
import sys
from collections import OrderedDict

import pytest

from conformance import __main__ as cli, matrix as M, report as R

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASE = "rbg_b2_i5x7_o10x3_c3_thp_f32"


def markdown_tables(text):
    """Each GitHub-flavoured markdown table in ``text`` as a list of rows of cells: a row's
    cells split on the pipes that a backslash does not escape."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def assert_tables_render(text):
    tables = markdown_tables(text)
    assert tables
    for table in tables:
        header, separator = table[0], table[1]
        assert all(set(c.strip()) <= set("-:") and c.strip() for c in separator), separator
        assert len(separator) == len(header), (header, separator)
        assert all(len(row) == len(header) for row in table[2:]), header
    return tables


def test_markdown_table_parser_sees_an_unescaped_pipe():
    """The check below, on a table like the old report's: 'worst |err|/S' with bare pipes makes
    the header 13 cells for an 11-cell separator."""
    bad = "| a | worst |err|/S |\n|---|---|\n| 1 | 2 |\n"
    with pytest.raises(AssertionError):
        assert_tables_render(bad)
    assert_tables_render("| a | worst \\|err\\|/S |\n|---|---|\n| 1 | 2 |\n")


def _run(tmp_path, *extra):
    report, records = tmp_path / "r.md", tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "conformance", "--case", CASE, "--backend",
                           "numpy", "--device", "cpu", "--report", str(report), "--json",
                           str(records), *extra], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    return proc, report, records


def test_the_report_and_console_say_what_they_mean(tmp_path):
    """A run with its output in a file (not a terminal): the report's tables render, the
    console prints where the files went, the progress has no carriage returns, and there are
    no TF start-up lines nor Python warnings."""
    pytest.importorskip("tensorflow")
    proc, report, records = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_tables_render(report.read_text())
    assert f"report written to {report}" in proc.stdout
    assert f"records written to {records}" in proc.stdout
    both = proc.stdout + proc.stderr
    assert "\r" not in both
    for noise in ("absl::InitializeLog", "oneDNN custom operations", "Warning", "NO GPU"):
        assert noise not in both, noise
    assert "1/1 cases, 0 failed" in proc.stderr
    # the verdict first; the table with the GPU line under it; a legend naming every column;
    # the oracle that judged each row
    lines = [line for line in report.read_text().splitlines() if line]
    assert lines[1] == "**Verdict: PASS: 1 cases, 1 results, 0 failing.**"
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    assert lines[table[-1] + 1] == "**GPU:** not requested (--device cpu)"
    for column in R.HEADER:
        assert column.replace("|", "\\|") in lines[table[0]]
        assert f"{column}:" in R.LEGEND, column
    assert lines[table[2]].endswith("| tf-cpu-raw 1 |"), lines[table[2]]


def test_peers_differ_and_never_fail_in_the_console():
    """A peer's results that differ from TF are counted under 'differs' (its 'failed' is '-');
    tfcompat's own backends keep 'failed'; the legend explains the columns."""
    def rec(backend, passed):
        return {"kernel": "ResizeBilinearGrad", "backend": backend, "dtype": "f32",
                "device": "cpu", "passed": passed, "finding": False, "outcome":
                "within" if passed else "differs", "norm_err": 0.5, "ulp": 7}
    records = [rec("torch", False), rec("torch", True), rec("cython", True)]
    rows = R.summarize(records, peers=("torch",))
    text = R.table_text(rows)
    header = text.splitlines()[0].split()
    assert header[6:8] == ["failed", "differs"]
    cython, torch = (line.split() for line in text.splitlines()[2:])
    assert cython[6:8] == ["0", "-"] and torch[6:8] == ["-", "1"]
    assert "differs: a peer framework's results" in R.LEGEND
    assert_tables_render(R.table_markdown(rows))


def _matrix_rows():
    with open(os.path.join(ROOT, "docs", "peer-matrix.json")) as f:
        data = json.load(f)
    return (OrderedDict(((r["kernel"], r["mode"], r["dtype"]), r["cells"])
                        for r in data["rows"]), data["backends"])


def test_the_matrix_markdown_renders():
    rows, backends = _matrix_rows()
    assert_tables_render(M.markdown(rows, backends, {"grid": "full"}))


def test_the_matrix_png_reads_at_screen_size(tmp_path):
    """docs/peer-matrix.json's rows (kernels x modes x dtypes) fold into one row per kernel and
    mode (dtypes, layouts and ranks folded: 36 for the backward kernels, and 3 modes of each
    forward resize), at most 1,400 pixels tall with
    9-point text, in a palette without red and green."""
    pytest.importorskip("matplotlib")
    rows, backends = _matrix_rows()
    info = M.heatmap(rows, backends, str(tmp_path / "m.png"))
    assert os.path.getsize(tmp_path / "m.png") > 0
    assert info["height_px"] <= M.MAX_HEIGHT_PX and info["min_font_pt"] >= 9
    assert len(info["rows"]) == 36 + 2 * 3
    assert "ResizeBilinear: legacy" in info["rows"]
    assert "Conv2DBackpropInput: SAME dilation 1" in info["rows"]
    assert not any("NCHW" in r or "2-D" in r for r in info["rows"])
    assert "#1a9850" not in M.COLOURS.values() and "#d73027" not in M.COLOURS.values()


def test_the_matrix_says_why_there_is_no_png(tmp_path):
    """Without matplotlib (a process that cannot import it), --matrix writes the markdown and
    the JSON and says why there is no PNG."""
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from conformance import matrix as M\n"
            "from collections import OrderedDict\n"
            f"print(M.write({str(tmp_path / 'm.md')!r}, OrderedDict(), ['cython'], {{}}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "no PNG: matplotlib is not installed" in proc.stdout
    assert (tmp_path / "m.md").exists() and not (tmp_path / "m.png").exists()


def test_progress_eta_waits_for_the_start_up(capsys):
    """The progress line in a log: a line per tenth, no carriage return, and no ETA until the
    first cases (which pay for TF's start-up) are behind it."""
    progress = cli._Progress(20, True, stream=sys.stdout)
    for k in range(21):
        progress.update(k, f"case{k}", 0)
    out = capsys.readouterr().out
    assert "\r" not in out
    lines = out.splitlines()
    assert lines[0] == "2/20 cases, 0 failed, eta --"
    assert lines[-1].startswith("20/20 cases, 0 failed, eta ")
    assert len(lines) == 10


def test_tfjs_install_runs_without_a_runpy_warning():
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m",
                           "conformance.peers.tfjs_peer"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert "RuntimeWarning" not in proc.stderr
    assert "usage: python -m conformance.peers.tfjs_peer install" in proc.stderr
