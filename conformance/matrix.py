"""The cross-framework matrix: per kernel x mode x dtype, each backend's outcome.

A cell is ``bitwise`` (every judged case gave the oracle's bits), ``within`` (within tolerance;
the worst |err|/S), ``differs`` (the worst |err|/S, the first differing case id, and a one-line
cause where a known one applies), ``n/a`` (the backend lacks the mode: its reason), ``error``
(it raised something else) or ``self-check`` (only the backend itself could judge it).
Written as markdown, JSON and a PNG heat map (rows kernel x mode, dtypes, layouts and ranks
folded, coloured by the worst outcome in a palette that colour-blind readers tell apart, each
cell labelled).
"""
import json
import re
from collections import OrderedDict

from . import cases as C
from .report import md_row

ORDER = ("error", "differs", "within", "bitwise", "self-check", "n/a")
# Okabe and Ito's palette (distinct under the common colour blindnesses), and each cell's label
COLOURS = {"bitwise": "#0072B2", "within": "#56B4E9", "differs": "#E69F00",
           "error": "#D55E00", "n/a": "#E0E0E0", "self-check": "#F0E442"}
LABELS = {"bitwise": "bits", "within": "tol", "differs": "differs", "error": "error",
          "n/a": "n/a", "self-check": "self"}
# the PNG's text, in points: at least 9, and the image at most 1,400 pixels tall, so that it
# reads at 100 % on a screen
FONT_PT = 9
MAX_HEIGHT_PX = 1400
_FLAGS = {"lg": "legacy", "ac": "align_corners", "hp": "half_pixel", "achp": "align+half"}


def mode_of(case):
    """The row's mode: the flags, coordinate mode, padding kind, dilation and layout."""
    if case.op in ("rbg", "rnn") + C.FORWARD_OPS:
        return _FLAGS[case.t]
    if case.op == "conv":
        pad = case.p if case.p in ("SAME", "VALID") else "explicit"
        return f"{pad} dilation{'>1' if max(case.d) > 1 else ' 1'} {case.l.upper()}"
    if case.op == "interp":
        return f"{case.m} {C.INTERP_T[case.t]} {len(case.i)}-D {case.l.upper()}"
    return f"{'align_corners' if case.t == 'ac' else 'half_pixel'} {'scales' if case.sc else 'sizes'}"


def known_cause(record, case):
    """A one-line cause for a differing (or failing) result, where one is known. Each is shown
    on a hand-checked small case with the peer's own output in tests/test_peers.py."""
    b, op = record["backend"], case.op
    downsampling = any(o < i for i, o in zip(case.i, case.o))
    if b == "tfjs-cpu" and op == "rnn" and "no answer" in record["note"]:
        return ("tfjs's nearest grad loops forever with alignCorners and an original axis of 1 "
                "(its scale is 0, its search window infinite)")
    if b == "tfjs-cpu" and op == "rbg" and "shape" in record["note"]:
        return "tfjs returns ResizeBilinearGrad as [B, W, H, C]"
    if b == "tfjs-cpu" and op in ("rbg", "rnn") and case.t in ("hp", "achp"):
        return "tfjs ignores halfPixelCenters"
    if b == "tfjs-cpu" and op == "rnn" and case.b > 1:
        return "tfjs's nearest grad reads dy with the images' batch stride"
    if b == "tfjs-cpu" and op in C.FORWARD_OPS:
        return ("tfjs's CPU resize computes coordinates and lerps in float64 (JavaScript "
                "numbers), rounding once to float32 (TF: every step in float32)")
    if b == "jax-antialias" and downsampling:
        return "jax.image.resize antialiases when downsampling (its default)"
    if b == "torch" and op in ("rbg", "rb") and case.t == "hp" and case.dtype == "f32":
        return ("PyTorch rounds the half-pixel position (x + 0.5) * scale - 0.5 once (as a "
                "fused multiply-add would), TF twice")
    if b in ("torch", "jax", "jax-antialias") and case.dtype == "f64" and op != "rbg":
        return "float64 coordinate arithmetic (the definition: float32, TF's)"
    if b == "torch" and case.op == "interp" and case.t == "pt" and 1 in case.o:
        return ("PyTorch's align_corners=False samples an axis resized to 1 at its centre "
                "(ONNX's pytorch_half_pixel: at 0)")
    if b.startswith("onednn") and op == "ortrg" and case.sc:
        return "oneDNN's resampling maps by the sizes; its factors do not change the mapping"
    if b.startswith("onednn") and op in ("rbg", "rnn", "interp") + C.FORWARD_OPS:
        return ("oneDNN computes the source coordinate as (x + 0.5) * I / O (TF multiplies by "
                "the ratio I / O rounded to float32): other weights in the last bits, and "
                "another nearest pixel where TF's coordinate lands just below an integer")
    return ""


def build(records):
    """OrderedDict[(kernel, mode, dtype)] -> {backend: cell}."""
    groups = OrderedDict()
    for r in records:
        if r["device"] != "cpu":
            continue
        case = C.parse_id(r["id"])
        key = (r["kernel"], mode_of(case), r["dtype"])
        groups.setdefault(key, OrderedDict()).setdefault(r["backend"], []).append((r, case))
    rows = OrderedDict()
    for key in sorted(groups):
        rows[key] = {b: _cell(rs) for b, rs in groups[key].items()}
    return rows


def _cell(results):
    outcomes = [r["outcome"] for r, _ in results]
    judged = [(r, c) for r, c in results if r["outcome"] in ("bitwise", "within", "differs")]
    cell = {"cases": len(results), "judged": len(judged),
            "n/a": sum(o == "n/a" for o in outcomes)}
    worst = max((r["norm_err"] for r, _ in judged), default=0.0)
    cell["worst"] = worst
    for outcome in ("error", "differs"):
        bad = [(r, c) for r, c in results if r["outcome"] == outcome]
        if bad:
            r, c = bad[0]
            cell.update(outcome=outcome, first=r["id"], count=len(bad),
                        why=known_cause(r, c) or r["note"][:160])
            return cell
    if judged:
        cell["outcome"] = ("bitwise" if all(r["outcome"] == "bitwise" for r, _ in judged)
                           else "within")
        return cell
    if "self-check" in outcomes:
        cell["outcome"] = "self-check"
        return cell
    cell["outcome"] = "n/a"
    cell["why"] = next((r["note"].split(";")[0] for r, _ in results if r["note"]), "")[:160]
    return cell


def _text(cell):
    o = cell["outcome"]
    if o == "bitwise":
        return "bitwise"
    if o == "within":
        return f"within ({cell['worst']:.1e})"
    if o == "differs":
        why = f"; {cell['why']}" if cell.get("why") else ""
        return (f"**differs** ({cell['worst']:.1e}, {cell['count']}/{cell['cases']}, "
                f"first `{cell['first']}`{why})")
    if o == "error":
        return f"**error** (`{cell['first']}`: {cell['why']})"
    if o == "n/a":
        return f"n/a ({cell.get('why', '')})" if cell.get("why") else "n/a"
    return o


def markdown(rows, backends, meta=None):
    lines = ["# Cross-framework conformance matrix", ""]
    if meta:
        lines += [f"- {k}: {v}" for k, v in meta.items()] + [""]
    lines += ["Each cell: the backend's outcome over the cases of that row, judged against "
              "TensorFlow (or the next oracle: docs/semantics.md §9). within: the worst "
              "|err|/S; differs: the worst |err|/S, how many cases, the first, and a known "
              "cause.", ""]
    lines.append(md_row(["kernel", "mode", "dtype"] + list(backends)))
    lines.append("|---|---|---|" + "---|" * len(backends))
    for (kernel, mode, dtype), cells in rows.items():
        lines.append(md_row([kernel, mode, dtype] + [_text(cells[b]) if b in cells else "-"
                                                     for b in backends]))
    return "\n".join(lines) + "\n"


def summary(rows, backends):
    """{backend: {outcome: number of rows}}."""
    out = {b: {o: 0 for o in ORDER} for b in backends}
    for cells in rows.values():
        for b, cell in cells.items():
            if b in out:
                out[b][cell["outcome"]] += 1
    return out


def write(path, rows, backends, meta):
    """Writes ``path``.md, .json and .png; returns (the files written, why the PNG was not:
    None or a sentence)."""
    import os
    base = path[:-3] if path.endswith(".md") else path
    os.makedirs(os.path.dirname(os.path.abspath(base)), exist_ok=True)
    with open(base + ".md", "w") as f:
        f.write(markdown(rows, backends, meta))
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "backends": list(backends),
                   "rows": [{"kernel": k, "mode": m, "dtype": d, "cells": cells}
                            for (k, m, d), cells in rows.items()]}, f, indent=1, default=str)
    written = [base + ".md", base + ".json"]
    try:
        heatmap(rows, backends, base + ".png")
    except ImportError:
        return written, ("no PNG: matplotlib is not installed (it comes with the peers extra: "
                         "pip install -e '.[peers]')")
    return written + [base + ".png"], None


_FOLDED = re.compile(r"\s*\b(NHWC|NCHW|NXC|NCX|[123]-D)\b")


def folded_rows(rows, backends):
    """The heat map's rows: (kernel, mode without its layout and rank) -> {backend: the worst
    outcome over the rows folded into it (dtypes, layouts, ranks)}."""
    folded = OrderedDict()
    for (kernel, mode, _), cells in rows.items():
        slot = folded.setdefault((kernel, _FOLDED.sub("", mode).strip()), {})
        for b, cell in cells.items():
            old = slot.get(b)
            if old is None or ORDER.index(cell["outcome"]) < ORDER.index(old):
                slot[b] = cell["outcome"]
    return OrderedDict((k, {b: v.get(b, "n/a") for b in backends}) for k, v in folded.items())


def heatmap(rows, backends, path):
    """The PNG; ImportError without matplotlib. Returns its size in pixels, its row labels and
    the smallest font size it uses (points)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    folded = folded_rows(rows, backends)
    labels = [f"{k}: {m}" for k, m in folded]
    grid = [[ORDER.index(folded[key][b]) for b in backends] for key in folded]
    dpi, row_in = 100, 0.3
    height = min(MAX_HEIGHT_PX / dpi, 2.6 + row_in * len(labels))
    fig, ax = plt.subplots(figsize=(4.8 + 0.95 * len(backends), height), dpi=dpi)
    ax.imshow(grid, aspect="auto", interpolation="nearest",
              cmap=ListedColormap([COLOURS[o] for o in ORDER]), vmin=-0.5,
              vmax=len(ORDER) - 0.5)
    for y, key in enumerate(folded):
        for x, b in enumerate(backends):
            outcome = folded[key][b]
            dark = outcome in ("bitwise", "error")
            ax.text(x, y, LABELS[outcome], ha="center", va="center", fontsize=FONT_PT,
                    color="white" if dark else "black")
    ax.set_xticks(range(len(backends)), backends, rotation=30, ha="right", fontsize=FONT_PT)
    ax.set_yticks(range(len(labels)), labels, fontsize=FONT_PT)
    ax.legend(handles=[Patch(color=COLOURS[o], label=f"{o} ({LABELS[o]})") for o in ORDER],
              fontsize=FONT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("backward kernels against TensorFlow (worst outcome over dtypes and layouts)",
                 fontsize=FONT_PT + 1)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    size = fig.get_size_inches() * dpi
    plt.close(fig)
    return {"width_px": int(round(size[0])), "height_px": int(round(size[1])),
            "rows": labels, "min_font_pt": FONT_PT}
