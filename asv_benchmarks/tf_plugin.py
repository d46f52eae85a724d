"""tfcompat.tf's kernels against TF's own, in one process: ``python -m asv_benchmarks.tf_plugin``.

Each call is timed with TF's own kernel, then ``tfcompat.tf.enable()`` runs and the same calls
are timed again; the results are compared with TF's from before: bit for bit for the resize
grads, by the conformance metric for Conv2DBackpropInput (against TF's float32 result on the
same values, the harness's oracle, for a half type) (C1-C5 of docs/semantics.md §10 in
float32, float16 and bfloat16; ``--no-conv`` leaves them out). Enabling cannot be undone in a
process, hence a command of its own (run it in a fresh process).

``--latency [--hog]``: instead, the median and 90th percentile of single calls (a tiny and a
medium resize grad eagerly, eight medium ones in one ``tf.function``), TF's then ours; with
``--hog``, one busy process per CPU beside it (asv_benchmarks/threads.py's).
"""
import json
import os
import sys
import time

import numpy as np


def _time(f, n=None, rep=5):
    t = time.perf_counter()
    f()
    if n is None:   # calls of about 50 ms per round
        n = max(1, min(20, int(0.05 / max(time.perf_counter() - t, 1e-6))))
    runs = []
    for _ in range(rep):
        t = time.perf_counter()
        for _ in range(n):
            f()
        runs.append((time.perf_counter() - t) / n * 1e3)
    return float(np.median(runs))


def conv_inputs(tf, rng, dtypes):
    """C1-C5 of docs/semantics.md §10 in ``dtypes``: (workload, dtype, x shape, filter, dy,
    their TF constants, the op's strides and padding) each."""
    import ml_dtypes
    from asv_benchmarks.shapes import CONV, conv_out
    for dt in dtypes:
        npdt = ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)
        for cid, (x, w_shape, st, pad) in CONV.items():
            w = rng.standard_normal(w_shape).astype(npdt)
            dy = rng.standard_normal(conv_out(x, w_shape, st, pad)).astype(npdt)
            yield (cid, dt, x, w, dy, tf.constant(w), tf.constant(dy),
                   dict(strides=[1, st, st, 1], padding=pad))


def _conv_calls(tf, rng):
    """C1-C5's Conv2DBackpropInput in three dtypes: {name: (call, inputs, attrs, oracle)}."""
    from tfcompat.conv.problem import functional_attrs
    calls = {}
    for cid, dt, x, w, dy, wt, dyt, kw in conv_inputs(tf, rng,
                                                     ("float32", "float16", "bfloat16")):
        def call(x=x, wt=wt, dyt=dyt, kw=kw):
            return tf.raw_ops.Conv2DBackpropInput(input_sizes=list(x), filter=wt,
                                                  out_backprop=dyt, **kw).numpy()

        def oracle(x=x, w=w, dy=dy, kw=kw):
            # the harness's: TF in float32 on the same values (its float16 kernel's result is
            # farther than the metric from it)
            return tf.raw_ops.Conv2DBackpropInput(
                input_sizes=list(x), filter=w.astype(np.float32),
                out_backprop=dy.astype(np.float32), **kw).numpy()
        attrs = functional_attrs(list(x), w, dy, kw["strides"], kw["padding"], (), "NHWC",
                                 [1, 1, 1, 1])
        calls[f"Conv2DBackpropInput {cid} {dt}"] = (call, {"dy": dy, "filter": w}, attrs,
                                                    oracle)
    return calls


def _parallel(tf, gs, im):
    """A call of eight ResizeBilinearGrad in one tf.function (a new graph: it picks the
    kernels registered when it is made)."""
    fn = tf.function(lambda: [tf.raw_ops.ResizeBilinearGrad(grads=x, original_image=im)
                              for x in gs])
    return lambda: [t.numpy() for t in fn()]


def latency(hog):
    """{call: {"tf": (median us, p90 us), "ours": (...)}} of single calls."""
    import multiprocessing
    import tensorflow as tf
    import tfcompat.tf as ttf
    from asv_benchmarks.threads import _hog, _timed
    rng = np.random.default_rng(0)
    tiny = tf.constant(rng.standard_normal((1, 16, 16, 8)).astype(np.float32))
    tiny_im = tf.constant(np.zeros((1, 8, 8, 8), np.float32))
    gs = [tf.constant(rng.standard_normal((2, 64, 64, 16)).astype(np.float32)) for _ in range(8)]
    im = tf.constant(np.zeros((2, 32, 32, 16), np.float32))

    def calls():
        return {
            "ResizeBilinearGrad [1,16,16,8], eager": (lambda: tf.raw_ops.ResizeBilinearGrad(
                grads=tiny, original_image=tiny_im).numpy(), 1000),
            "ResizeBilinearGrad [2,64,64,16], eager": (lambda: tf.raw_ops.ResizeBilinearGrad(
                grads=gs[0], original_image=im).numpy(), 500),
            "8 ResizeBilinearGrad [2,64,64,16] in one tf.function": (_parallel(tf, gs, im), 200),
        }
    hogs = []
    if hog:
        ctx = multiprocessing.get_context("spawn")
        hogs = [ctx.Process(target=_hog, daemon=True) for _ in range(os.cpu_count() or 1)]
        for h in hogs:
            h.start()
    out = {}
    try:
        for variant in ("tf", "ours"):
            if variant == "ours":
                ttf.enable()
            for k, (f, n) in calls().items():
                for _ in range(20):
                    f()
                out.setdefault(k, {})[variant] = _timed(f, n)
    finally:
        for h in hogs:
            h.terminate()
    return out


def main():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "--latency" in sys.argv:
        hog = "--hog" in sys.argv
        res = latency(hog)
        print("median / p90 us" + (", one busy process per CPU beside" if hog else ""))
        for k, v in res.items():
            print(f"{k}: TF's {v['tf'][0]:.1f} / {v['tf'][1]:.1f}, ours {v['ours'][0]:.1f} / "
                  f"{v['ours'][1]:.1f}")
        return 0
    import tensorflow as tf
    import tfcompat.tf as ttf
    from conformance import metric
    rng = np.random.default_rng(0)
    g = tf.constant(rng.standard_normal((8, 128, 128, 32)).astype(np.float32))
    img = tf.constant(np.zeros((8, 64, 64, 32), np.float32))
    gt = tf.constant(rng.standard_normal((1, 16, 16, 8)).astype(np.float32))
    it = tf.constant(np.zeros((1, 8, 8, 8), np.float32))
    gs = [tf.constant(rng.standard_normal((2, 64, 64, 16)).astype(np.float32)) for _ in range(8)]
    im = tf.constant(np.zeros((2, 32, 32, 16), np.float32))

    calls = {
        "ResizeBilinearGrad legacy, grads [8,128,128,32]": lambda: tf.raw_ops.ResizeBilinearGrad(
            grads=g, original_image=img).numpy(),
        "ResizeBilinearGrad half pixel, grads [8,128,128,32]": lambda: tf.raw_ops.ResizeBilinearGrad(
            grads=g, original_image=img, half_pixel_centers=True).numpy(),
        "ResizeNearestNeighborGrad legacy, grads [8,128,128,32]":
            lambda: tf.raw_ops.ResizeNearestNeighborGrad(grads=g, size=[64, 64]).numpy(),
        "ResizeBilinearGrad, grads [1,16,16,8]": lambda: tf.raw_ops.ResizeBilinearGrad(
            grads=gt, original_image=it).numpy(),
    }
    name_par = "8 ResizeBilinearGrad [2,64,64,16] in one tf.function"
    calls[name_par] = _parallel(tf, gs, im)
    convs = {} if "--no-conv" in sys.argv else _conv_calls(tf, rng)
    calls.update({k: c[0] for k, c in convs.items()})
    before = {k: convs[k][3]() if k in convs else f() for k, f in calls.items()}
    tf_ms = {k: _time(f) for k, f in calls.items()}
    ttf.enable("all")
    calls[name_par] = _parallel(tf, gs, im)    # a new graph: our kernels
    rows = []
    for k, f in calls.items():
        python0 = ttf.enabled()["conv_calls_through_python"]
        got = f()
        want = before[k]
        row = {"call": k}
        if k in convs:
            _, inputs, attrs, _ = convs[k]
            scale = metric.magnitude("Conv2DBackpropInput", inputs, attrs)
            row["within_metric"] = bool(metric.compare(got, want, scale, got.dtype).passed)
            row["in_c"] = ttf.enabled()["conv_calls_through_python"] == python0
        else:
            row["bits_equal"] = all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
                                    for a, b in zip(want if isinstance(want, list) else [want],
                                                    got if isinstance(got, list) else [got]))
        ours = _time(f)
        row.update({"tf_ms": tf_ms[k], "ours_ms": ours, "tf_over_ours": tf_ms[k] / ours})
        rows.append(row)
    out = {"rows": rows, "calls": ttf.enabled()["calls"],
           "os_threads": len(os.listdir("/proc/self/task"))}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
