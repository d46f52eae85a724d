"""asv benchmarks of tfcompat over commits, on the workloads of docs/semantics.md §10.

The suite tracks *our* kernels: every class takes tfcompat's thread count as a parameter, and
has ``time_call``, ``peakmem_call`` and ``peakmem_reference`` (the peak of a process that only
holds the data, so ``peakmem_call`` minus it is what a call adds). TensorFlow and PyTorch do
not change with our commits: they are timed beside us by ``python -m asv_benchmarks.compare``,
and here only as ``RatioVsTensorFlow.track_ratio`` (tfcompat time / TF time, measured in the
same process, interleaved; lower is better, as ``asv compare`` reads it).
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

    def time_call(self, *args):
        self.fn()

    def peakmem_call(self, *args):
        self.fn()

    def peakmem_reference(self, *args):
        pass


def _threads(threads):
    import tfcompat
    tfcompat.set_num_threads(threads)


class ResizeBilinearGrad(_Base):
    op = "bilinear"
    make = staticmethod(I.make_resize)
    params = [list(RESIZE), ["legacy", "align", "half"], THREADS]
    param_names = ["shape", "flags", "threads"]

    def setup(self, shape, flags, threads):
        _threads(threads)
        funcs, _ = self.make(shape, self.op, flags, threads, np.random.default_rng(0),
                             only="tfcompat")
        self.fn = funcs["tfcompat"]


class ResizeNearestNeighborGrad(ResizeBilinearGrad):
    op = "nearest"


class ResizeBilinear(ResizeBilinearGrad):
    """TF's forward resize of each workload's image to its dy's size."""
    make = staticmethod(I.make_forward)


class ResizeNearestNeighbor(ResizeBilinear):
    op = "nearest"


class InterpolateBackward(_Base):
    params = [list(INTERP), ["NXC", "NCX"], THREADS]
    param_names = ["shape", "layout", "threads"]

    def setup(self, shape, layout, threads):
        _threads(threads)
        funcs, _ = I.make_interp(shape, layout, threads, np.random.default_rng(0),
                                 only="tfcompat")
        self.fn = funcs["tfcompat"]


class ResizeGrad(_Base):
    params = [list(RESIZE), THREADS]
    param_names = ["shape", "threads"]

    def setup(self, shape, threads):
        _threads(threads)
        self.fn = I.make_resize_grad(shape, np.random.default_rng(0), only="tfcompat")["tfcompat"]


class Conv2DBackpropInput(_Base):
    params = [list(CONV), ["float32", "float16", "bfloat16", "float64"], THREADS]
    param_names = ["shape", "dtype", "threads"]

    def setup(self, shape, dtype, threads):
        _threads(threads)
        funcs, _ = I.make_conv(shape, dtype, threads, np.random.default_rng(0), only="tfcompat")
        self.fn = funcs["tfcompat"]


class RatioVsTensorFlow:
    """tfcompat time / TF time, same process, interleaved (lower is better). TF fixes its
    thread pools when it starts, so only its default (all cores) is measured."""
    timeout = 600
    params = [list(RESIZE) + list(CONV), [2]]
    param_names = ["workload", "threads"]
    unit = "ratio"

    def setup(self, workload, threads):
        if I.tf_module() is None:
            raise NotImplementedError("TensorFlow is not installed")
        _threads(threads)
        rng = np.random.default_rng(0)
        if workload in RESIZE:
            self.funcs, _ = I.make_resize(workload, "bilinear", "half", threads, rng)
        else:
            self.funcs, _ = I.make_conv(workload, "float32", threads, rng)

    def track_ratio(self, workload, threads):
        return _ratio(self.funcs["tfcompat"], self.funcs["tensorflow"])

    track_ratio.unit = "tfcompat/TF"


class TrainStepWithPlugin:
    """A Keras training step with ``tfcompat.tf.enable()`` over the same step with TF's own
    kernels (asv_benchmarks/train.py's models: each variant measured in its own process, one
    run; lower is better)."""
    timeout = 900
    params = [["a", "b", "c", "d"]]
    param_names = ["model"]
    unit = "ratio"

    def setup(self, model):
        if I.tf_module() is None:
            raise NotImplementedError("TensorFlow is not installed")

    def track_ratio(self, model):
        from . import train
        res = train.measure((model,), runs=1)[model]
        return res["plugin"][0]["step_ms"] / res["tf"][0]["step_ms"]

    track_ratio.unit = "plugin/TF"


class JaxFront(_Base):
    """``tfcompat.jax.resize`` under ``jax.jit`` (asv_benchmarks/jax_front.py's callables):
    the forward or the backward (the jitted vjp) of T0 (the per-call overhead) and R1-R4,
    half-pixel centres. The thread count is tfcompat's, at most XLA's pool."""
    params = [["T0"] + list(RESIZE), ["bilinear", "nearest"], ["forward", "backward"], THREADS]
    param_names = ["workload", "method", "pass", "threads"]

    def setup(self, workload, method, direction, threads):
        from . import jax_front
        _threads(threads)
        try:
            funcs = jax_front.make(workload, method, np.random.default_rng(0))
        except ImportError:
            raise NotImplementedError("JAX is not installed") from None
        self.fn = funcs[direction]["tfcompat"]
        self.fn()
