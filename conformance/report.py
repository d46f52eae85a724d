"""Terminal summary, markdown report, JSON records, and merging of sharded runs."""
import json
import math
import platform
import sys
from collections import OrderedDict

import numpy as np


def summarize(records):
    """Rows of (kernel, backend, dtype, device, cases, passed, failed, findings, n/a or
    self-check, worst norm err, worst ULP); a finding (a difference from an oracle that stands
    in for TF) is not a failure."""
    groups = OrderedDict()
    for r in sorted(records, key=lambda r: (r["kernel"], r["backend"], r["dtype"], r["device"])):
        key = (r["kernel"], r["backend"], r["dtype"], r["device"])
        g = groups.setdefault(key, {"cases": 0, "passed": 0, "findings": 0, "unjudged": 0,
                                    "worst": 0.0, "ulp": None})
        g["cases"] += 1
        g["passed"] += bool(r["passed"])
        g["findings"] += not r["passed"] and bool(r.get("finding"))
        g["unjudged"] += r["outcome"] in ("n/a", "self-check")
        if r["norm_err"] is not None and not (isinstance(r["norm_err"], float) and math.isnan(r["norm_err"])):
            g["worst"] = max(g["worst"], r["norm_err"])
        if r["ulp"] is not None:
            g["ulp"] = max(g["ulp"] or 0, r["ulp"])
    return [(k[0], k[1], k[2], k[3], g["cases"], g["passed"],
             g["cases"] - g["passed"] - g["findings"], g["findings"], g["unjudged"], g["worst"],
             g["ulp"]) for k, g in groups.items()]


HEADER = ("kernel", "backend", "dtype", "device", "cases", "passed", "failed", "findings",
          "n/a or self-check", "worst |err|/S", "worst ULP")


def _fmt_row(row):
    k, b, d, dev, n, p, f, fi, u_, w, u = row
    return (k, b, d, dev, str(n), str(p), str(f), str(fi), str(u_),
            f"{w:.2e}" if math.isfinite(w) else "inf", "-" if u is None else str(u))


def table_text(rows):
    cells = [HEADER] + [_fmt_row(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(HEADER))) for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def table_markdown(rows):
    cells = [_fmt_row(r) for r in rows]
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(c) + " |" for c in cells]
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
        info["openmp"] = tfcompat.openmp_enabled()
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


def write_markdown(path, records, meta):
    rows = summarize(records)
    failing = [r for r in records if not r["passed"] and not r.get("finding")]
    findings = [r for r in records if not r["passed"] and r.get("finding")]
    lines = ["# tfcompat conformance report", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k != "gpu_note"]
    lines += ["", f"**GPU:** {meta.get('gpu_note', '')}", "", "## Summary", "", table_markdown(rows), ""]
    lines += [f"{len(records)} results, {len(failing)} failing"
              + (f", {len(findings)} findings." if findings else "."), ""]
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
