"""tfcompat.torch (docs/architecture.md#the-pytorch-front): TF's resizes as PyTorch operators.
Forward and backward equal to TF's raw ops bit for bit in float32 (TF is the oracle), in both
memory formats and on 1 and 2 threads; the operators pass torch.library.opcheck, gradcheck,
gradgradcheck and torch.compile(fullgraph=True); bad input is refused in the caller's words."""
import itertools

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
tt = pytest.importorskip("tfcompat.torch")

import tfcompat as T
from conformance import metric
from conformance.runner import same_bits

from helpers import random_front_cases, tf_or_skip, tf_resize, tf_resize_grad

FLAGS = [(False, False), (True, False), (False, True)]
METHODS = ("bilinear", "nearest")
FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
CASES = random_front_cases(16, 7)


def _nhwc(t):
    """A tensor's values as an NHWC NumPy array (bfloat16 through ml_dtypes)."""
    t = t.detach().permute(0, 2, 3, 1).contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _tensor(a, fmt):
    """An NHWC NumPy array as an NCHW tensor in memory format ``fmt``."""
    if a.dtype == ml_dtypes.bfloat16:
        t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(a.copy())
    return t.permute(0, 3, 1, 2).contiguous(memory_format=FORMATS[fmt])


@pytest.fixture(autouse=True)
def _threads():
    yield
    T.set_num_threads(None)


@pytest.mark.parametrize("case", CASES, ids=["b{}c{}_{}x{}_to_{}x{}".format(*c) for c in CASES])
def test_float32_forward_and_backward_equal_tf_bit_for_bit(case):
    tf = tf_or_skip()
    b, c, ih, iw, oh, ow = case
    rng = np.random.default_rng(sum(case))
    x = (rng.standard_normal((b, ih, iw, c)) * 8).astype(np.float32)
    g = rng.standard_normal((b, oh, ow, c)).astype(np.float32)
    for method, (align, half), fmt in itertools.product(METHODS, FLAGS, FORMATS):
        want_y = tf_resize(tf, method, x, (oh, ow), align, half)
        want_dx = tf_resize_grad(tf, method, g, x, align, half)
        for threads in (1, 2):
            T.set_num_threads(threads)
            xt = _tensor(x, fmt).requires_grad_()
            y = tt.resize(xt, (oh, ow), method, align_corners=align, half_pixel_centers=half)
            what = (method, align, half, fmt, threads)
            assert y.dtype == torch.float32 and y.shape == (b, c, oh, ow), what
            assert same_bits(_nhwc(y), want_y), what
            (dx,) = torch.autograd.grad(y, xt, _tensor(g, fmt))
            assert same_bits(_nhwc(dx), want_dx), what


@pytest.mark.parametrize("fmt", FORMATS)
def test_memory_format_kept_and_large_calls_equal_tf(fmt):
    """An output has its input's memory format (a gradient its grad's); a call large enough to
    run on several threads gives TF's bits too."""
    tf = tf_or_skip()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 40, 50, 24)).astype(np.float32)
    g = rng.standard_normal((2, 81, 33, 24)).astype(np.float32)
    T.set_num_threads(2)
    for method, (align, half) in itertools.product(METHODS, FLAGS):
        xt = _tensor(x, fmt).requires_grad_()
        y = tt.resize(xt, (81, 33), method, align_corners=align, half_pixel_centers=half)
        assert y.is_contiguous(memory_format=FORMATS[fmt])
        assert same_bits(_nhwc(y), tf_resize(tf, method, x, (81, 33), align, half))
        (dx,) = torch.autograd.grad(y, xt, _tensor(g, fmt))
        assert dx.is_contiguous(memory_format=FORMATS[fmt])
        assert same_bits(_nhwc(dx), tf_resize_grad(tf, method, g, x, align, half))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fmt", FORMATS)
def test_half_types_are_tf_float32_results_rounded_once(dtype, fmt):
    """float16/bfloat16: TF's float32 forward of the half-type image rounded once to its type
    (nearest copies it); the backward is TF's grad of the half-type image given the grad as
    float32 (bilinear) or as it is (nearest), both rounded once by TF itself."""
    tf = tf_or_skip()
    np_dtype = np.float16 if dtype == torch.float16 else ml_dtypes.bfloat16
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 5, 7, 3)) * 4).astype(np_dtype)
    g = rng.standard_normal((2, 9, 4, 3)).astype(np_dtype)
    for method, (align, half) in itertools.product(METHODS, FLAGS):
        xt = _tensor(x, fmt).requires_grad_()
        y = tt.resize(xt, (9, 4), method, align_corners=align, half_pixel_centers=half)
        assert y.dtype == dtype
        want = tf_resize(tf, method, x, (9, 4), align, half)
        assert same_bits(_nhwc(y), want.astype(np_dtype)), (method, align, half)
        (dx,) = torch.autograd.grad(y, xt, _tensor(g, fmt))
        assert dx.dtype == dtype
        g_tf = g.astype(np.float32) if method == "bilinear" else g
        assert same_bits(_nhwc(dx), tf_resize_grad(tf, method, g_tf, x, align, half)), method


def test_float64_within_the_metric_of_tf():
    """float64 bilinear computes in float64 (TF computes a float64 image in float32): within
    the float32 metric of TF's result, forward and backward (scales: the NumPy reference on
    the absolute values). float64 nearest is TF's own float64 kernel: the same bits."""
    tf = tf_or_skip()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 5, 4))
    g = rng.standard_normal((2, 11, 3, 4))
    for method, (align, half) in itertools.product(METHODS, FLAGS):
        kw = dict(align_corners=align, half_pixel_centers=half)
        xt = _tensor(x, "contiguous").requires_grad_()
        y = tt.resize(xt, (11, 3), method, **kw)
        (dx,) = torch.autograd.grad(y, xt, _tensor(g, "contiguous"))
        assert y.dtype == dx.dtype == torch.float64
        if method == "nearest":
            assert same_bits(_nhwc(y), tf_resize(tf, method, x, (11, 3), align, half))
            assert same_bits(_nhwc(dx), tf_resize_grad(tf, method, g, x, align, half))
            continue
        want = tf_resize(tf, method, x, (11, 3), align, half)
        scale = T.resize_bilinear(np.abs(x), [11, 3], backend="numpy", **kw)
        assert metric.compare(_nhwc(y), want, scale, np.float32).passed, kw
        want = tf_resize_grad(tf, method, g.astype(np.float32), x, align, half)
        scale = T.resize_bilinear_grad(np.abs(g), x, backend="numpy", **kw)
        assert metric.compare(_nhwc(dx), want, scale, np.float32).passed, kw


@pytest.mark.parametrize("np_dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                      np.int64])
def test_nearest_copies_integers_as_tf(np_dtype):
    tf = tf_or_skip()
    if np_dtype == np.uint16 and not hasattr(torch, "uint16"):
        pytest.skip("this PyTorch has no uint16")
    info = np.iinfo(np_dtype)
    x = np.random.default_rng(2).integers(info.min, info.max, (2, 5, 6, 3), dtype=np_dtype)
    for (align, half), fmt in itertools.product(FLAGS, FORMATS):
        y = tt.resize(_tensor(x, fmt), (8, 3), "nearest", align_corners=align,
                      half_pixel_centers=half)
        assert np.array_equal(_nhwc(y), tf_resize(tf, "nearest", x, (8, 3), align, half))


def test_hand_worked_legacy_bilinear():
    """TF1's legacy mode on [0, 10] resized to 4: source x = 0, 0.5, 1, 1.5 (scale 1/2), the
    last clamped to pixel 1: 0, 5, 10, 10 (PyTorch's align_corners=False gives 0, 2.5, 7.5,
    10)."""
    x = torch.tensor([[[[0.0, 10.0]]]])
    assert tt.resize(x, (1, 4)).flatten().tolist() == [0.0, 5.0, 10.0, 10.0]
    # its gradient: each input pixel collects the weights that read it
    xr = x.clone().requires_grad_()
    tt.resize(xr, (1, 4)).sum().backward()
    assert xr.grad.flatten().tolist() == [1.5, 2.5]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("flags", FLAGS, ids=["legacy", "align", "half"])
def test_gradcheck_and_gradgradcheck(method, flags, fmt):
    align, half = flags
    x = torch.randn(2, 3, 5, 4, dtype=torch.float64).contiguous(
        memory_format=FORMATS[fmt]).requires_grad_()

    def f(t):
        return tt.resize(t, (7, 3), method, align_corners=align, half_pixel_centers=half)

    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    # the registered operator itself, outside the eager path
    op = torch.ops.tfcompat.resize_bilinear if method == "bilinear" else \
        torch.ops.tfcompat.resize_nearest
    assert torch.autograd.gradcheck(lambda t: op(t, [7, 3], align, half), (x,))
    assert torch.autograd.gradgradcheck(lambda t: op(t, [7, 3], align, half), (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fmt", FORMATS)
def test_opcheck(dtype, fmt):
    x = torch.randn(2, 3, 5, 4, dtype=dtype).contiguous(memory_format=FORMATS[fmt])
    g = torch.randn(2, 3, 7, 3, dtype=dtype).contiguous(memory_format=FORMATS[fmt])
    grad_ok = dtype == torch.float64    # (the autograd test's finite differences need float64)
    for align, half in FLAGS:
        for name in METHODS:
            fwd = getattr(torch.ops.tfcompat, f"resize_{name}")
            bwd = getattr(torch.ops.tfcompat, f"resize_{name}_backward")
            torch.library.opcheck(fwd, (x.clone().requires_grad_(grad_ok), [7, 3], align, half))
            torch.library.opcheck(bwd, (g.clone().requires_grad_(grad_ok), [5, 4], align, half))


def test_opcheck_nearest_integers():
    x = torch.randint(-100, 100, (2, 3, 5, 4), dtype=torch.int32)
    torch.library.opcheck(torch.ops.tfcompat.resize_nearest, (x, [7, 3], True, False))


def test_torch_compile_fullgraph_equals_eager():
    """The model compiled as one graph (no graph break) gives eager's bits, forward and
    backward (AOTAutograd's compiled backward runs our backward operators)."""
    import torch._dynamo
    torch._dynamo.reset()
    model = torch.nn.Sequential(tt.Resize((11, 9), "bilinear"),
                                tt.Resize((5, 6), "nearest", align_corners=True))
    x = torch.randn(2, 3, 7, 7).contiguous(memory_format=torch.channels_last)
    g = torch.randn(2, 3, 5, 6)
    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_c = torch.compile(model, fullgraph=True)(xc)
    y_e = model(xe)
    assert torch.equal(y_c, y_e)
    y_c.backward(g)
    y_e.backward(g)
    assert torch.equal(xc.grad, xe.grad)


@pytest.mark.parametrize("method", METHODS)
def test_torch_compile_dynamic_traces_one_graph_for_every_shape(method):
    """torch.compile(dynamic=True, fullgraph=True) over 8 shapes that vary the batch, the
    channels, the height, the width and the output size: one graph (dynamo's frame counter;
    the checks keep the symbolic sizes symbolic), and each call's forward and backward equal
    to the eager call's bits. (Sizes of 1 are left out: dynamo specialises those itself.)"""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounterWithBackend
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")

    def f(x, oh, ow):
        y = tt.resize(x, (oh, ow), method, half_pixel_centers=True)
        return (y * y).sum()

    compiled = torch.compile(f, backend=counter, dynamic=True, fullgraph=True)
    rng = torch.Generator().manual_seed(9)
    shapes = [(2, 3, 8, 9, 5, 7), (3, 4, 10, 6, 12, 13), (3, 5, 7, 11, 20, 3),
              (4, 2, 9, 9, 9, 9), (2, 6, 12, 5, 7, 8), (5, 3, 6, 13, 4, 17),
              (3, 7, 14, 8, 16, 6), (2, 2, 5, 5, 11, 11)]
    for b, c, h, w, oh, ow in shapes:
        x = torch.randn(b, c, h, w, generator=rng)
        xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
        lc, le = compiled(xc, oh, ow), f(xe, oh, ow)
        lc.backward()
        le.backward()
        assert torch.equal(lc, le) and torch.equal(xc.grad, xe.grad), (b, c, h, w, oh, ow)
    assert counter.frame_count == 1


def test_the_memory_check_waits_for_real_tensors():
    """A fake (meta) tensor of a high-resolution model traces without this machine's memory
    check; the same call on a real tensor is refused before it allocates."""
    huge = (1 << 13, 1 << 13)     # 1 TiB of float32
    y = tt.resize(torch.empty(64, 64, 8, 8, device="meta"), huge)
    assert y.shape == (64, 64) + huge
    g = torch.ops.tfcompat.resize_bilinear_backward(torch.empty(64, 64, 8, 8, device="meta"),
                                                    list(huge), False, False)
    assert g.shape == (64, 64) + huge
    with pytest.raises(MemoryError, match="size: an output of shape"):
        tt.resize(torch.zeros(64, 64, 8, 8), huge)

def test_module():
    m = tt.Resize((4, 6), "nearest", half_pixel_centers=True)
    assert repr(m) == ("Resize(size=(4, 6), method='nearest', align_corners=False, "
                       "half_pixel_centers=True)")
    assert dict(m.state_dict()) == {}
    x = torch.arange(12.0).reshape(1, 1, 3, 4)
    assert torch.equal(m(x), tt.resize(x, (4, 6), "nearest", half_pixel_centers=True))


def test_identity_empty_and_strided_inputs():
    # an image resized to its own size: TF's cast, so an infinity stays one
    x = torch.tensor([[[[1.0, float("inf")], [2.0, 3.0]]]])
    assert torch.equal(tt.resize(x, (2, 2)), x)
    # an empty batch: an empty output, and an empty gradient
    e = torch.zeros(0, 3, 4, 4, requires_grad=True)
    y = tt.resize(e, (8, 8))
    assert y.shape == (0, 3, 8, 8)
    y.sum().backward()
    assert e.grad.shape == e.shape
    # strides that are neither format (a slice): the same values as the contiguous copy
    big = torch.randn(2, 6, 9, 9)
    view = big[:, ::2, 1:, ::3]
    assert torch.equal(tt.resize(view, (5, 5)), tt.resize(view.contiguous(), (5, 5)))


def test_meta_tensors_take_the_fake_kernels():
    y = tt.resize(torch.empty(2, 3, 5, 4, device="meta"), (7, 3))
    assert y.device.type == "meta" and y.shape == (2, 3, 7, 3)


@pytest.mark.parametrize("call, exc, words", [
    (lambda: tt.resize(np.zeros((1, 1, 2, 2)), (3, 3)), TypeError, "x: got ndarray"),
    (lambda: tt.resize(torch.zeros(1, 2, 2), (3, 3)), ValueError, "x: got shape (1, 2, 2)"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2, dtype=torch.int32), (3, 3)), TypeError,
     "x: got dtype int32; tfcompat.torch.resize(method='bilinear') takes float32"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2, dtype=torch.complex64), (3, 3), "nearest"),
     TypeError, "x: got dtype complex64"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2, dtype=torch.bool), (3, 3), "nearest"),
     TypeError, "x: got dtype bool"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2), (0, 3)), ValueError, "size: got (0, 3)"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2), 3), ValueError, "size: got 3"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2), (2.5, 3)), TypeError,
     "size[0]: got 2.5; expected an int"),    # as the NumPy API says it
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2), (3, 3), "bicubic"), ValueError,
     "method: got 'bicubic'"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2), (3, 3), align_corners=True,
                       half_pixel_centers=True), ValueError, "align_corners: got True together"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2), (3, 3), align_corners=1), TypeError,
     "align_corners: got 1; expected a bool"),
    (lambda: tt.resize(torch.zeros(1, 1, 0, 2), (3, 3)), ValueError,
     "x: got shape (1, 1, 0, 2); expected a non-zero height"),
    (lambda: tt.resize(torch.zeros(1, 1, 2, 2).to_sparse(), (3, 3)), ValueError,
     "x: got a torch.sparse_coo tensor"),
    (lambda: torch.ops.tfcompat.resize_bilinear_backward(torch.zeros(1, 1, 2, 2), [0, 1], False,
                                                         False), ValueError,
     "input_size: got [0, 1]"),
    (lambda: tt.Resize((3, 3), "area"), ValueError, "method: got 'area'"),
])
def test_errors_name_the_argument(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_tensor_refused():
    with pytest.raises(ValueError, match="x: got a tensor on cuda:0; tfcompat.torch runs on "
                                         "the CPU only"):
        tt.resize(torch.zeros(1, 1, 2, 2, device="cuda"), (3, 3))
