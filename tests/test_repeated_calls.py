"""Repeated calls: the cython backend validates a call once per call key and keeps one bounded
cache of plans (tfcompat/backends/cython_backend.py). Seen from outside, that must change
nothing: every call computes from its own values, a call the key cannot describe gets the
parser's answer, a bad call fails every time, no user array is kept alive, the results do not
depend on how the inputs are laid out or on the thread count, and memory stays bounded."""
import gc
import os
import weakref

import numpy as np
import pytest

import tfcompat as T
from conformance import metric
from tfcompat import _plans
from helpers import assert_bitwise, assert_close

f32, f64 = np.float32, np.float64


def _strided(a):
    """The values of ``a`` in an array that is not C-contiguous."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    view = wide[..., ::2]
    view[...] = a
    assert not view.flags.c_contiguous
    return view


def _misaligned(a):
    """The values of ``a`` in a C-contiguous array whose data is not aligned to its items."""
    raw = np.zeros(a.nbytes + 1, np.uint8)[1:]
    out = np.frombuffer(raw.data, a.dtype).reshape(a.shape)
    out[...] = a
    assert not out.flags.aligned or a.dtype.itemsize == 1
    return out


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _z(shape, dtype):
    return np.zeros(shape, dtype)


# (kernel, dy name, dy shape, dy dtype, other inputs, attrs): every kernel kind (linear float32
# and float64 sums of float32 and float64 grads, nearest float32 through the gather, the runs
# and the scatter, float64, the integers, half types), 1-D, 2-D and 3-D, NXC and NCX
CASES = {
    "bilinear f32 C3": ("ResizeBilinearGrad", "dy", (1, 9, 7, 3), f32,
                        {"images": _z((1, 4, 5, 3), f32)}, {"halfPixelCenters": True}),
    "bilinear f32 C64": ("ResizeBilinearGrad", "dy", (1, 6, 10, 64), f32,
                         {"images": _z((1, 3, 5, 64), f32)}, {}),
    "bilinear f32 -> f64": ("ResizeBilinearGrad", "dy", (2, 7, 5, 4), f32,
                            {"images": _z((2, 3, 4, 4), f64)}, {"halfPixelCenters": True}),
    "bilinear f32 -> bf16": ("ResizeBilinearGrad", "dy", (2, 7, 5, 4), f32,
                             {"images": _z((2, 3, 4, 4), metric.BFLOAT16)},
                             {"alignCorners": True}),
    "bilinear f64": ("ResizeBilinearGrad", "dy", (1, 5, 9, 6), f64,
                     {"images": _z((1, 10, 3, 6), f64)}, {"alignCorners": True}),
    "nearest f32 gather": ("ResizeNearestNeighborGrad", "dy", (2, 8, 10, 16), f32,
                           {"images": _z((2, 4, 5, 16), f32)}, {"halfPixelCenters": True}),
    "nearest f32 runs": ("ResizeNearestNeighborGrad", "dy", (1, 24, 8, 21), f32,
                         {"images": _z((1, 3, 4, 21), f32)}, {}),
    "nearest f32 C3": ("ResizeNearestNeighborGrad", "dy", (1, 7, 9, 3), f32,
                       {"images": _z((1, 3, 4, 3), f32)}, {"alignCorners": True}),
    "nearest f64": ("ResizeNearestNeighborGrad", "dy", (1, 5, 4, 9), f64,
                    {"images": _z((1, 2, 7, 9), f64)}, {}),
    "nearest f16": ("ResizeNearestNeighborGrad", "dy", (1, 5, 4, 9), np.float16,
                    {"images": _z((1, 2, 7, 9), np.float16)}, {}),
    "nearest uint8": ("ResizeNearestNeighborGrad", "dy", (2, 6, 6, 5), np.uint8,
                      {"images": _z((2, 3, 2, 5), np.uint8)}, {"halfPixelCenters": True}),
    "nearest int8": ("ResizeNearestNeighborGrad", "dy", (1, 9, 4, 2), np.int8,
                     {"images": _z((1, 3, 2, 2), np.int8)}, {}),
    "nearest int32": ("ResizeNearestNeighborGrad", "dy", (1, 6, 8, 7), np.int32,
                      {"images": _z((1, 2, 3, 7), np.int32)},
                      {"alignCorners": True, "halfPixelCenters": True}),
    "interp trilinear NCX": ("InterpolateBackward", "diff_dst", (2, 3, 6, 4, 5), f32,
                             {"src": _z((2, 3, 3, 2, 4), f32)},
                             {"mode": "trilinear", "data_format": "NCX"}),
    "interp trilinear NCX f64": ("InterpolateBackward", "diff_dst", (2, 5, 6, 4, 5), f64,
                                 {"src": _z((2, 5, 3, 2, 4), f64)},
                                 {"mode": "trilinear", "data_format": "NCX"}),
    "interp linear 1-D f64": ("InterpolateBackward", "diff_dst", (2, 9, 4), f64,
                              {"src": _z((2, 4, 4), f64)},
                              {"mode": "linear", "coordinate_transformation_mode":
                               "align_corners"}),
    "interp nearest 3-D": ("InterpolateBackward", "diff_dst", (1, 4, 6, 2, 8), f32,
                           {"src": _z((1, 2, 3, 3, 8), f32)},
                           {"mode": "nearest", "coordinate_transformation_mode": "asymmetric"}),
    "interp sizes": ("InterpolateBackward", "diff_dst", (1, 8, 6, 2), f32,
                     {"src": _z((1, 4, 3, 2), f32), "sizes": np.array([8, 6])},
                     {"mode": "bilinear"}),
    "ort scales": ("ResizeGrad", "dY", (2, 3, 6, 6), f32,
                   {"X": _z((2, 3, 4, 4), f32), "scales": np.array([1, 1, 1.7, 1.7], f32)},
                   {}),
}


def _call(name, dy, backend="cython", attrs=None):
    kernel, dy_name, _, _, inputs, case_attrs = CASES[name]
    func = T.get_kernel(kernel, backend).kernel_func
    return func(dict(inputs, **{dy_name: dy}), dict(case_attrs if attrs is None else attrs))


def _check_against_reference(name, dy, got):
    kernel, dy_name, _, _, inputs, attrs = CASES[name]
    ref = _call(name, dy, "numpy")
    if dy.dtype.kind in "iu":
        # the integers wrap as TF's sums do: the reference's int64 sums, modulo 2**bits
        bits = 8 * dy.dtype.itemsize
        diff = (got.astype(np.int64) - ref.astype(np.int64)) % 2 ** bits
        assert not diff.any(), name
        return
    scale = metric.magnitude(kernel, dict(inputs, **{dy_name: dy}), attrs)
    # float32 grads into a float64 image: float32 products (TF's), so float32's tolerance
    tol_dtype = min(np.dtype(dy.dtype), got.dtype, key=lambda d: d.itemsize)
    assert_close(got, ref, scale, tol_dtype, what=name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_call_computes_from_its_own_values(name):
    """Three calls with the same shapes and new values: each equals the independent NumPy
    reference for its own values (the TF tests pin the float32 bits)."""
    _, _, shape, dtype, _, _ = CASES[name]
    rng = np.random.default_rng(len(name))
    for _ in range(3):
        dy = _values(rng, shape, dtype)
        _check_against_reference(name, dy, _call(name, dy))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_layout_of_dy_changes_no_bit(name):
    """C-contiguous, strided, misaligned and (float32) list inputs (the last one is parsed on
    every call) give the same bits, before and after the contiguous call's plan exists."""
    _, _, shape, dtype, _, _ = CASES[name]
    dy = _values(np.random.default_rng(11), shape, dtype)
    first = _call(name, _strided(dy))
    for variant in (dy, _strided(dy), _misaligned(dy), dy):
        assert_bitwise(_call(name, variant), first, name)
    assert first.flags.c_contiguous and first.flags.writeable
    if dtype == f32:  # a list of Python floats converts to float32, as in TF
        assert_bitwise(_call(name, dy.tolist()), first, name)


@pytest.mark.parametrize("name", ["bilinear f32 C64", "nearest f32 gather", "nearest int8",
                                  "interp trilinear NCX", "interp trilinear NCX f64"])
def test_repeated_calls_do_not_depend_on_the_thread_count(name):
    _, _, shape, dtype, _, _ = CASES[name]
    dy = _values(np.random.default_rng(7), shape, dtype)
    T.set_num_threads(1)
    one = _call(name, dy)
    for n in (2, 3, 4):
        T.set_num_threads(n)
        assert_bitwise(_call(name, dy), one, f"{name}, {n} threads")


def test_calls_that_differ_in_what_the_parser_checks_get_its_answer():
    """After a good call, a call that differs in anything the parser reads gets the parser's
    answer: its error where it gives one, the same result where it accepts the call."""
    dy = np.ones((1, 4, 4, 2), f32)
    img = np.zeros((1, 2, 2, 2), f32)
    func = T.get_kernel("ResizeBilinearGrad", "cython").kernel_func
    good = func({"dy": dy, "images": img}, {"alignCorners": False})
    # the other byte order: the parser reads the same numbers, on every call (a call key that
    # skipped it would hand the kernel the swapped bytes)
    for _ in range(2):
        assert_bitwise(func({"dy": dy, "images": img.astype(img.dtype.newbyteorder())},
                            {"alignCorners": False}), good)
        assert_bitwise(func({"dy": dy.astype(dy.dtype.newbyteorder()), "images": img},
                            {"alignCorners": False}), good)
    with pytest.raises(ValueError, match="unknown attribute"):
        func({"dy": dy, "images": img}, {"alignCorners": False, "align_corners": True})
    for flag in (0, 1, None, "False"):  # equal or hash-equal to a bool, but not a bool
        with pytest.raises(TypeError, match="alignCorners"):
            func({"dy": dy, "images": img}, {"alignCorners": flag})
    with pytest.raises(ValueError, match="halfPixelCenters"):
        func({"dy": dy, "images": img}, {"alignCorners": True, "halfPixelCenters": True})
    with pytest.raises(ValueError, match="missing input"):
        func({"dy": dy}, {})
    # accepted by the parser: np.bool_ flags, a dict subclass, attributes in another order
    assert_bitwise(func({"dy": dy, "images": img}, {"alignCorners": np.bool_(False)}), good)
    assert_bitwise(func(type("M", (dict,), {})(dy=dy, images=img), {}), good)
    assert_bitwise(func({"images": img, "dy": dy}, {"halfPixelCenters": False,
                                                    "alignCorners": False}), good)


def test_parameter_inputs_are_part_of_a_call():
    """ResizeGrad's scales and InterpolateBackward's sizes are values the checks read: a good
    value once does not let a bad one through, and a new good value changes the result."""
    rg = T.get_kernel("ResizeGrad", "cython").kernel_func
    dy, x = np.ones((1, 1, 6, 6), f32), np.zeros((1, 1, 4, 4), f32)
    sc = np.array([1, 1, 1.7, 1.7], f32)
    first = rg({"dY": dy, "X": x, "scales": sc}, {})
    np.testing.assert_allclose(first[0, 0, 0], [2.7128, 2.9550, 2.7612, 1.4533], atol=1e-4)
    with pytest.raises(ValueError, match="scales"):
        rg({"dY": dy, "X": x, "scales": np.array([1, 1, 1.0, 1.7], f32)}, {})
    sc[2:] = 1.5  # the same array, mutated: floor(4 * 1.5) = 6, another mapping
    second = rg({"dY": dy, "X": x, "scales": sc}, {})
    assert not np.array_equal(first, second)
    assert_bitwise(second, rg({"dY": dy, "X": x, "scales": sc.tolist()}, {}))
    ib = T.get_kernel("InterpolateBackward", "cython").kernel_func
    src, dd = np.zeros((1, 2, 2, 2), f32), np.ones((1, 4, 4, 2), f32)
    assert_bitwise(ib({"src": src, "diff_dst": dd, "sizes": np.array([4, 4])}, {"mode": "linear"}),
                   np.full((1, 2, 2, 2), 4.0, f32))
    with pytest.raises(ValueError, match="sizes"):
        ib({"src": src, "diff_dst": dd, "sizes": np.array([4, 5])}, {"mode": "linear"})


BAD_CALLS = {
    "bilinear rank": lambda: T.resize_bilinear_grad(np.ones((4, 4, 2), f32),
                                                    np.zeros((1, 2, 2, 2), f32)),
    "bilinear both flags": lambda: T.resize_bilinear_grad(
        np.ones((1, 4, 4, 2), f32), np.zeros((1, 2, 2, 2), f32), align_corners=True,
        half_pixel_centers=True),
    "nearest size": lambda: T.resize_nearest_neighbor_grad(np.ones((1, 4, 4, 2), f32), (0, 2)),
    "nearest grads rank": lambda: T.resize_nearest_neighbor_grad(np.ones((4, 4, 2), f32), (2, 2)),
    "interp channels": lambda: T.interpolate_backward(np.zeros((1, 2, 2, 3), f32),
                                                      np.ones((1, 4, 4, 2), f32), mode="linear"),
    "interp sizes": lambda: T.interpolate_backward(np.zeros((1, 2, 2, 2), f32),
                                                   np.ones((1, 4, 4, 2), f32), mode="linear",
                                                   sizes=[4, 5]),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_a_bad_call_fails_every_time(name):
    messages = []
    for _ in range(3):
        with pytest.raises((ValueError, TypeError)) as info:
            BAD_CALLS[name]()
        messages.append(str(info.value))
    assert len(set(messages)) == 1, messages


def test_a_good_call_after_a_bad_one_with_the_same_shapes():
    src, dd = np.zeros((1, 2, 2, 2), f32), np.ones((1, 4, 4, 2), f32)
    with pytest.raises(ValueError, match="sizes"):
        T.interpolate_backward(src, dd, mode="linear", sizes=[4, 5])
    got = T.interpolate_backward(src, dd, mode="linear", sizes=[4, 4])
    # 4 -> 2 half-pixel linear, ones: every source pixel gathers weights summing to 2 per axis
    assert_bitwise(got, np.full((1, 2, 2, 2), 4.0, f32))


def test_no_user_array_is_kept_alive():
    dy = np.ones((1, 8, 8, 4), f32)
    img = np.zeros((1, 4, 4, 4), f32)
    sizes = np.array([8, 8])
    refs = [weakref.ref(a) for a in (dy, img, sizes)]
    for _ in range(2):
        T.resize_bilinear_grad(dy, img, half_pixel_centers=True)
        T.resize_nearest_neighbor_grad(dy, (4, 4))
        T.interpolate_backward(img, dy, mode="bilinear", sizes=sizes)
    del dy, img, sizes
    gc.collect()
    assert all(r() is None for r in refs)


def test_same_shapes_different_values_stay_bitwise_equal_to_a_first_call():
    """Ones then twos: every element of the second is twice the first (a power-of-two scale is
    exact in float32), so no state of the first call leaked."""
    ones = np.ones((1, 6, 6, 8), f32)
    first = T.resize_nearest_neighbor_grad(ones, (4, 4), half_pixel_centers=True)
    again = T.resize_nearest_neighbor_grad(ones * 2, (4, 4), half_pixel_centers=True)
    assert_bitwise(again, first * 2)
    # resized 6 -> original 4, half-pixel nearest: floor((x + 0.5) * (4/6)) maps x = 0..5 to
    # 0, 1, 1, 2, 3, 3 (float32: 1.5 * 0.6666667 = 1.0000001, 4.5 * 0.6666667 = 3.0000002), so
    # per axis the original pixels take 1, 2, 1, 2 resized ones, and a dx element their product
    counts = np.array([1, 2, 1, 2], f32)
    assert_bitwise(first, np.broadcast_to((counts[:, None] * counts)[None, :, :, None],
                                          (1, 4, 4, 8)).astype(f32))


def test_nearest_placeholder_image_is_read_only_and_holds_no_data():
    """The functional nearest grad passes the registry a shape-and-dtype-only ``images``: a
    backend must not be able to write into it."""
    seen = {}

    def spy(inputs, attrs):
        seen["images"] = inputs["images"]
        return T.get_kernel("ResizeNearestNeighborGrad", "numpy").kernel_func(inputs, attrs)

    T.register_kernel(T.KernelConfig("ResizeNearestNeighborGrad", "spy_backend", spy))
    try:
        T.resize_nearest_neighbor_grad(np.ones((2, 6, 4, 3), f32), (3, 2), backend="spy_backend")
    finally:
        T.unregister_kernel("ResizeNearestNeighborGrad", "spy_backend")
    images = seen["images"]
    assert images.shape == (2, 3, 2, 3) and images.dtype == f32
    assert not images.flags.writeable and images.strides == (0, 0, 0, 0)
    assert not images.any()


def test_functional_nearest_sizes_are_checked_every_call():
    dy = np.ones((1, 4, 4, 8), f32)
    want = T.resize_nearest_neighbor_grad(dy, [2, 2], backend="numpy")
    # every dx element gets 4 ones (each 2x2 block of dy lands on one pixel)
    assert_bitwise(want, np.full((1, 2, 2, 8), 4.0, f32))
    for _ in range(2):
        assert_bitwise(T.resize_nearest_neighbor_grad(dy, [2, 2]), want)
        with pytest.raises(TypeError, match=r"size\[0\]"):
            T.resize_nearest_neighbor_grad(dy, [2.5, 2])
        with pytest.raises(TypeError, match=r"size\[1\]"):
            T.resize_nearest_neighbor_grad(dy, (2, True))
        with pytest.raises(ValueError, match="size"):
            T.resize_nearest_neighbor_grad(dy, [2, 2, 1])
        with pytest.raises(ValueError, match="size"):
            T.resize_nearest_neighbor_grad(dy, [0, 2])
        with pytest.raises(ValueError, match="grads"):
            T.resize_nearest_neighbor_grad(dy[0], [2, 2])
        with pytest.raises(TypeError, match="grads"):
            T.resize_nearest_neighbor_grad(dy.astype(np.complex64), [2, 2])
    # other array-likes and integral sizes: the checks' conversions, the same result
    assert_bitwise(T.resize_nearest_neighbor_grad(dy.tolist(), [2, 2]), want)  # as TF: float32
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, np.array([2, 2])), want)
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, [np.int64(2), 2]), want)
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, [2.0, 2]), want)


def test_functional_calls_follow_the_registry():
    """backend=None runs the default backend's registered kernel_func, through set_backend, a
    replacement registered with overwrite=True and its removal."""
    dy = np.ones((1, 2, 2, 1), f32)
    img = np.zeros((1, 1, 1, 1), f32)
    seen = []

    def mine(inputs, attrs):
        seen.append(attrs)
        return np.full((1, 1, 1, 1), 7.0, f32)

    assert T.resize_bilinear_grad(dy, img)[0, 0, 0, 0] == 4.0
    T.register_kernel(T.KernelConfig("ResizeBilinearGrad", "mine", mine))
    try:
        T.set_backend("mine")
        assert T.resize_bilinear_grad(dy, img)[0, 0, 0, 0] == 7.0
        assert T.resize_bilinear_grad(dy, img, backend="cython")[0, 0, 0, 0] == 4.0
        T.set_backend("cython")
        assert T.resize_bilinear_grad(dy, img)[0, 0, 0, 0] == 4.0
        original = T.get_kernel("ResizeBilinearGrad", "cython")
        T.register_kernel(T.KernelConfig("ResizeBilinearGrad", "cython", mine), overwrite=True)
        try:
            assert T.resize_bilinear_grad(dy, img)[0, 0, 0, 0] == 7.0
            T.unregister_kernel("ResizeBilinearGrad", "cython")
            with pytest.raises(KeyError, match="not registered"):
                T.resize_bilinear_grad(dy, img)
        finally:
            T.register_kernel(original, overwrite=True)
        assert T.resize_bilinear_grad(dy, img)[0, 0, 0, 0] == 4.0
        assert len(seen) == 2
    finally:
        T.set_backend("cython")
        T.unregister_kernel("ResizeBilinearGrad", "mine")


def test_a_fixed_thread_count_is_kept_and_a_relative_one_follows_the_environment(monkeypatch):
    from tfcompat import _threads
    try:
        T.set_num_threads(3)
        monkeypatch.setenv("OMP_NUM_THREADS", "5")
        assert T.get_num_threads() == 3
        T.set_num_threads(None)
        assert T.get_num_threads() == 5
        monkeypatch.setattr(_threads, "_available_cpus", lambda: 6)
        T.set_num_threads(-2)
        assert T.get_num_threads() == 5
        monkeypatch.setattr(_threads, "_available_cpus", lambda: 4)
        assert T.get_num_threads() == 3
        T.set_num_threads(np.int64(2))
        assert T.get_num_threads() == 2
    finally:
        T.set_num_threads(None)


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
def test_ten_thousand_distinct_calls_keep_memory_bounded():
    """Every call a new shape or attribute set, each with tables of about 240 KB (a source axis
    of 60,000): without the cache's bounds the plans would hold 2.4 GB. The cache's documented
    bound is MAX_PLAN_BYTES of tables (and MAX_PLANS plans); the RSS may grow by that, plus
    what the interpreter and the allocator keep."""
    rng = np.random.default_rng(0)
    bil = T.get_kernel("ResizeBilinearGrad", "cython").kernel_func
    nn = T.get_kernel("ResizeNearestNeighborGrad", "cython").kernel_func
    interp = T.get_kernel("InterpolateBackward", "cython").kernel_func
    dy = rng.standard_normal((1, 3, 1, 1)).astype(f32)
    flags = [{}, {"alignCorners": True}, {"halfPixelCenters": True}]
    gc.collect()
    before = _rss_bytes()
    for k in range(10_000):
        img = np.zeros((1, 60_000 + k, 1, 1), f32)
        which = k % 4
        if which == 0:
            bil({"dy": dy, "images": img}, flags[k % 3])
        elif which == 1:
            nn({"dy": dy, "images": img}, flags[k % 3])
        else:
            mode = "linear" if which == 2 else "nearest"
            interp({"src": img, "diff_dst": dy, "sizes": [3, 1]}, {"mode": mode})
    gc.collect()
    grown = _rss_bytes() - before
    cache = _plans.PLANS
    assert len(cache.plans) <= _plans.MAX_PLANS
    assert cache.nbytes <= _plans.MAX_PLAN_BYTES
    assert grown <= _plans.MAX_PLAN_BYTES + (16 << 20), f"RSS grew {grown / 2**20:.1f} MiB"
