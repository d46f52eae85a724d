"""asv benchmarks: every kernel of tfcompat against TensorFlow, PyTorch and the NumPy
reference, on the SPEC.md section 7 workloads.

``time_*`` and ``peakmem_*`` per implementation; ``track_*_ratio`` records tfcompat time / TF
time measured in the same process, interleaved (lower is better, so ``asv compare`` reads it
right). Combinations an implementation lacks raise NotImplementedError in ``setup``.
"""
import time

import numpy as np

from . import impls as I
from .shapes import CONV, INTERP, RESIZE

IMPLS = ["tfcompat", "tensorflow", "torch", "numpy-reference"]


def _numpy_reference(kernel):
    import tfcompat
    return tfcompat.get_kernel(kernel, "numpy").kernel_func


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

    @staticmethod
    def _check(impl, threads):
        if impl in ("tensorflow", "torch") and threads != 2:
            # TF fixes its thread pools when it starts; only tfcompat's thread count is a parameter
            raise NotImplementedError("frameworks are timed with their default threads only")

    def _pick(self, funcs, impl, threads=2):
        if impl not in funcs:
            raise NotImplementedError(f"{impl} is not available for this combination")
        self.fn = funcs[impl]

    def time_call(self, *args):
        self.fn()

    def peakmem_call(self, *args):
        self.fn()


THREADS = 2  # per-implementation classes; ThreadScaling varies tfcompat's thread count


class ResizeBilinearGrad(_Base):
    params = [list(RESIZE), IMPLS, ["legacy", "align", "half"]]
    param_names = ["shape", "impl", "flags"]

    def setup(self, shape, impl, flags, threads=THREADS):
        import tfcompat
        tfcompat.set_num_threads(threads)
        self._check(impl, threads)
        funcs, _ = I.make_resize(shape, "bilinear", flags, threads, np.random.default_rng(0), only=impl)
        if impl == "numpy-reference":
            img, dy = RESIZE[shape]
            k = _numpy_reference("ResizeBilinearGrad")
            a, h = I.FLAGS[flags]
            d = np.random.default_rng(0).standard_normal(dy).astype(np.float32)
            funcs[impl] = lambda: k({"dy": d, "images": np.zeros(img, np.float32)},
                                    {"alignCorners": a, "halfPixelCenters": h})
        self._pick(funcs, impl, threads)


class ResizeNearestNeighborGrad(ResizeBilinearGrad):
    params = [list(RESIZE), ["tfcompat", "tensorflow", "torch"], ["legacy", "align", "half"]]

    def setup(self, shape, impl, flags, threads=THREADS):
        import tfcompat
        tfcompat.set_num_threads(threads)
        self._check(impl, threads)
        funcs, _ = I.make_resize(shape, "nearest", flags, threads, np.random.default_rng(0), only=impl)
        if impl == "numpy-reference":
            raise NotImplementedError("timed only for bilinear")
        self._pick(funcs, impl, threads)


class InterpolateBackward(_Base):
    params = [list(INTERP), ["tfcompat", "torch"], ["NXC", "NCX"]]
    param_names = ["shape", "impl", "layout"]

    def setup(self, shape, impl, layout, threads=THREADS):
        import tfcompat
        tfcompat.set_num_threads(threads)
        self._check(impl, threads)
        funcs, _ = I.make_interp(shape, layout, threads, np.random.default_rng(0), only=impl)
        self._pick(funcs, impl, threads)


class ResizeGrad(_Base):
    params = [list(RESIZE), ["tfcompat", "tensorflow"]]
    param_names = ["shape", "impl"]

    def setup(self, shape, impl, threads=THREADS):
        import tfcompat
        tfcompat.set_num_threads(threads)
        img, dy = RESIZE[shape]
        d = np.ascontiguousarray(np.random.default_rng(0).standard_normal(dy).astype(np.float32)
                                 .transpose(0, 3, 1, 2))
        x = np.zeros((img[0], img[3], img[1], img[2]), np.float32)
        backend = "cython" if impl == "tfcompat" else "tensorflow"
        if backend == "tensorflow" and (threads != 2 or I.tf_module() is None):
            raise NotImplementedError("TensorFlow missing, or a thread count TF cannot change")
        self.fn = lambda: tfcompat.resize_grad(d, x, backend=backend)


class Conv2DBackpropInput(_Base):
    params = [list(CONV), ["tfcompat", "tensorflow", "torch"],
              ["float32", "float16", "bfloat16", "float64"]]
    param_names = ["shape", "impl", "dtype"]

    def setup(self, shape, impl, dtype, threads=THREADS):
        import tfcompat
        tfcompat.set_num_threads(threads)
        self._check(impl, threads)
        funcs, _ = I.make_conv(shape, dtype, threads, np.random.default_rng(0), only=impl)
        self._pick(funcs, impl, threads)


class ThreadScaling(_Base):
    """tfcompat alone at 1 and 2 threads (results are bitwise equal; only time changes)."""
    params = [list(RESIZE) + list(INTERP) + list(CONV), [1, 2]]
    param_names = ["workload", "threads"]

    def setup(self, workload, threads):
        import tfcompat
        tfcompat.set_num_threads(threads)
        rng = np.random.default_rng(0)
        if workload in RESIZE:
            funcs, _ = I.make_resize(workload, "bilinear", "half", threads, rng, only="tfcompat")
        elif workload in INTERP:
            funcs, _ = I.make_interp(workload, "NXC", threads, rng, only="tfcompat")
        else:
            funcs, _ = I.make_conv(workload, "float32", threads, rng, only="tfcompat")
        self.fn = funcs["tfcompat"]


class RatioVsTensorFlow:
    """tfcompat time / TF time, same process, interleaved (lower is better)."""
    timeout = 600
    params = [list(RESIZE) + list(CONV)]
    param_names = ["workload"]
    unit = "ratio"

    def setup(self, workload):
        if I.tf_module() is None:
            raise NotImplementedError("TensorFlow is not installed")
        rng = np.random.default_rng(0)
        if workload in RESIZE:
            self.funcs, _ = I.make_resize(workload, "bilinear", "half", 2, rng)
        else:
            self.funcs, _ = I.make_conv(workload, "float32", 2, rng)

    def track_ratio(self, workload):
        return _ratio(self.funcs["tfcompat"], self.funcs["tensorflow"])

    track_ratio.unit = "tfcompat/TF"
