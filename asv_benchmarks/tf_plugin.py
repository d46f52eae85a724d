"""tfcompat.tf's kernels against TF's own, in one process: ``python -m asv_benchmarks.tf_plugin``.

Each call is timed with TF's own kernel, then ``tfcompat.tf.enable()`` runs and the same calls
are timed again; the results are compared bit for bit with TF's from before. Enabling cannot be
undone in a process, hence a command of its own (run it in a fresh process).
"""
import json
import os
import sys
import time

import numpy as np


def _time(f, n=20, rep=5):
    f()
    runs = []
    for _ in range(rep):
        t = time.perf_counter()
        for _ in range(n):
            f()
        runs.append((time.perf_counter() - t) / n * 1e3)
    return float(np.median(runs))


def main():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tfcompat.tf as ttf
    rng = np.random.default_rng(0)
    g = tf.constant(rng.standard_normal((8, 128, 128, 32)).astype(np.float32))
    img = tf.constant(np.zeros((8, 64, 64, 32), np.float32))
    gt = tf.constant(rng.standard_normal((1, 16, 16, 8)).astype(np.float32))
    it = tf.constant(np.zeros((1, 8, 8, 8), np.float32))
    gs = [tf.constant(rng.standard_normal((2, 64, 64, 16)).astype(np.float32)) for _ in range(8)]
    im = tf.constant(np.zeros((2, 32, 32, 16), np.float32))

    def parallel():
        fn = tf.function(lambda: [tf.raw_ops.ResizeBilinearGrad(grads=x, original_image=im)
                                  for x in gs])
        return lambda: [t.numpy() for t in fn()]

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
    calls[name_par] = parallel()
    before = {k: f() for k, f in calls.items()}
    tf_ms = {k: _time(f) for k, f in calls.items()}
    ttf.enable()
    calls[name_par] = parallel()    # a new graph, which picks our kernels
    rows = []
    for k, f in calls.items():
        got = f()
        want = before[k]
        same = all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
                   for a, b in zip(want if isinstance(want, list) else [want],
                                   got if isinstance(got, list) else [got]))
        ours = _time(f)
        rows.append({"call": k, "tf_ms": tf_ms[k], "ours_ms": ours,
                     "tf_over_ours": tf_ms[k] / ours, "bits_equal": same})
    out = {"rows": rows, "calls": ttf.enabled()["calls"],
           "os_threads": len(os.listdir("/proc/self/task"))}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
