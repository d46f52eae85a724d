import subprocess
import sys

import numpy as np
import pytest

import tfcompat
from tfcompat import KernelConfig


def test_builtin_backends_register_every_kernel():
    for backend in ("cython", "numpy", "tensorflow"):
        names = [c.kernel_name for c in tfcompat.get_kernels_for_backend(backend)]
        assert names == sorted(tfcompat.KERNEL_NAMES + tfcompat.FORWARD_KERNEL_NAMES), backend
    assert {"cython", "numpy", "tensorflow"} <= set(tfcompat.list_backends())


def test_import_does_not_import_tensorflow():
    code = "import sys, tfcompat; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_get_kernel_returns_config():
    cfg = tfcompat.get_kernel("ResizeBilinearGrad", "cython")
    assert cfg.kernel_name == "ResizeBilinearGrad" and cfg.backend_name == "cython"
    dy = np.ones((1, 2, 2, 1), np.float32)
    out = cfg.kernel_func({"dy": dy, "images": np.zeros((1, 1, 1, 1), np.float32)}, {})
    assert out.shape == (1, 1, 1, 1) and out[0, 0, 0, 0] == 4.0


def test_missing_kernel_error_lists_what_is_registered():
    with pytest.raises(KeyError) as e:
        tfcompat.get_kernel("ResizeBilinearGrad", "nope")
    assert "cython" in str(e.value) and "numpy" in str(e.value)
    with pytest.raises(KeyError, match="Conv2DBackpropInput"):
        tfcompat.get_kernel("NoSuchKernel", "cython")


def test_swapped_names_get_a_hint():
    """The kernel's name comes first; given the other way round, the error says so."""
    with pytest.raises(KeyError, match=r"did you mean get_kernel\('ResizeBilinearGrad', "
                       r"'cython'\)\?"):
        tfcompat.get_kernel("cython", "ResizeBilinearGrad")
    with pytest.raises(KeyError) as e:
        tfcompat.get_kernel("ResizeBilinearGrad", "nope")
    assert "did you mean" not in str(e.value)


def test_duplicate_registration_raises_unless_overwrite():
    f = lambda inputs, attrs: np.zeros(1)  # noqa: E731
    cfg = KernelConfig("MyKernel", "my_backend_with_underscores", f)
    tfcompat.register_kernel(cfg)
    try:
        with pytest.raises(KeyError, match="already registered"):
            tfcompat.register_kernel(cfg)
        g = lambda inputs, attrs: np.ones(1)  # noqa: E731
        tfcompat.register_kernel(KernelConfig("MyKernel", "my_backend_with_underscores", g),
                                 overwrite=True)
        assert tfcompat.get_kernel("MyKernel", "my_backend_with_underscores").kernel_func is g
        # tuple keys: a backend name with underscores does not collide with anything
        assert ("my_backend_with_underscores", "MyKernel") in tfcompat.list_kernels()
    finally:
        removed = tfcompat.unregister_kernel("MyKernel", "my_backend_with_underscores")
    assert removed.kernel_func is g
    assert "my_backend_with_underscores" not in tfcompat.list_backends()


def test_unregister_missing_kernel_raises():
    with pytest.raises(KeyError, match="not registered"):
        tfcompat.unregister_kernel("ResizeGrad", "no_such_backend")


def test_kernel_config_validates_fields():
    with pytest.raises(TypeError, match="kernel_func"):
        KernelConfig("A", "b", 3)
    with pytest.raises(TypeError, match="backend_name"):
        KernelConfig("A", "", lambda i, a: None)
    with pytest.raises(TypeError, match="KernelConfig"):
        tfcompat.register_kernel(("A", "b"))


def test_functional_api_uses_user_backend():
    seen = {}

    def kernel(inputs, attrs):
        seen.update(attrs)
        return np.full((1, 1, 1, 1), 7.0)

    tfcompat.register_kernel(KernelConfig("ResizeBilinearGrad", "mine", kernel))
    try:
        out = tfcompat.resize_bilinear_grad(np.ones((1, 2, 2, 1), np.float32),
                                            np.zeros((1, 1, 1, 1), np.float32),
                                            half_pixel_centers=True, backend="mine")
        assert out[0, 0, 0, 0] == 7.0 and seen == {"alignCorners": False, "halfPixelCenters": True}
    finally:
        tfcompat.unregister_kernel("ResizeBilinearGrad", "mine")


def test_default_backend_switch():
    assert tfcompat.get_backend() == "cython"
    tfcompat.set_backend("numpy")
    try:
        assert tfcompat.get_backend() == "numpy"
    finally:
        tfcompat.set_backend("cython")
    with pytest.raises(ValueError, match="backend"):
        tfcompat.set_backend("nope")


def test_thread_count_control(monkeypatch):
    tfcompat.set_num_threads(3)
    assert tfcompat.get_num_threads() == 3
    tfcompat.set_num_threads(None)
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert tfcompat.get_num_threads() == 5
    monkeypatch.delenv("OMP_NUM_THREADS")
    tfcompat.set_num_threads(-1)
    assert tfcompat.get_num_threads() >= 1
    with pytest.raises(ValueError, match="num_threads"):
        tfcompat.set_num_threads(0)
    with pytest.raises(TypeError, match="num_threads"):
        tfcompat.set_num_threads(1.5)


def test_the_c_entry_s_kernel_codes_are_named_once():
    """capi.h defines the codes; Python reads them (tfcompat._capi.CODES): one distinct code
    per kernel the C entry serves, each named as the registry names its kernel, and each
    resize's code plans the kernel of its name through the C entry's policy layer (a front's
    signature: NCHW dims, contiguous or channels_last memory)."""
    import numpy as np
    from tfcompat import _capi, kernel_names as K
    from tfcompat._simd import kernels
    codes = _capi.CODES
    assert set(codes) == {K.RESIZE_BILINEAR_GRAD, K.RESIZE_NEAREST_NEIGHBOR_GRAD,
                          K.CONV2D_BACKPROP_INPUT, K.RESIZE_BILINEAR, K.RESIZE_NEAREST_NEIGHBOR}
    assert len(set(codes.values())) == len(codes)
    assert all(_capi.NAMES[code] == name for name, code in codes.items())
    f32 = kernels.DTYPE_CODES[np.dtype(np.float32)]
    i64 = kernels.DTYPE_CODES[np.dtype(np.int64)]
    tensor, shape, values = (kernels.ARG_KINDS[k] for k in ("tensor", "shape", "values"))
    nchw = kernels.LAYOUTS["NCHW"]
    # [1, 3, 2, 2] <-> [1, 3, 4, 4] (NCHW), contiguous and channels_last
    for strides, big_strides in (((12, 4, 2, 1), (48, 16, 4, 1)),
                                 ((12, 1, 6, 3), (48, 1, 12, 3))):
        small = (tensor, f32, (1, 3, 2, 2), strides)
        for name in (K.RESIZE_BILINEAR, K.RESIZE_NEAREST_NEIGHBOR):
            plan = kernels.capi_plan(codes[name], 1, nchw, [small, (values, i64, (2,), ())],
                                     [4, 4, 0, 1])
            assert plan.out_dims == (1, 3, 4, 4) and plan.out_bytes == 3 * 16 * 4, name
        grads = {K.RESIZE_BILINEAR_GRAD: ([(shape, f32, (1, 3, 2, 2), ())], [0, 1]),
                 K.RESIZE_NEAREST_NEIGHBOR_GRAD: ([(values, i64, (2,), ())], [2, 2, 0, 1])}
        for name, (rest, vals) in grads.items():
            big = (tensor, f32, (1, 3, 4, 4), big_strides)
            plan = kernels.capi_plan(codes[name], 1, nchw, [big] + rest, vals)
            assert plan.out_dims == (1, 3, 2, 2), name
    with pytest.raises(ValueError, match="Conv2DBackpropInput takes TF's"):
        kernels.capi_plan(codes[K.CONV2D_BACKPROP_INPUT], 1, nchw,
                          [(tensor, f32, (1, 3, 2, 2), ())], [])
    with pytest.raises(ValueError, match="expected C-contiguous or channels_last"):
        kernels.capi_plan(codes[K.RESIZE_BILINEAR], 1, nchw,
                          [(tensor, f32, (1, 3, 2, 2), (12, 4, 1, 2)), (values, i64, (2,), ())],
                          [4, 4, 0, 0])
