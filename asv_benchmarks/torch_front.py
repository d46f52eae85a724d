"""The PyTorch front timed against PyTorch's own resize and TF's raw ops:
``python -m asv_benchmarks.compare torch``.

Per workload (T0, a tiny call, and R1-R4 of docs/semantics.md §10 as NCHW tensors), memory
format and TF mode: ``tfcompat.torch.resize`` against ``F.interpolate`` in the mode they share
(none for TF's legacy bilinear), each timed as a forward, as a backward (``torch.autograd.grad``
of a kept graph) and as both (a forward and ``y.backward``); and TF's ``ResizeBilinear``/
``ResizeNearestNeighbor`` and their grads on the same data (NHWC, eager). Ours is timed beside
each of the two in its own interleaved rounds, in one process.
"""
import math

import numpy as np

from . import impls as I
from .timing import median_interleaved, render
from .shapes import RESIZE

# a tiny call: the per-call overhead (issue: at most 2x PyTorch's forward and backward)
WORKLOADS = dict({"T0": ((1, 8, 8, 8), (1, 16, 16, 8))}, **RESIZE)
MODES = (("bilinear", "half"), ("bilinear", "align"), ("bilinear", "legacy"),
         ("nearest", "legacy"), ("nearest", "half"), ("nearest", "align"))
PASSES = ("forward", "backward", "both")


def make(sid, op, flags, layout, rng):
    """{pass: {impl: callable}} for one workload, mode and memory format."""
    import torch
    import torch.nn.functional as F
    import tfcompat.torch as tt
    (b, h, w, c), (_, oh, ow, _) = WORKLOADS[sid]
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x0 = torch.from_numpy(rng.standard_normal((b, c, h, w)).astype(np.float32))
    x = x0.clone().contiguous(memory_format=fmt).requires_grad_()
    g = torch.from_numpy(rng.standard_normal((b, c, oh, ow)).astype(np.float32)).contiguous(
        memory_format=fmt)
    align, half = I.FLAGS[flags]
    fns = {"tfcompat": lambda t: tt.resize(t, (oh, ow), op, align_corners=align,
                                           half_pixel_centers=half)}
    mode = I.TORCH_MODES.get((op, flags))
    if mode is not None:
        kw = {} if mode[1] is None else {"align_corners": mode[1]}
        fns["torch"] = lambda t: F.interpolate(t, size=(oh, ow), mode=mode[0], **kw)
    out = {p: {} for p in PASSES}
    xd = x.detach()
    for name, f in fns.items():
        y = f(x)
        out["forward"][name] = lambda f=f: f(xd)
        out["backward"][name] = lambda y=y: torch.autograd.grad(y, x, g, retain_graph=True)
        out["both"][name] = lambda f=f: f(x).backward(g)
    tf = I.tf_module()
    if tf is not None:
        xt = tf.constant(x0.permute(0, 2, 3, 1).numpy())
        gt = tf.constant(g.permute(0, 2, 3, 1).contiguous().numpy())
        if op == "bilinear":
            fwd = lambda: tf.raw_ops.ResizeBilinear(images=xt, size=[oh, ow], align_corners=align,
                                                    half_pixel_centers=half)
            bwd = lambda: tf.raw_ops.ResizeBilinearGrad(grads=gt, original_image=xt,
                                                        align_corners=align,
                                                        half_pixel_centers=half)
        else:
            fwd = lambda: tf.raw_ops.ResizeNearestNeighbor(images=xt, size=[oh, ow],
                                                           align_corners=align,
                                                           half_pixel_centers=half)
            bwd = lambda: tf.raw_ops.ResizeNearestNeighborGrad(grads=gt, size=[h, w],
                                                               align_corners=align,
                                                               half_pixel_centers=half)
        out["forward"]["tensorflow"] = lambda: fwd().numpy()
        out["backward"]["tensorflow"] = lambda: bwd().numpy()
    return out


def run(repeat, threads, warmup, workloads=None):
    import torch
    import tfcompat
    tfcompat.set_num_threads(threads)
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    rows = []
    for sid in workloads or WORKLOADS:
        for op, flags in MODES:
            for layout in ("contiguous", "channels_last"):
                funcs = make(sid, op, flags, layout, rng)
                for p in PASSES:
                    # ours against each of the others in its own interleaved rounds: a
                    # framework between our calls slows them (cold caches), so each ratio is
                    # taken beside the one framework it compares with
                    row = {"workload": sid, "mode": f"{op} {flags}", "layout": layout,
                           "pass": p}
                    for other, col in (("torch", "torch"), ("tensorflow", "tf")):
                        pair = {k: funcs[p][k] for k in ("tfcompat", other) if k in funcs[p]}
                        if len(pair) < 2:
                            row[f"{col}_ms"] = row[f"ours_{col}_ms"] = float("nan")
                            continue
                        t = median_interleaved(pair, repeat, warmup)
                        row[f"{col}_ms"] = t[other] * 1e3
                        row[f"ours_{col}_ms"] = t["tfcompat"] * 1e3
                    if math.isnan(row["ours_torch_ms"]) and math.isnan(row["ours_tf_ms"]):
                        t = median_interleaved({"tfcompat": funcs[p]["tfcompat"]}, repeat,
                                                warmup)
                        row["ours_torch_ms"] = t["tfcompat"] * 1e3
                    rows.append(row)
    return rows


def table(rows, markdown=False):
    def f(v, spec=".3f"):
        return "-" if math.isnan(v) else format(v, spec)
    head = ["workload", "mode", "layout", "pass", "ours ms", "torch ms", "torch/ours",
            "ours ms (beside TF)", "TF ms", "TF/ours"]
    body = [[r["workload"], r["mode"], r["layout"], r["pass"], f(r["ours_torch_ms"]),
             f(r["torch_ms"]), f(r["torch_ms"] / r["ours_torch_ms"], ".2f"),
             f(r["ours_tf_ms"]), f(r["tf_ms"]), f(r["tf_ms"] / r["ours_tf_ms"], ".2f")]
            for r in rows]
    return render(head, body, markdown, 4)
