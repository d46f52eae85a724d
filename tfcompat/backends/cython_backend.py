"""The ``cython`` backend: the product.

Every kernel function validates through the parsers (tfcompat/_resample.py,
tfcompat/conv/problem.py, tfcompat/_forward.py), then runs one plan (tfcompat/csrc/plan.pxi;
the conv's strategies: tfcompat/conv/; the forward resizes: tfcompat/csrc/forward.pxi).

Repeated calls: a resampling call whose inputs are NumPy arrays in the machine's byte order
and whose attributes are plain values has a *call key* holding everything the parser reads
(dtypes, shapes, attribute values and their types, the values of parameter inputs such as
``scales``). A key seen before goes straight to its plan, with no parsing; any other call is
parsed, and its plan is found by its layout. Both live in one bounded cache (tfcompat/_plans.py:
256 plans, 64 MiB of tables, oldest out first), so a training loop
validates once and memory stays bounded.
The conv keeps the tables that depend on its shapes only in the same cache.
"""
import math

import numpy as np

from .. import _checks as ck, _forward as fw, _memory, _resample as rs, _tables
from .._arrays import round_to, to_float32
from .._plans import PLANS as _PLANS
from .._simd import kernels as _kernels
from .._threads import kernel_threads, most_threads
from ..conv.problem import conv_problem
from ..conv.run import run_conv
from ..kernel_names import (CONV2D_BACKPROP_INPUT, INTERPOLATE_BACKWARD, PARAMETER_INPUTS,
                            RESIZE_BILINEAR, RESIZE_BILINEAR_GRAD, RESIZE_GRAD,
                            RESIZE_NEAREST_NEIGHBOR, RESIZE_NEAREST_NEIGHBOR_GRAD)
from ..registry import KernelConfig

BACKEND = "cython"
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
Kind = _kernels.ResampleKind

# ---------------------------------------------------------------------------------------------
# Resampling: plans and the one bounded cache
# ---------------------------------------------------------------------------------------------

# (linear, the dtype the kernel reads, the dtype it sums in) -> kernel kind; integer nearest
# grads are summed as unsigned integers of their width, whose sums wrap as TF's do
_KINDS = {
    (True, F32, F32): Kind.LINEAR_F32, (True, F32, F64): Kind.LINEAR_F32_F64,
    (True, F64, F64): Kind.LINEAR_F64,
    (False, F32, F32): Kind.NEAREST_F32, (False, F64, F64): Kind.NEAREST_F64,
    (False, np.dtype(np.uint8), np.dtype(np.uint8)): Kind.NEAREST_U8,
    (False, np.dtype(np.int8), np.dtype(np.int8)): Kind.NEAREST_U8,
    (False, np.dtype(np.int32), np.dtype(np.int32)): Kind.NEAREST_U32,
}


class ResamplePlan:
    """What a validated resampling layout needs at run time: the compiled plan (sizes, tables,
    kernel kind), dy's and dx's dtypes and the conversions between them and the kernel's.

    ``plan(dy, num_threads)`` returns dx. ``dy`` has the layout's dtype and shape (the parser
    or the call key proved it); an aligned C-contiguous dy whose dx needs no rounding goes to
    the kernel as it is."""

    __slots__ = ("kernel", "empty", "out_shape", "out_dtype", "src_dtype", "acc_dtype",
                 "widen", "direct", "work_per_thread", "nbytes", "run_bytes", "out_name",
                 "large")

    def __init__(self, layout):
        self.out_shape = layout.out_shape
        self.out_dtype = layout.out_dtype
        self.empty = layout.empty
        self.kernel = None
        self.nbytes = 0
        if self.empty:
            return
        dt = layout.dy_dtype
        if dt.kind in "iu":
            src = acc = dt
        else:
            acc = layout.compute_dtype
            # a linear resize reads float32 or float64 grads; a nearest one sums in the type
            # it reads; float16/bfloat16 grads are widened to float32 first
            src = (F64 if dt == F64 else F32) if layout.linear else acc
        self.src_dtype, self.acc_dtype = src, acc
        self.widen = dt != src
        self.direct = not self.widen and (acc == self.out_dtype)
        if layout.channels_last:
            rows_b, channels = layout.batch, layout.channels
        else:
            rows_b, channels = layout.batch * layout.channels, 1
        axes = (None,) * (3 - len(layout.axes)) + tuple(layout.axes)
        ins = tuple(1 if a is None else a.in_size for a in axes)
        outs = tuple(1 if a is None else a.out_size for a in axes)
        kind = _KINDS[(layout.linear, src, acc)]
        # NCX float32 linear: each thread transposes eight channel rows into scratch
        self.work_per_thread = ((outs[2] + ins[2]) * 8
                                if kind == Kind.LINEAR_F32 and channels == 1 else 0)
        self.out_name = _OUT_NAMES[layout.kernel]
        gather_runs = kind == Kind.NEAREST_F32
        build, kept, self.run_bytes = _resample_peak(layout, self, channels, gather_runs)
        # a call's peak may reach the checked size (with the most threads): check each call
        self.large = (self.run_bytes + 4 * self.work_per_thread * most_threads()
                      >= _memory.CHECK_FROM_BYTES)
        _memory.check_peak(max(build, kept + self.run_bytes), self.out_name,
                           f"{kept / 2**30:.2f} GiB of index tables ({build / 2**30:.2f} GiB "
                           f"while built), {self.run_bytes / 2**30:.2f} GiB of output, "
                           "accumulator and copies of dy")
        tables = _tables.resample_tables(layout.axes, channels, gather_runs)
        self.kernel = _kernels.ResamplePlan(kind, (rows_b,) + ins + outs + (channels,), tables,
                                            self.work_per_thread)
        self.nbytes = tables.nbytes

    def __call__(self, dy, nthreads, out=None):
        """dx, written into ``out`` when given (C-contiguous, aligned, of the output's dtype
        and shape: the PyTorch front's tensor)."""
        if self.empty:
            if out is None:
                return np.zeros(self.out_shape, dtype=self.out_dtype)
            out.fill(0)
            return out
        flags = dy.flags
        contiguous = flags.c_contiguous and flags.aligned
        if self.large or not contiguous:
            peak = (self.run_bytes + 4 * self.work_per_thread * nthreads
                    + (0 if contiguous else dy.nbytes))
            _memory.check_peak(peak, self.out_name, "the output, its accumulator and copies "
                               "of dy")
        work = (np.empty(self.work_per_thread * nthreads, F32) if self.work_per_thread
                else None)
        if self.direct and contiguous:
            dx = _memory.empty(self.out_shape, self.out_dtype) if out is None else out
            self.kernel.run(dy, dx, nthreads, work)
            return dx
        if self.widen:
            src = to_float32(dy, nthreads)
        else:
            src = np.require(dy, requirements="CA")
        if out is not None and self.acc_dtype == self.out_dtype:
            self.kernel.run(src, out, nthreads, work)
            return out
        dx = _memory.empty(self.out_shape, self.acc_dtype)
        self.kernel.run(src, dx, nthreads, work)
        if dx.dtype == self.out_dtype:
            return dx
        return round_to(dx, self.out_dtype, nthreads, out)


# the registry's name of each resampling kernel's output-sizing input, for memory errors
_OUT_NAMES = {RESIZE_BILINEAR_GRAD: "images", RESIZE_NEAREST_NEIGHBOR_GRAD: "images",
              INTERPOLATE_BACKWARD: "src", RESIZE_GRAD: "X"}


def _resample_peak(layout, plan, channels, gather_runs):
    """(bytes at the peak of building the tables, bytes of the tables kept, bytes a call
    allocates) of a resampling plan: docs/semantics.md §11's formula. Per outer axis (in, out
    its dx and dy sizes; n its gather entries, out for nearest, at most 2 out for linear) the
    build holds the forward map (16 out linear, 8 out nearest), the offsets 4 (in + 1), a
    cursor 4 in and the entries 16 n, and keeps the offsets and 16 n (linear) or 4 n
    (nearest); the innermost axis keeps its forward map (16 out, or 4 out), with the float32
    nearest gather's column runs 4 (in + 1) (20 (in + 1) while built). A call allocates dx,
    the float32 or float64 accumulator a rounded dx is summed in, and a float32 copy of a
    half-type dy; a dy that is not C-contiguous and aligned adds a copy of itself, and the
    NCX float32 kernel its threads' scratch rows."""
    axes = layout.axes
    kept = build = 0
    for i, a in enumerate(axes):
        n_in, n_out = a.in_size, a.out_size
        if i == len(axes) - 1:
            step = 16 * n_out if layout.linear else 4 * n_out
            extra = 4 * (n_in + 1) if gather_runs and 8 <= channels <= _tables.WINDOW_MAX_C else 0
            build = max(build, kept + step + 5 * extra)
            kept += step + extra
            continue
        n = 2 * n_out if layout.linear else n_out
        build = max(build, kept + (16 if layout.linear else 8) * n_out + 8 * n_in + 4 + 16 * n)
        kept += 4 * (n_in + 1) + (16 if layout.linear else 4) * n
    elems = 1
    for d in layout.out_shape:
        elems *= d
    dy_elems = layout.batch * layout.channels
    for a in axes:
        dy_elems *= a.out_size
    run = elems * plan.out_dtype.itemsize
    if not plan.direct and plan.acc_dtype != plan.out_dtype:
        run += elems * plan.acc_dtype.itemsize
    if plan.widen:
        run += dy_elems * 4
    return build, kept, run


class _Unkeyable(Exception):
    pass


def _freeze(value):
    """A hashable, type-exact stand-in for an attribute or parameter value."""
    t = type(value)
    if value is None or t in (bool, int, float, str):
        return (t, value)
    if t in (list, tuple):
        return (t, tuple(_freeze(v) for v in value))
    if (t is np.ndarray and value.dtype.kind in "biuf" and value.dtype.isnative
            and value.size <= 64):
        return (t, value.dtype, value.shape, value.tobytes())
    raise _Unkeyable


def call_key(kernel_name, inputs, attrs):
    """The call key (see the module docstring), or None for a call it cannot describe: one
    whose inputs are not NumPy arrays, or whose attributes are not plain values."""
    if type(inputs) is not dict or type(attrs) is not dict:
        return None
    params = PARAMETER_INPUTS.get(kernel_name, ())
    parts = [kernel_name]
    try:
        for name, value in inputs.items():
            if name in params:
                parts.append((name, _freeze(value)))
            elif type(value) is np.ndarray and value.dtype.isnative:
                # (the other byte order is converted by the parser, so never skips it)
                parts.append((name, value.dtype, value.shape))
            elif value is None:
                parts.append((name, None))
            else:
                return None
        for name, value in attrs.items():
            t = type(value)
            parts.append((name, t, value) if t is bool or t is str else (name, _freeze(value)))
    except _Unkeyable:
        return None
    return tuple(parts)


def _resample(kernel_name, dy_name, parser, inputs, attrs):
    key = call_key(kernel_name, inputs, attrs)
    plan = None if key is None else _PLANS.get(key)
    if plan is not None:
        return plan(inputs[dy_name], kernel_threads())
    problem = parser(inputs, attrs)
    plan = resample_plan(problem.layout)
    if key is not None:
        _PLANS.put(key, plan)
    return plan(problem.dy, kernel_threads())


def resample_plan(layout):
    """The cached :class:`ResamplePlan` of a validated layout."""
    return _PLANS.get_or_make(layout, lambda: ResamplePlan(layout))


def resize_bilinear_grad(inputs, attrs):
    return _resample(RESIZE_BILINEAR_GRAD, "dy", rs.resize_bilinear_grad_problem, inputs, attrs)


def resize_nearest_neighbor_grad(inputs, attrs):
    return _resample(RESIZE_NEAREST_NEIGHBOR_GRAD, "dy", rs.resize_nearest_neighbor_grad_problem,
                     inputs, attrs)


def interpolate_backward(inputs, attrs):
    return _resample(INTERPOLATE_BACKWARD, "diff_dst", rs.interpolate_backward_problem, inputs,
                     attrs)


def resize_grad(inputs, attrs):
    return _resample(RESIZE_GRAD, "dY", rs.resize_grad_problem, inputs, attrs)


def conv2d_backprop_input(inputs, attrs):
    return run_conv(conv_problem(inputs, attrs))


# -- the forward resizes ---------------------------------------------------------------------

class ForwardPlan:
    """The axis tables of a forward resize (coords.pxi's maps: TF's lower and upper source
    index and lerp per output index, or the nearest source index), per kernel and axes."""

    __slots__ = ("tables", "nbytes")

    def __init__(self, problem):
        maps = []
        for a in problem.axes:
            fwd = _tables.forward_map(a)
            # linear: lo, hi and w_hi, TF's lerp; nearest: the index
            maps += [fwd[0], fwd[1], fwd[3]] if problem.linear else [fwd[0]]
        self.tables = tuple(maps)
        self.nbytes = sum(t.nbytes for t in maps)

    def __call__(self, problem, nthreads, out=None):
        """The resized images, written into ``out`` when given (C-contiguous, aligned, of the
        problem's output dtype and shape: the PyTorch front's tensor). A bilinear problem whose
        output dtype is float64 (the PyTorch front's float64) computes in float64."""
        images = problem.images
        out_bytes = math.prod(problem.out_shape) * problem.out_dtype.itemsize
        widen = problem.linear and images.dtype in (ck.FLOAT16, ck.BFLOAT16)
        copy = 0 if images.flags.c_contiguous and images.flags.aligned else images.nbytes
        # dx, a float32 copy of a half-type image, or a copy of a strided one; each thread's
        # two lerped rows
        peak = ((0 if out is not None else out_bytes) + (images.size * 4 if widen else copy)
                + 2 * problem.out_dtype.itemsize * problem.out_shape[2] * problem.out_shape[3]
                * nthreads)
        if peak >= _memory.CHECK_FROM_BYTES:
            _memory.check_peak(peak, "size", "the output and the images' copies")
        if out is None:
            out = _memory.empty(problem.out_shape, problem.out_dtype)
        if widen:
            src = to_float32(images, nthreads)
        else:
            src = np.require(images, requirements="CA")
        self.run(src, out, nthreads)
        return out

    def run(self, src, out, nthreads):
        """The kernel alone: src C-contiguous and aligned, of a type it reads; out C-contiguous,
        of the type it writes (the caller proved both, and the memory)."""
        if len(self.tables) == 6:
            _kernels.bilinear_forward(src, out, *self.tables, nthreads)
        else:
            _kernels.nearest_forward(src, out, *self.tables, nthreads)


def _forward(problem):
    if problem.empty:
        return np.zeros(problem.out_shape, problem.out_dtype)
    if problem.linear and problem.identity:
        # TF casts an image resized to its own size (docs/semantics.md §12)
        return problem.images.astype(F32)
    return forward_plan(problem)(problem, kernel_threads())


def forward_plan(problem):
    """The cached :class:`ForwardPlan` of a forward problem (its tables depend on the axes)."""
    return _PLANS.get_or_make(("forward", problem.kernel, problem.axes),
                              lambda: ForwardPlan(problem))


def resize_bilinear(inputs, attrs):
    return _forward(fw.resize_bilinear_problem(inputs, attrs))


def resize_nearest_neighbor(inputs, attrs):
    return _forward(fw.resize_nearest_neighbor_problem(inputs, attrs))


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
    KernelConfig(RESIZE_BILINEAR, BACKEND, resize_bilinear),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR, BACKEND, resize_nearest_neighbor),
    KernelConfig(INTERPOLATE_BACKWARD, BACKEND, interpolate_backward),
    KernelConfig(RESIZE_GRAD, BACKEND, resize_grad),
)
