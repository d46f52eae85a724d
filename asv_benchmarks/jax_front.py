"""The JAX front timed against JAX's own resize and against tfcompat called directly:
``python -m asv_benchmarks.compare jax``.

Per workload (T0, a tiny call, and R1-R4 of docs/semantics.md §10, NHWC) and method, each pass
under ``jax.jit``: the forward, and the backward (the jitted vjp given a cotangent).
- ``jax``: ``jax.image.resize`` in the mode both have (half-pixel centres, ``antialias=False``:
  the same reads as TF's; JAX's default antialias would make a downscale a wider filter),
  timed beside ours in its own interleaved rounds.
- ``direct``: tfcompat's own NumPy call of the same kernel (``tfcompat.resize_bilinear`` ...),
  and ``empty``: a jitted negation of the input (JAX's dispatch of one small computation). The
  issue's overhead target on T0: ours at most ``empty + direct + 2 us``.

The sharded rows (:func:`sharded`): one workload's forward and backward under ``jit``, its
batch sharded over ``devices`` host devices against the same call on one device, timed
interleaved in a process of its own (XLA fixes the host device count when it starts).
"""
import json
import math
import os
import subprocess
import sys

import numpy as np

from . import impls as I
from .timing import median_interleaved, render
from .shapes import RESIZE

WORKLOADS = dict({"T0": ((1, 8, 8, 8), (1, 16, 16, 8))}, **RESIZE)
METHODS = ("bilinear", "nearest")
PASSES = ("forward", "backward")


def make(sid, method, rng):
    """{pass: {impl: callable returning when its result is ready}} for one workload."""
    import jax
    import tfcompat
    import tfcompat.jax as tj
    (b, h, w, c), (_, oh, ow, _) = WORKLOADS[sid]
    x = rng.standard_normal((b, h, w, c)).astype(np.float32)
    g = rng.standard_normal((b, oh, ow, c)).astype(np.float32)
    xj, gj = jax.device_put(x), jax.device_put(g)
    ours = lambda t: tj.resize(t, (oh, ow), method, half_pixel_centers=True)
    theirs = lambda t: jax.image.resize(t, (b, oh, ow, c), "linear" if method == "bilinear"
                                        else "nearest", antialias=False)
    out = {p: {} for p in PASSES}
    for name, f in (("tfcompat", ours), ("jax", theirs)):
        fwd = jax.jit(f)
        bwd = jax.jit(lambda t, u, f=f: jax.vjp(f, t)[1](u)[0])
        out["forward"][name] = lambda fwd=fwd: fwd(xj).block_until_ready()
        out["backward"][name] = lambda bwd=bwd: bwd(xj, gj).block_until_ready()
    neg_x, neg_g = jax.jit(lambda t: -t), jax.jit(lambda t, u: -t)
    out["forward"]["empty"] = lambda: neg_x(xj).block_until_ready()
    out["backward"]["empty"] = lambda: neg_g(xj, gj).block_until_ready()
    if method == "bilinear":
        out["forward"]["direct"] = lambda: tfcompat.resize_bilinear(
            x, [oh, ow], half_pixel_centers=True)
        out["backward"]["direct"] = lambda: tfcompat.resize_bilinear_grad(
            g, x, half_pixel_centers=True)
    else:
        out["forward"]["direct"] = lambda: tfcompat.resize_nearest_neighbor(
            x, [oh, ow], half_pixel_centers=True)
        out["backward"]["direct"] = lambda: tfcompat.resize_nearest_neighbor_grad(
            g, [h, w], half_pixel_centers=True)
    return out


def run(repeat, threads, warmup, workloads=None):
    import tfcompat
    tfcompat.set_num_threads(threads)
    rng = np.random.default_rng(0)
    rows = []
    for sid in workloads or WORKLOADS:
        for method in METHODS:
            funcs = make(sid, method, rng)
            for p in PASSES:
                row = {"workload": sid, "mode": f"{method} half", "pass": p}
                # ours beside JAX's, then beside the direct call and the empty jit
                t = median_interleaved({k: funcs[p][k] for k in ("tfcompat", "jax")}, repeat,
                                        warmup)
                row["ours_ms"], row["jax_ms"] = t["tfcompat"] * 1e3, t["jax"] * 1e3
                t = median_interleaved({k: funcs[p][k] for k in ("tfcompat", "direct",
                                                                   "empty")}, repeat, warmup)
                row["ours_direct_ms"] = t["tfcompat"] * 1e3
                row["direct_ms"], row["empty_ms"] = t["direct"] * 1e3, t["empty"] * 1e3
                rows.append(row)
    return rows


def sharded(repeat, warmup, devices=2, workload="R1"):
    """Rows of the sharded calls (see above), run in a subprocess with ``devices`` host
    devices."""
    flags = os.environ.get("XLA_FLAGS", "")
    env = dict(os.environ, XLA_FLAGS=f"{flags} --xla_force_host_platform_device_count="
                                     f"{devices}".strip())
    code = ("import json; from asv_benchmarks import jax_front as J; "
            f"print(json.dumps(J._sharded_rows({repeat}, {warmup}, {devices}, {workload!r})))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=root)
    if run.returncode != 0:
        raise RuntimeError(f"the sharded rows' process failed: {run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _sharded_rows(repeat, warmup, devices, workload):
    import jax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
    import tfcompat.jax as tj
    mesh = jax.make_mesh((devices,), ("d",), axis_types=(AxisType.Auto,),
                         devices=jax.devices()[:devices])
    (b, h, w, c), (_, oh, ow, _) = WORKLOADS[workload]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, h, w, c)).astype(np.float32)
    g = rng.standard_normal((b, oh, ow, c)).astype(np.float32)
    one = [jax.device_put(a, jax.devices()[0]) for a in (x, g)]
    split = [jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (x, g)]
    rows = []
    for method in METHODS:
        f = lambda t, method=method: tj.resize(t, (oh, ow), method, half_pixel_centers=True)
        calls = {"forward": jax.jit(lambda t, u: f(t)),
                 "backward": jax.jit(lambda t, u: jax.vjp(f, t)[1](u)[0])}
        for p, fn in calls.items():
            same = np.asarray(fn(*one)).tobytes() == np.asarray(fn(*split)).tobytes()
            t = median_interleaved({"one": lambda: fn(*one).block_until_ready(),
                                     "sharded": lambda: fn(*split).block_until_ready()},
                                    repeat, warmup)
            rows.append({"workload": workload, "mode": f"{method} half", "pass": p,
                         "devices": devices, "one_ms": t["one"] * 1e3,
                         "sharded_ms": t["sharded"] * 1e3, "same_bits": same})
    return rows


def sharded_table(rows, markdown=False):
    head = ["workload", "mode", "pass", "1 device ms", "batch over N devices ms", "N",
            "1 device / N", "same bits"]
    body = [[r["workload"], r["mode"], r["pass"], f"{r['one_ms']:.3f}", f"{r['sharded_ms']:.3f}",
             str(r["devices"]), f"{r['one_ms'] / r['sharded_ms']:.2f}", str(r["same_bits"])]
            for r in rows]
    return render(head, body, markdown, 3)


def table(rows, markdown=False):
    def f(v, spec=".3f"):
        return "-" if math.isnan(v) else format(v, spec)
    head = ["workload", "mode", "pass", "ours ms", "jax ms", "jax/ours", "ours ms (beside "
            "direct)", "direct ms", "empty jit ms", "ours - (empty + direct) us"]
    body = [[r["workload"], r["mode"], r["pass"], f(r["ours_ms"]), f(r["jax_ms"]),
             f(r["jax_ms"] / r["ours_ms"], ".2f"), f(r["ours_direct_ms"]), f(r["direct_ms"]),
             f(r["empty_ms"]),
             f((r["ours_direct_ms"] - r["empty_ms"] - r["direct_ms"]) * 1e3, ".1f")]
            for r in rows]
    return render(head, body, markdown, 3)


def meta_line(threads, repeat, warmup):
    import os
    import platform
    import jax
    import tfcompat
    return (f"# {platform.platform()}, {os.cpu_count()} CPUs, {threads} threads (tfcompat's; "
            f"XLA's pool as it is), median of {repeat} interleaved runs after {warmup} s of "
            f"interleaved warm-up; jax {jax.__version__}; tfcompat {tfcompat.kernel_build()} "
            f"kernels; TF {getattr(I.tf_module(), '__version__', None)}")
