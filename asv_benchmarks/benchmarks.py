"""asv benchmarks: every kernel of tfcompat against TensorFlow, PyTorch and the NumPy reference,
on the workloads of docs/semantics.md §10.

Every class takes the thread count as a parameter (tfcompat's; TF and PyTorch fix their thread
pools when they start, so they are timed at 2 threads only). ``time_*`` and ``peakmem_*`` per
implementation, ``peakmem_reference`` the peak of a process that only holds the data (so
``peakmem_call`` minus it is what a call adds), and ``track_ratio`` tfcompat time / TF time
measured in the same process, interleaved (lower is better, as ``asv compare`` reads it).
Combinations an implementation lacks raise NotImplementedError in ``setup``.
"""
import time

import numpy as np

from . import impls as I
from .shapes import CONV, INTERP, RESIZE

THREADS = [1, 2]


def _ratio(ours, theirs, repeat=5):
    for f in (ours, theirs):
        f()
    a, b = [], []
    for _ in range(repeat):
        for f, acc in ((ours, a), (theirs, b)):
            t = time.perf_counter()
            f()
            acc.append(time.perf_counter() - t)
    return float(np.median(a) / np.median(b))


class _Base:
    timeout = 300
    number = 1
    repeat = (3, 7, 30.0)

    def _pick(self, funcs, impl, threads):
        if impl in ("tensorflow", "torch") and threads != 2:
            raise NotImplementedError("frameworks are timed with their default 2 threads only")
        if impl not in funcs:
            raise NotImplementedError(f"{impl} is not available for this combination")
        self.fn = funcs[impl]

    def time_call(self, *args):
        self.fn()

    def peakmem_call(self, *args):
        self.fn()

    def peakmem_reference(self, *args):
        pass


class ResizeBilinearGrad(_Base):
    params = [list(RESIZE), ["tfcompat", "tensorflow", "torch", "numpy-reference"],
              ["legacy", "align", "half"], THREADS]
    param_names = ["shape", "impl", "flags", "threads"]

    def setup(self, shape, impl, flags, threads):
        import tfcompat
        tfcompat.set_num_threads(threads)
        funcs, _ = I.make_resize(shape, "bilinear", flags, threads, np.random.default_rng(0),
                                 only=impl)
        self._pick(funcs, impl, threads)


class ResizeNearestNeighborGrad(_Base):
    params = [list(RESIZE), ["tfcompat", "tensorflow", "torch"], ["legacy", "align", "half"],
              THREADS]
    param_names = ["shape", "impl", "flags", "threads"]

    def setup(self, shape, impl, flags, threads):
        import tfcompat
        tfcompat.set_num_threads(threads)
        funcs, _ = I.make_resize(shape, "nearest", flags, threads, np.random.default_rng(0),
                                 only=impl)
        self._pick(funcs, impl, threads)


class InterpolateBackward(_Base):
    params = [list(INTERP), ["tfcompat", "torch"], ["NXC", "NCX"], THREADS]
    param_names = ["shape", "impl", "layout", "threads"]

    def setup(self, shape, impl, layout, threads):
        import tfcompat
        tfcompat.set_num_threads(threads)
        funcs, _ = I.make_interp(shape, layout, threads, np.random.default_rng(0), only=impl)
        self._pick(funcs, impl, threads)


class ResizeGrad(_Base):
    params = [list(RESIZE), ["tfcompat", "tensorflow"], THREADS]
    param_names = ["shape", "impl", "threads"]

    def setup(self, shape, impl, threads):
        import tfcompat
        tfcompat.set_num_threads(threads)
        funcs = I.make_resize_grad(shape, np.random.default_rng(0), only=impl)
        self._pick(funcs, impl, threads)


class Conv2DBackpropInput(_Base):
    params = [list(CONV), ["tfcompat", "tensorflow", "torch"],
              ["float32", "float16", "bfloat16", "float64"], THREADS]
    param_names = ["shape", "impl", "dtype", "threads"]

    def setup(self, shape, impl, dtype, threads):
        import tfcompat
        tfcompat.set_num_threads(threads)
        funcs, _ = I.make_conv(shape, dtype, threads, np.random.default_rng(0), only=impl)
        self._pick(funcs, impl, threads)


class RatioVsTensorFlow:
    """tfcompat time / TF time, same process, interleaved (lower is better)."""
    timeout = 600
    params = [list(RESIZE) + list(CONV), [2]]
    param_names = ["workload", "threads"]
    unit = "ratio"

    def setup(self, workload, threads):
        import tfcompat
        if I.tf_module() is None:
            raise NotImplementedError("TensorFlow is not installed")
        tfcompat.set_num_threads(threads)
        rng = np.random.default_rng(0)
        if workload in RESIZE:
            self.funcs, _ = I.make_resize(workload, "bilinear", "half", threads, rng)
        else:
            self.funcs, _ = I.make_conv(workload, "float32", threads, rng)

    def track_ratio(self, workload, threads):
        return _ratio(self.funcs["tfcompat"], self.funcs["tensorflow"])

    track_ratio.unit = "tfcompat/TF"
