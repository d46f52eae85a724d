"""TF's resizes inside PyTorch: :func:`resize` and :class:`Resize`, forward and backward bit for
bit TF's ``ResizeBilinear``/``ResizeNearestNeighbor`` and their grads in float32.

``import tfcompat.torch`` registers four ``torch.library`` operators, ``tfcompat::resize_bilinear``,
``tfcompat::resize_nearest`` and their backwards, each with a fake (meta) kernel and an autograd
formula (the backward's backward is the forward, so double backward works), so that
``torch.compile(fullgraph=True)``, ``gradcheck``/``gradgradcheck`` and ``torch.library.opcheck``
accept them. Tensors are NCHW, contiguous or channels_last: the kernels read and write either
memory directly (docs/architecture.md#the-pytorch-front); an output has its input's memory
format. PyTorch is an optional dependency; ``import tfcompat`` never imports it.
"""

import numpy as np

try:
    import torch
except ImportError as exc:
    raise ImportError("tfcompat.torch needs PyTorch: install its CPU build first (a plain "
                      "'pip install torch' on Linux pulls CUDA's), then pip install "
                      f"'tfcompat[torch]' [{exc}]") from exc

from . import _capi, _memory
from . import _checks as ck
from ._plans import PlanCache
from ._simd import kernels as _kernels
from ._threads import kernel_threads
from .ops import FLOATS, OPS, RESIZES

if not hasattr(torch.library, "custom_op"):
    raise ImportError(f"tfcompat.torch needs PyTorch 2.4 or newer (torch.library.custom_op); "
                      f"this is {torch.__version__}")

__all__ = ["Resize", "resize"]

METHODS = tuple(RESIZES)
# NumPy's dtype of each torch dtype the op table names
_NUMPY = {torch.float32: ck.FLOAT32, torch.float64: ck.FLOAT64, torch.float16: ck.FLOAT16,
          torch.bfloat16: ck.BFLOAT16, torch.int8: np.dtype(np.int8),
          torch.uint8: np.dtype(np.uint8), torch.int16: np.dtype(np.int16),
          torch.int32: np.dtype(np.int32), torch.int64: np.dtype(np.int64)}
if hasattr(torch, "uint16"):
    _NUMPY[torch.uint16] = np.dtype(np.uint16)
# the torch dtypes of each method's forward and of every backward (the C entry's front rule,
# tfcompat._capi.front_dtypes: nearest also copies integers; a gradient is a float's)
_TYPES = {method: {t: d for t, d in _NUMPY.items() if d in _capi.front_dtypes(forward)}
          for method, (forward, _) in RESIZES.items()}
_FLOAT_TYPES = {t: d for t, d in _NUMPY.items() if d in FLOATS}


def _names(dtypes):
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


# -- checks: every operator's Python layer proves its preconditions (the kernels do not) ------

def _check_tensor(t, name, dtypes, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: got {type(t).__name__}; expected a torch.Tensor")
    if t.device.type not in ("cpu", "meta"):
        raise ValueError(f"{name}: got a tensor on {t.device}; tfcompat.torch runs on the CPU "
                         f"only (move it with .cpu())")
    if t.layout != torch.strided:
        raise ValueError(f"{name}: got a {t.layout} tensor; expected a dense (strided) one")
    if t.dim() != 4:
        raise ValueError(f"{name}: got shape {tuple(t.shape)} (rank {t.dim()}); expected rank 4 "
                         "([batch, channels, height, width])")
    if t.dtype not in dtypes:
        raise TypeError(f"{name}: got dtype {str(t.dtype).replace('torch.', '')}; {what} takes "
                        f"{_names(dtypes)}")


def _front_size(size, name):
    """ck.front_size, with torch.compile's symbolic sizes kept symbolic: a torch.SymInt is
    checked positive by comparison (a guard that holds for every positive size), where
    converting it to an int would specialise the graph to its value and recompile per size."""
    if (isinstance(size, (list, tuple)) and len(size) == 2
            and any(isinstance(v, torch.SymInt) for v in size)):
        if all(isinstance(v, torch.SymInt) or type(v) is int for v in size) and all(
                v > 0 for v in size):
            return tuple(size)
        raise ValueError(f"{name}: got {size!r}; expected two positive ints [height, width]")
    return ck.front_size(size, name)


def _check_forward(x, size, align_corners, half_pixel_centers, method, real=True):
    """The output's (height, width) of a valid forward call; ``real``: x has memory (not a fake
    tensor being traced), so the output's size is checked against this machine's."""
    _check_tensor(x, "x", _TYPES[method], f"tfcompat.torch.resize(method={method!r})")
    size = _front_size(size, "size")
    ck.front_flags(align_corners, half_pixel_centers)
    h, w = x.shape[2], x.shape[3]
    ck.front_spatial(x.shape, h, w, method == "nearest")
    if real:
        ck.check_size((x.shape[0], x.shape[1]) + size, "size", x.element_size())
    return size


def _check_backward(grad, input_size, align_corners, half_pixel_centers, method, real=True):
    """The input's (height, width) of a valid backward call (``real`` as above)."""
    _check_tensor(grad, "grad", _FLOAT_TYPES, "the backward of tfcompat.torch.resize")
    size = _front_size(input_size, "input_size")
    ck.front_flags(align_corners, half_pixel_centers)
    if grad.shape[2] == 0 or grad.shape[3] == 0:
        raise ValueError(f"grad: got shape {tuple(grad.shape)}; expected a non-zero height and "
                         "width")
    if real:
        ck.check_size((grad.shape[0], grad.shape[1]) + size, "input_size",
                      grad.element_size())
    return size


# -- layouts: NCHW dims, contiguous or channels_last memory (the C entry reads either) ---------

def _channels_last(t):
    """True for a channels_last tensor (its memory NHWC); False for a contiguous one (an
    ambiguous tensor, e.g. one channel, counts as contiguous)."""
    return not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last)


def _empty(shape, like, channels_last):
    return torch.empty(shape, dtype=like.dtype, device=like.device,
                       memory_format=torch.channels_last if channels_last
                       else torch.contiguous_format)


# -- the kernels --------------------------------------------------------------------------------
#
# Each operator keeps a runner per call signature (dtype, shape, strides, size, flags) in this
# front's bounded cache: the signature was validated when its runner was built (the front's
# checks, then the C entry's policy layer, as TF's and JAX's calls are), so a call allocates
# its output and runs the C entry's plan on the tensors' memory with no further Python work
# (the tiny call's cost: docs/performance.md#the-pytorch-front).

# Calls the C entry calls small (fewer than capi.h's TFC_SERIAL_VALUES output values) run on
# the calling thread: PyTorch's OpenMP pool and ours are two pools, and a team started beside
# PyTorch's costs 20-40 us (docs/performance.md#the-pytorch-front).
_RUNNERS = PlanCache()


class _Runner:
    __slots__ = ("alloc_shape", "alloc_dtype", "bfloat16", "channels_last", "plan", "item",
                 "serial", "check", "nbytes")

    def __call__(self, t):
        if self.check:
            _memory.check_peak(self.check, "size", "the output and its float32 copies")
        # the output's memory comes from tfcompat's pool of recently freed blocks (the cython
        # backend's outputs: docs/performance.md#the-pytorch-front): a loop calling with the
        # same shapes does not fault its pages in again on every call, as torch.empty's do
        out = torch.from_numpy(_memory.empty(self.alloc_shape, self.alloc_dtype))
        if self.bfloat16:
            out = out.view(torch.bfloat16)
        if self.channels_last:
            out = out.permute(0, 3, 1, 2)
        src = t.data_ptr()
        if src % self.item:     # a tensor over a misaligned buffer: an aligned copy
            t = t.clone()
            src = t.data_ptr()
        self.plan.run(src, out.data_ptr(), 1 if self.serial else kernel_threads())
        return out


def _runner(t, name, size, align_corners, half_pixel_centers):
    """The runner of op ``name`` (the op table's) on t ([N, C, H, W]) whose output's height
    and width are ``size``: its C entry plan, made from the record's arguments."""
    op = OPS[name]
    dtype = _NUMPY[t.dtype]
    n, c = t.shape[0], t.shape[1]
    kinds = _kernels.ARG_KINDS
    args = []
    for arg, kind in op.c_args:
        if kind == "tensor":
            args.append((kinds[kind], _kernels.DTYPE_CODES[dtype], tuple(t.shape), t.stride()))
        elif kind == "shape":     # the output's shape (a gradient's original input)
            args.append((kinds[kind], _kernels.DTYPE_CODES[dtype], (n, c) + tuple(size), ()))
        else:                     # TF's size: the output's height and width
            args.append((kinds[kind], _kernels.DTYPE_CODES[np.dtype(np.int64)], (2,), ()))
    values = _capi.encode(op, {"size": size}, {"align_corners": align_corners,
                                               "half_pixel_centers": half_pixel_centers})
    r = _Runner()
    r.plan = _kernels.capi_plan(_capi.CODES[name], 1, _kernels.LAYOUTS["NCHW"], args, values)
    r.channels_last = _channels_last(t)
    on, oc, oh, ow = r.plan.out_dims
    r.alloc_shape = (on, oh, ow, oc) if r.channels_last else (on, oc, oh, ow)
    r.bfloat16 = t.dtype == torch.bfloat16
    r.alloc_dtype = np.dtype(np.int16) if r.bfloat16 else dtype
    r.item = t.element_size()
    r.serial = r.plan.serial
    peak = r.plan.peak(kernel_threads())
    r.check = peak if peak >= _memory.CHECK_FROM_BYTES else 0
    r.nbytes = r.plan.nbytes
    return r


def _as_laid_out(t):
    """t itself where it is contiguous or channels_last; else one contiguous copy."""
    if t.is_contiguous() or t.is_contiguous(memory_format=torch.channels_last):
        return t
    return t.contiguous()


def _forward(x, size, align_corners, half_pixel_centers, method):
    x = _as_laid_out(x.detach())
    key = ("torch", method, x.dtype, x.shape, x.stride(), tuple(size), align_corners,
           half_pixel_centers)
    return _RUNNERS.get_or_make(key, lambda: _forward_runner(
        x, size, align_corners, half_pixel_centers, method))(x)


def _forward_runner(x, size, align_corners, half_pixel_centers, method):
    size = _check_forward(x, size, align_corners, half_pixel_centers, method)
    return _runner(x, RESIZES[method][0], size, align_corners, half_pixel_centers)


def _backward(grad, input_size, align_corners, half_pixel_centers, method):
    grad = _as_laid_out(grad.detach())    # e.g. the expanded ones of y.sum().backward(): copied
    key = ("torch-grad", method, grad.dtype, grad.shape, grad.stride(), tuple(input_size),
           align_corners, half_pixel_centers)
    return _RUNNERS.get_or_make(key, lambda: _backward_runner(
        grad, input_size, align_corners, half_pixel_centers, method))(grad)


def _backward_runner(grad, input_size, align_corners, half_pixel_centers, method):
    size = _check_backward(grad, input_size, align_corners, half_pixel_centers, method)
    return _runner(grad, RESIZES[method][1], size, align_corners, half_pixel_centers)


# -- the operators --------------------------------------------------------------------------------

# The fake kernels run while torch.compile traces, on fake tensors whose sizes may be symbolic:
# the checks hold for every size the graph serves, and the memory check waits for real tensors.
def _fake_forward(x, size, align_corners, half_pixel_centers, method):
    oh, ow = _check_forward(x, size, align_corners, half_pixel_centers, method, real=False)
    cl = _channels_last(x)
    return _empty((x.shape[0], x.shape[1], oh, ow), x, cl)


def _fake_backward(grad, input_size, align_corners, half_pixel_centers, method):
    h, w = _check_backward(grad, input_size, align_corners, half_pixel_centers, method,
                           real=False)
    return _empty((grad.shape[0], grad.shape[1], h, w), grad, _channels_last(grad))


_FORWARD_SCHEMA = "(Tensor x, SymInt[] size, bool align_corners, bool half_pixel_centers) -> Tensor"
_BACKWARD_SCHEMA = ("(Tensor grad, SymInt[] input_size, bool align_corners, "
                    "bool half_pixel_centers) -> Tensor")


def _define(method):
    """The operator pair of one method, named by the op table's records (its forward's front
    name, and its gradient's): kernels, fake kernels and autograd formulas."""
    forward, grad = (OPS[name].fronts["torch"] for name in RESIZES[method])
    forward_op = torch.library.custom_op(
        f"tfcompat::{forward}",
        lambda x, size, ac, hpc: _forward(x, size, ac, hpc, method),
        mutates_args=(), device_types="cpu", schema=_FORWARD_SCHEMA)
    backward_op = torch.library.custom_op(
        f"tfcompat::{grad}",
        lambda grad, input_size, ac, hpc: _backward(grad, input_size, ac, hpc, method),
        mutates_args=(), device_types="cpu", schema=_BACKWARD_SCHEMA)
    forward_op.register_fake(
        lambda x, size, ac, hpc: _fake_forward(x, size, ac, hpc, method))
    backward_op.register_fake(
        lambda grad, input_size, ac, hpc: _fake_backward(grad, input_size, ac, hpc, method))

    def forward_setup(ctx, inputs, output):
        x, _, ctx.align_corners, ctx.half_pixel_centers = inputs
        ctx.input_size = (x.shape[2], x.shape[3])

    def forward_grad(ctx, grad):
        return (backward_op(grad, ctx.input_size, ctx.align_corners, ctx.half_pixel_centers),
                None, None, None)

    def backward_setup(ctx, inputs, output):
        grad, _, ctx.align_corners, ctx.half_pixel_centers = inputs
        ctx.output_size = (grad.shape[2], grad.shape[3])

    def backward_grad(ctx, grad_grad):
        # the backward is linear in grad with the forward's weights: its adjoint is the forward
        return (forward_op(grad_grad, ctx.output_size, ctx.align_corners,
                           ctx.half_pixel_centers), None, None, None)

    forward_op.register_autograd(forward_grad, setup_context=forward_setup)
    backward_op.register_autograd(backward_grad, setup_context=backward_setup)
    return (getattr(torch.ops.tfcompat, forward).default,
            getattr(torch.ops.tfcompat, grad).default)


# {method: (forward operator, backward operator)}, one pair per TF resize in the op table
_OPS = {method: _define(method) for method in METHODS}


# -- eager calls --------------------------------------------------------------------------------
#
# A plain CPU tensor outside torch.compile, tracing and any dispatch, function or functorch
# mode takes the same kernels through torch.autograd.Function: PyTorch's dispatch of a Python
# custom op and its autograd cost ~140 us per forward and backward, ~10x the kernels on a tiny
# call (docs/performance.md#the-pytorch-front). Everything else goes through the operators.

# (forward with ctx, not setup_context: apply then skips binding its arguments to the
# signature, ~30 us a call)
class _ResizeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, size, align_corners, half_pixel_centers, method):
        ctx.size = (x.shape[2], x.shape[3])
        ctx.align_corners, ctx.half_pixel_centers, ctx.method = (align_corners,
                                                                 half_pixel_centers, method)
        return _forward(x, size, align_corners, half_pixel_centers, method)

    @staticmethod
    def backward(ctx, grad):
        args = (ctx.size, ctx.align_corners, ctx.half_pixel_centers, ctx.method)
        if torch.is_grad_enabled():     # create_graph: the backward is differentiable too
            return _ResizeGradFn.apply(grad, *args), None, None, None, None
        return _backward(grad, *args), None, None, None, None


class _ResizeGradFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, grad, input_size, align_corners, half_pixel_centers, method):
        ctx.size = (grad.shape[2], grad.shape[3])
        ctx.align_corners, ctx.half_pixel_centers, ctx.method = (align_corners,
                                                                 half_pixel_centers, method)
        return _backward(grad, input_size, align_corners, half_pixel_centers, method)

    @staticmethod
    def backward(ctx, grad_grad):
        # the backward is linear in grad with the forward's weights: its adjoint is the forward
        return (_ResizeFn.apply(grad_grad, ctx.size, ctx.align_corners,
                                ctx.half_pixel_centers, ctx.method), None, None, None, None)


def _eager(x):
    """Whether a call on x may skip the operators' dispatch (see above)."""
    return (type(x) is torch.Tensor and not torch.compiler.is_compiling()
            and not torch._C._is_torch_function_mode_enabled()
            and torch._C._len_torch_dispatch_stack() == 0
            and torch._C._get_tracing_state() is None
            and not torch._C._functorch.is_functorch_wrapped_tensor(x))


# -- the public front ---------------------------------------------------------------------------

def resize(x, size, method="bilinear", *, align_corners=False, half_pixel_centers=False):
    """TF's resize of an NCHW tensor: ``tf.raw_ops.ResizeBilinear`` or
    ``ResizeNearestNeighbor`` with TF's coordinates and float32 arithmetic, forward and
    backward (``ResizeBilinearGrad``/``ResizeNearestNeighborGrad``) bit for bit in float32.

    Parameters
    ----------
    x : torch.Tensor [batch, channels, height, width] on the CPU, contiguous or
        channels_last (read in place; other strides are copied once): float32, float64,
        float16 or bfloat16; ``method="nearest"`` also int8, uint8, int16, uint16, int32, int64.
    size : two positive ints, the output's [height, width].
    method : "bilinear" or "nearest".
    align_corners, half_pixel_centers : bool, as in TF (at most one True). Both False is TF1's
        legacy mode; ``tf.image.resize`` (TF2) uses ``half_pixel_centers=True``.

    Returns
    -------
    torch.Tensor of x's dtype and memory format, [batch, channels, size[0], size[1]]. float16
    and bfloat16 are TF's float32 result rounded once; float64 is computed in float64 (TF
    computes it in float32). Differentiable (twice) in the floating types.
    """
    if method not in METHODS:
        raise ValueError(f"method: got {method!r}; expected one of {METHODS}")
    if (type(size) in (list, tuple) and len(size) == 2 and type(size[0]) is int
            and type(size[1]) is int and type(align_corners) is bool
            and type(half_pixel_centers) is bool and _eager(x)):
        # an eager call: the operators' checks run once per signature (_forward's runner);
        # the device is asked here, where a CUDA tensor must get our error, not a crash
        if x.is_cpu and x.layout == torch.strided:
            size = (size[0], size[1])
            if x.requires_grad and torch.is_grad_enabled():
                return _ResizeFn.apply(x, size, align_corners, half_pixel_centers, method)
            return _forward(x, size, align_corners, half_pixel_centers, method)
    _check_tensor(x, "x", _TYPES[method], f"tfcompat.torch.resize(method={method!r})")
    size = _front_size(size, "size")
    ck.front_flags(align_corners, half_pixel_centers)
    if x.is_cpu and _eager(x):
        if x.requires_grad and torch.is_grad_enabled():
            return _ResizeFn.apply(x, size, align_corners, half_pixel_centers, method)
        return _forward(x, size, align_corners, half_pixel_centers, method)
    return _OPS[method][0](x, list(size), align_corners, half_pixel_centers)


class Resize(torch.nn.Module):
    """:func:`resize` as a module, for model code: ``Resize((64, 64), "bilinear")``."""

    def __init__(self, size, method="bilinear", *, align_corners=False,
                 half_pixel_centers=False):
        super().__init__()
        if method not in METHODS:
            raise ValueError(f"method: got {method!r}; expected one of {METHODS}")
        self.size = list(ck.front_size(size, "size"))
        ck.front_flags(align_corners, half_pixel_centers)
        self.method = method
        self.align_corners = align_corners
        self.half_pixel_centers = half_pixel_centers

    def forward(self, x):
        return resize(x, self.size, self.method, align_corners=self.align_corners,
                      half_pixel_centers=self.half_pixel_centers)

    def extra_repr(self):
        return (f"size={tuple(self.size)}, method={self.method!r}, "
                f"align_corners={self.align_corners}, "
                f"half_pixel_centers={self.half_pixel_centers}")
