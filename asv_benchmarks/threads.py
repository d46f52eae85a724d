"""What a kernel call costs from whichever thread calls it (docs/performance.md#threads).

    python -m asv_benchmarks.threads [--threads 2] [--calls 3000] [--tf] [--hog]

A tiny ``resize_bilinear_grad`` (grads [1, 8, 8, 8] from a [1, 4, 4, 8] image) timed, median
and 90th percentile of ``--calls`` calls each: on the main thread; on another Python thread;
on the main thread again; with ``--tf``, inside ``tf.numpy_function`` (a TF executor thread
calls it; the whole TF call is timed) and on the main thread after that. Then a medium call
(grads [2, 64, 64, 16]) from four Python threads at once, and the threads the process gained
(the kernels' team: ``--threads`` - 1). ``--hog`` runs one busy process per CPU beside it all,
for the p90 on a busy host.
"""
import argparse
import multiprocessing
import os
import statistics
import threading
import time

import numpy as np

import tfcompat as T


def _timed(fn, calls):
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return statistics.median(ts) * 1e6, ts[int(0.9 * len(ts))] * 1e6


def _on_thread(fn, calls):
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("v", _timed(fn, calls)))
    th.start()
    th.join()
    return out["v"]


def _hog():
    while True:
        pass


def _tasks():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--tf", action="store_true")
    ap.add_argument("--hog", action="store_true")
    a = ap.parse_args(argv)
    T.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    g = rng.standard_normal((1, 8, 8, 8), dtype=np.float32)
    img = np.zeros((1, 4, 4, 8), np.float32)

    def tiny():
        return T.resize_bilinear_grad(g, img, half_pixel_centers=True)

    hogs = []
    if a.hog:
        ctx = multiprocessing.get_context("spawn")
        hogs = [ctx.Process(target=_hog, daemon=True) for _ in range(os.cpu_count() or 1)]
        for h in hogs:
            h.start()
    tasks0 = _tasks()
    rows = []
    try:
        _timed(tiny, 200)
        rows.append(("tiny, main thread", _timed(tiny, a.calls)))
        rows.append(("tiny, another Python thread", _on_thread(tiny, a.calls)))
        rows.append(("tiny, main thread again", _timed(tiny, a.calls)))
        if a.tf:
            import tensorflow as tf
            f = tf.function(lambda x: tf.numpy_function(
                lambda v: T.resize_bilinear_grad(v, img, half_pixel_centers=True), [x],
                tf.float32))
            x = tf.constant(g)
            _timed(lambda: f(x), 100)
            rows.append(("tiny in tf.numpy_function (whole TF call)",
                         _timed(lambda: f(x), a.calls // 3)))
            rows.append(("tiny, main thread after TF ran it", _timed(tiny, a.calls)))
        dy = rng.standard_normal((2, 64, 64, 16), dtype=np.float32)
        big = np.zeros((2, 32, 32, 16), np.float32)
        medium = []

        def worker():
            medium.append(_timed(lambda: T.resize_bilinear_grad(dy, big), a.calls // 30))

        ths = [threading.Thread(target=worker) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        rows.append(("medium, 4 Python threads at once (worst)",
                     max(medium, key=lambda m: m[0])))
    finally:
        for h in hogs:
            h.terminate()
    print(f"{a.threads} threads{' beside ' + str(len(hogs)) + ' busy processes' if hogs else ''}"
          f"; tfcompat {T.kernel_build()}")
    for name, (med, p90) in rows:
        print(f"  {name:45s} median {med:8.1f} us   p90 {p90:8.1f} us")
    if tasks0 is not None:
        print(f"  threads the process gained: {_tasks() - tasks0}"
              f"{' (TF started its own pools too)' if a.tf else ''}")


if __name__ == "__main__":
    main()
