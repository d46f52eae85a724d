"""Terminal summary, markdown report, JSON records, and merging of sharded runs."""
import json
import math
import platform
import sys
from collections import OrderedDict

import numpy as np


def summarize(records, peers=()):
    """Rows of (kernel, backend, dtype, device, cases, passed, failed, differs, findings, n/a or
    self-check, worst norm err, worst ULP, oracles: {oracle: cases it judged}); a finding (a difference from an oracle that stands
    in for TF) is not a failure, nor is a peer's difference (its ``differs``; its ``failed``
    is None)."""
    groups = OrderedDict()
    for r in sorted(records, key=lambda r: (r["kernel"], r["backend"], r["dtype"], r["device"])):
        key = (r["kernel"], r["backend"], r["dtype"], r["device"])
        g = groups.setdefault(key, {"cases": 0, "passed": 0, "findings": 0, "unjudged": 0,
                                    "worst": 0.0, "ulp": None, "oracles": OrderedDict()})
        g["cases"] += 1
        oracle = r.get("oracle") or "none"
        g["oracles"][oracle] = g["oracles"].get(oracle, 0) + 1
        g["passed"] += bool(r["passed"])
        g["findings"] += not r["passed"] and bool(r.get("finding"))
        g["unjudged"] += r["outcome"] in ("n/a", "self-check")
        if r["norm_err"] is not None and not (isinstance(r["norm_err"], float) and math.isnan(r["norm_err"])):
            g["worst"] = max(g["worst"], r["norm_err"])
        if r["ulp"] is not None:
            g["ulp"] = max(g["ulp"] or 0, r["ulp"])
    out = []
    for k, g in groups.items():
        bad = g["cases"] - g["passed"] - g["findings"]
        peer = k[1] in peers
        out.append((k[0], k[1], k[2], k[3], g["cases"], g["passed"], None if peer else bad,
                    bad if peer else None, g["findings"], g["unjudged"], g["worst"], g["ulp"],
                    dict(sorted(g["oracles"].items()))))
    return out


HEADER = ("kernel", "backend", "dtype", "device", "cases", "passed", "failed", "differs",
          "findings", "n/a or self-check", "worst |err|/S", "worst ULP", "oracle (cases)")

# what the table's columns mean, printed under it
LEGEND = ("kernel: the registry's name (TF's op). backend: who computed it (cython and numpy "
          "are tfcompat's; tf-plugin, jax-front: TF's ops with tfcompat.tf.enable(), the JAX "
          "front; others: peer frameworks). dtype: the case's dtype. device: where the oracle "
          "ran (cpu, a GPU's). cases: results in the "
          "row; passed: judged equal to the oracle (bit for bit where TF's bits are required, "
          "else within the metric), or not judged (the next column). failed: tfcompat's own "
          "backends out of tolerance, not bit for bit where TF's bits are required, raising, or "
          "(tf-plugin) answered by TF's own kernel; differs: a peer framework's results that "
          "differ from TF (findings about that framework, not failures). findings: differences "
          "from an oracle that stands in for TF (PyTorch where TF lacks the mode), reported, "
          "not failed. n/a or self-check: the backend lacks the mode (n/a), or no oracle but "
          "the backend itself covers the case (self-check). worst |err|/S: the largest error "
          "over S, the same backward applied to |dy| (the metric, docs/semantics.md §9); inf: "
          "an infinite or NaN result where TF's is finite, or the wrong shape. worst ULP: the "
          "largest distance from TF's float result in units in the last place; where sums "
          "cancel near zero it is large though the error is tiny against S (the float64 numpy "
          "reference rounds once where TF's float32 sums round at every add). oracle (cases): "
          "what judged the row's results and how many each (tf-cpu-raw: TF's raw op; tf-cpu: a "
          "composition of TF ops; torch-cpu: PyTorch standing in for TF; numpy-reference: "
          "tfcompat's float64 reference where TF has no such op; none: not judged).")


def _fmt_row(row):
    k, b, d, dev, n, p, f, df, fi, u_, w, u, oracles = row
    dash = lambda v: "-" if v is None else str(v)   # noqa: E731
    return (k, b, d, dev, str(n), str(p), dash(f), dash(df), str(fi), str(u_),
            f"{w:.2e}" if math.isfinite(w) else "inf", dash(u),
            ", ".join(f"{o} {c}" for o, c in oracles.items()))


def table_text(rows):
    cells = [HEADER] + [_fmt_row(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(HEADER))) for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def md_cell(text):
    """A markdown table cell: a literal '|' escaped, so that it does not end the cell (GFM)."""
    return str(text).replace("|", "\\|")


def md_row(cells):
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


def table_markdown(rows):
    out = [md_row(HEADER), "|" + "---|" * len(HEADER)]
    out += [md_row(_fmt_row(r)) for r in rows]
    return "\n".join(out)


def machine_info():
    info = {"platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor(), "python": sys.version.split()[0],
            "numpy": np.__version__}
    try:
        import os
        info["cpus"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        import tfcompat
        info["tfcompat"] = tfcompat.__version__
        info["threads"] = tfcompat.get_num_threads()
        info["kernel_build"] = tfcompat.kernel_build()
    except ImportError:
        pass
    if "tensorflow" in sys.modules:
        info["tensorflow"] = sys.modules["tensorflow"].__version__
    if "torch" in sys.modules:
        info["torch"] = sys.modules["torch"].__version__
    return info


def write_json(path, records, meta):
    with open(path, "w") as f:
        json.dump({"meta": meta, "records": records}, f, indent=1, default=float)


def write_markdown(path, records, meta, peers=()):
    rows = summarize(records, peers)
    failing = [r for r in records if not r["passed"] and not r.get("finding")]
    findings = [r for r in records if not r["passed"] and r.get("finding")]
    cases = len({r["id"] for r in records if "id" in r})
    verdict = ("PASS" if not failing else "FAIL") + (
        f": {cases} cases, {len(records)} results, {len(failing)} failing"
        + (f", {len(findings)} findings" if findings else "")
        + " (failing cases are listed at the end)" * bool(failing))
    lines = ["# tfcompat conformance report", "", f"**Verdict: {verdict}.**", "", "## Summary",
             "", table_markdown(rows), "", f"**GPU:** {meta.get('gpu_note', '')}", "", LEGEND,
             "", "## Run", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k != "gpu_note"]
    lines += [""]
    for title, group in (("Failing cases", failing),
                         ("Findings: differences from PyTorch where it stands in for TF", findings)):
        if not group:
            continue
        lines += [f"## {title}", ""]
        for r in group:
            lines += [f"### `{r['id']}` ({r['backend']}, {r['device']})", "",
                      f"- re-run: `python -m conformance --case {r['id']} --backend {r['backend']}`",
                      f"- inputs: {r['shapes']}", f"- attrs: {r['attrs']}",
                      f"- outcome: {r['outcome']}; oracle: {r['oracle']}; worst |err|/S "
                      f"{r['norm_err']:.3e} at {r['worst_index']}: "
                      f"ours {r['got']!r} vs oracle {r['ref']!r}; ULP {r['ulp']}",
                      f"- note: {r['note']}", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def merge(paths):
    records, metas = [], []
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        records += data["records"]
        metas.append(data["meta"])
    return records, metas
