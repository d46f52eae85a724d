"""TF's Conv2DBackpropInput called eagerly (as ``compare conv`` calls it) and inside a
``tf.function`` (as training runs it), beside tfcompat's call: ``python -m
asv_benchmarks.tf_graph``. C1-C5 in float32 and bfloat16, one process; each of 3 rounds times
the three in turn (medians of 5 timings each). The graph runs the conv 4 times on dy * k and
keeps one value of each, and the same graph without the conv is timed and subtracted.
"""
import os
import sys

import numpy as np


def main():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tfcompat
    from asv_benchmarks.tf_plugin import _time, conv_inputs
    rng = np.random.default_rng(0)
    print("| workload | dtype | TF eager ms | TF in tf.function ms | ours ms | eager/graph |")
    print("|---|---|---|---|---|---|")
    for cid, dt, x, w, dy, wt, dyt, kw in conv_inputs(tf, rng, ("float32", "bfloat16")):
        def eager(x=x, wt=wt, dyt=dyt, kw=kw):
            return tf.raw_ops.Conv2DBackpropInput(input_sizes=list(x), filter=wt,
                                                  out_backprop=dyt, **kw).numpy()

        @tf.function
        def convs(x=x, wt=wt, dyt=dyt, kw=kw):
            return tf.stack([tf.raw_ops.Conv2DBackpropInput(
                input_sizes=list(x), filter=wt, out_backprop=dyt * (1 + i), **kw)[0, 0, 0, 0]
                for i in range(4)])

        @tf.function
        def scaled(dyt=dyt):
            return tf.stack([(dyt * (1 + i))[0, 0, 0, 0] for i in range(4)])

        def ours(x=x, w=w, dy=dy, kw=kw):
            return tfcompat.conv2d_backprop_input(list(x), w, dy, **kw)
        calls = {"eager": (eager, 2), "graph": (lambda: convs().numpy(), 1),
                 "scaled": (lambda: scaled().numpy(), 1), "ours": (ours, 2)}
        for f, _ in calls.values():
            f()
        res = {k: [] for k in calls}
        for _ in range(3):
            for k, (f, n) in calls.items():
                res[k].append(_time(f, n) / (4 if k in ("graph", "scaled") else 1))
        med = {k: float(np.median(v)) for k, v in res.items()}
        graph = med["graph"] - med["scaled"]
        print(f"| {cid} | {dt} | {med['eager']:.2f} | {graph:.2f} | {med['ours']:.2f} | "
              f"{med['eager'] / graph:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
