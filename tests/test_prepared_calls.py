"""Prepared calls: the cython backend's per-layout ``Resampler`` (tfcompat/_kernels.pyx), which
runs a layout's kernel from C, and the remembered ResizeBilinearGrad / ResizeNearestNeighborGrad
calls that go straight from their key to it.

What must hold: a prepared call returns exactly what the general path (which the TF bitwise
tests pin down) returns, for every kernel and dtype it serves; any call it does not serve falls
through to the general path; a remembered call is only ever a call the parser accepted, with the
same dtypes, shapes and attributes."""
import gc
import weakref

import numpy as np
import pytest

import tfcompat as T
from tfcompat import _resample as rs
from tfcompat._simd import kernels as K
from tfcompat.backends import cython_backend as cb
from tfcompat.backends import numpy_backend as nb
from conftest import assert_bitwise, assert_close

f32, f64 = np.float32, np.float64


def _strided(a):
    """The values of ``a`` in an array that is not C-contiguous (every other element of a
    twice-as-wide buffer): a prepared call cannot take it, the general path copies it."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    view = wide[..., ::2]
    view[...] = a
    assert not view.flags.c_contiguous
    return view


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# (kernel, parser inputs, attrs) covering every Resampler kind: linear float32/float64 sums of
# float32 and float64 grads, nearest float32 (the gather for 8 <= C <= 64, the row kernel
# otherwise), float64 and the integers summed as uint8/uint32; 1-D, 2-D and 3-D; NXC and NCX.
def _cases():
    z = np.zeros
    return {
        "bilinear f32 C3": ("ResizeBilinearGrad", (1, 9, 7, 3), f32,
                            {"images": z((1, 4, 5, 3), f32)}, {"halfPixelCenters": True}),
        "bilinear f32 C1": ("ResizeBilinearGrad", (2, 8, 6, 1), f32,
                            {"images": z((2, 5, 3, 1), f32)}, {"alignCorners": True}),
        "bilinear f32 C64": ("ResizeBilinearGrad", (1, 6, 10, 64), f32,
                             {"images": z((1, 3, 5, 64), f32)}, {}),
        "bilinear f32 -> f64": ("ResizeBilinearGrad", (2, 7, 5, 4), f32,
                                {"images": z((2, 3, 4, 4), f64)}, {"halfPixelCenters": True}),
        "bilinear f64": ("ResizeBilinearGrad", (1, 5, 9, 6), f64,
                         {"images": z((1, 10, 3, 6), f64)}, {"alignCorners": True}),
        "nearest f32 gather": ("ResizeNearestNeighborGrad", (2, 8, 10, 16), f32,
                               {"images": z((2, 4, 5, 16), f32)}, {"halfPixelCenters": True}),
        "nearest f32 C3": ("ResizeNearestNeighborGrad", (1, 7, 9, 3), f32,
                           {"images": z((1, 3, 4, 3), f32)}, {"alignCorners": True}),
        "nearest f64": ("ResizeNearestNeighborGrad", (1, 5, 4, 9), f64,
                        {"images": z((1, 2, 7, 9), f64)}, {}),
        "nearest uint8": ("ResizeNearestNeighborGrad", (2, 6, 6, 5), np.uint8,
                          {"images": z((2, 3, 2, 5), np.uint8)}, {"halfPixelCenters": True}),
        "nearest int8": ("ResizeNearestNeighborGrad", (1, 9, 4, 2), np.int8,
                         {"images": z((1, 3, 2, 2), np.int8)}, {}),
        "nearest int32": ("ResizeNearestNeighborGrad", (1, 6, 8, 7), np.int32,
                          {"images": z((1, 2, 3, 7), np.int32)},
                          {"alignCorners": True, "halfPixelCenters": True}),
        "interp trilinear NCX": ("InterpolateBackward", (2, 3, 6, 4, 5), f32,
                                 {"src": z((2, 3, 3, 2, 4), f32)},
                                 {"mode": "trilinear", "data_format": "NCX"}),
        "interp linear 1-D f64": ("InterpolateBackward", (2, 9, 4), f64,
                                  {"src": z((2, 4, 4), f64)},
                                  {"mode": "linear", "coordinate_transformation_mode":
                                   "align_corners"}),
        "interp nearest 3-D": ("InterpolateBackward", (1, 4, 6, 2, 8), f32,
                               {"src": z((1, 2, 3, 3, 8), f32)},
                               {"mode": "nearest", "coordinate_transformation_mode":
                                "asymmetric"}),
    }


CASES = _cases()


def _problem(kernel, dy, inputs, attrs):
    key = "diff_dst" if kernel == "InterpolateBackward" else "dy"
    return rs.PARSERS[kernel](dict(inputs, **{key: dy}), attrs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_prepared_call_equals_the_general_path_and_the_reference(name):
    kernel, shape, dtype, inputs, attrs = CASES[name]
    dy = _values(np.random.default_rng(len(name)), shape, dtype)
    fast_p = _problem(kernel, dy, inputs, attrs)
    plan = cb._plan(fast_p.layout)
    assert plan.resampler is not None, "every case here is one the Resampler serves"
    fast = plan.resampler.run(dy, 2)
    assert fast is not None
    general = cb.resample(_problem(kernel, _strided(dy), inputs, attrs))
    assert_bitwise(fast, general, name)
    assert fast.flags.c_contiguous and fast.flags.writeable
    if dy.dtype.kind in "iu":
        # the integers wrap: the reference sums in float64, so compare modulo 2**bits
        ref = nb.resample(fast_p).astype(np.int64)
        bits = 8 * dy.dtype.itemsize
        assert np.array_equal((fast.astype(np.int64) - ref) % 2 ** bits, np.zeros_like(ref))
    else:
        # float32 grads into a float64 image: float32 products (TF's), so float32's tolerance
        tol_dtype = min(dy.dtype, fast_p.out_dtype, key=lambda d: d.itemsize)
        scale = nb.resample(rs.ResampleProblem(np.abs(dy), fast_p.layout))
        assert_close(fast, nb.resample(fast_p), scale, tol_dtype, what=name)


@pytest.mark.parametrize("name", ["bilinear f32 C64", "nearest f32 gather", "nearest int8",
                                  "interp trilinear NCX"])
def test_prepared_call_does_not_depend_on_the_thread_count(name):
    kernel, shape, dtype, inputs, attrs = CASES[name]
    dy = _values(np.random.default_rng(7), shape, dtype)
    r = cb._plan(_problem(kernel, dy, inputs, attrs).layout).resampler
    one = r.run(dy, 1)
    for n in (2, 3, 4):
        assert_bitwise(r.run(dy, n), one, f"{name}, {n} threads")


def test_run_declines_what_it_was_not_prepared_for():
    kernel, shape, dtype, inputs, attrs = CASES["bilinear f32 C3"]
    dy = np.ones(shape, f32)
    r = cb._plan(_problem(kernel, dy, inputs, attrs).layout).resampler
    assert r.run(dy, 1) is not None
    for other in (dy.astype(f64), _strided(dy), dy.astype(dy.dtype.newbyteorder()),
                  np.ones((1, 9, 7, 4), f32), dy.tolist(), np.ma.masked_array(dy)):
        assert r.run(other, 1) is None
    misaligned = np.frombuffer(np.zeros(dy.nbytes + 1, np.uint8)[1:].data, f32).reshape(shape)
    assert not misaligned.flags.aligned
    assert r.run(misaligned, 1) is None


def test_resampler_checks_what_it_is_given():
    kernel, shape, dtype, inputs, attrs = CASES["nearest f32 C3"]
    layout = _problem(kernel, np.ones(shape, f32), inputs, attrs).layout
    plan = cb._plan(layout)
    args = dict(linear=False, sizes=plan.sizes, tables=plan.tables, src_dtype=f32, acc_dtype=f32,
                dy_dtype=f32, out_shape=layout.out_shape, out_dtype=f32)
    K.Resampler(**args)
    for change, match in (({"tables": plan.tables[:4]}, "tables"),
                          ({"out_shape": (1, 3, 4, 4)}, "out_shape"),
                          ({"sizes": plan.sizes[:-1] + (4,)}, "out_shape"),
                          ({"dy_dtype": f64}, "item sizes"),
                          ({"src_dtype": np.int16, "acc_dtype": np.int16}, "no kernel"),
                          ({"linear": True}, "no kernel|tables")):
        with pytest.raises(ValueError, match=match):
            K.Resampler(**dict(args, **change))


def _calls(kernel):
    return T.get_kernel(kernel, "cython").kernel_func.calls


@pytest.mark.parametrize("name", ["bilinear f32 C3", "bilinear f32 -> f64", "nearest f32 gather",
                                  "nearest int8", "nearest int32"])
def test_a_repeated_registry_call_is_remembered_and_still_exact(name):
    kernel, shape, dtype, inputs, attrs = CASES[name]
    rng = np.random.default_rng(3)
    func = T.get_kernel(kernel, "cython").kernel_func
    a, b = _values(rng, shape, dtype), _values(rng, shape, dtype)
    first = func(dict(inputs, dy=a), attrs)
    key = K.tf_pair_key(dict(inputs, dy=a), attrs)
    assert key is not None and key in _calls(kernel)
    # the remembered call, with new values: the general path's result for them
    assert_bitwise(func(dict(inputs, dy=b), dict(attrs)), cb.resample(_problem(kernel, _strided(b),
                                                                               inputs, attrs)))
    assert_bitwise(func(dict(inputs, dy=a), attrs), first)


def test_calls_the_key_does_not_cover_take_the_parser():
    """After a remembered call, a call that differs in anything the parser checks must get the
    parser's answer: an error where it gives one, the general path's result otherwise."""
    dy = np.ones((1, 4, 4, 2), f32)
    img = np.zeros((1, 2, 2, 2), f32)
    func = T.get_kernel("ResizeBilinearGrad", "cython").kernel_func
    good = func({"dy": dy, "images": img}, {"alignCorners": False})
    swapped = img.astype(img.dtype.newbyteorder())
    with pytest.raises(TypeError, match="images"):
        func({"dy": dy, "images": swapped}, {"alignCorners": False})
    with pytest.raises(TypeError, match="dy"):
        func({"dy": dy.astype(dy.dtype.newbyteorder()), "images": img}, {"alignCorners": False})
    with pytest.raises(ValueError, match="unknown attribute"):
        func({"dy": dy, "images": img}, {"alignCorners": False, "align_corners": True})
    with pytest.raises(TypeError, match="alignCorners"):
        func({"dy": dy, "images": img}, {"alignCorners": 0})
    with pytest.raises(ValueError, match="halfPixelCenters"):
        func({"dy": dy, "images": img}, {"alignCorners": True, "halfPixelCenters": True})
    # accepted by the parser, not by the key: np.bool_ flags, a dict subclass, a strided dy
    assert K.tf_pair_key({"dy": dy, "images": img}, {"alignCorners": np.bool_(False)}) is None
    assert_bitwise(func({"dy": dy, "images": img}, {"alignCorners": np.bool_(False)}), good)
    assert_bitwise(func(type("M", (dict,), {})(dy=dy, images=img), {}), good)
    assert_bitwise(func({"dy": _strided(dy), "images": img}, {}), good)


def test_remembered_calls_are_bounded_and_keep_no_array_alive():
    func = T.get_kernel("ResizeNearestNeighborGrad", "cython").kernel_func
    dy = np.ones((1, 2, 3, 8), f32)
    refs = [weakref.ref(dy)]
    for w in range(1, cb._REMEMBERED_CALLS + 40):
        img = np.zeros((1, 1, w, 8), f32)
        refs.append(weakref.ref(img))
        # 3 resized pixels onto w original ones (legacy nearest: floor(x * w / 3))
        got = func({"dy": dy, "images": img}, {})
        want = np.zeros((1, 1, w, 8), f32)
        scale = np.float32(w) / np.float32(3)
        np.add.at(want, (0, 0, [int(np.floor(np.float32(x) * scale)) for x in range(3)]), 2.0)
        assert_bitwise(got, want, f"w={w}")
        assert len(func.calls) <= cb._REMEMBERED_CALLS
    del dy, img
    gc.collect()
    assert all(r() is None for r in refs)


def test_functional_calls_reach_the_prepared_kernel():
    """The functional API goes through the registry's kernel_func, so a second call with the
    same shapes is a remembered one."""
    rng = np.random.default_rng(5)
    dy = rng.standard_normal((2, 8, 6, 16)).astype(f32)
    img = np.zeros((2, 4, 3, 16), f32)
    calls = _calls("ResizeBilinearGrad")
    calls.clear()
    first = T.resize_bilinear_grad(dy, img, align_corners=True)
    assert len(calls) == 1
    assert_bitwise(T.resize_bilinear_grad(dy, img, align_corners=True), first)
    nearest = _calls("ResizeNearestNeighborGrad")
    nearest.clear()
    a = T.resize_nearest_neighbor_grad(dy, [4, 3])
    assert len(nearest) == 1
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, (4, 3)), a)


def test_functional_nearest_sizes_are_checked_every_call():
    """resize_nearest_neighbor_grad remembers the images of (ndarray grads, two int sizes)
    calls that passed the checks; a size the checks reject must still be rejected after a
    call with the same values passed, and other array-likes still work."""
    from tfcompat import api
    dy = np.ones((1, 4, 4, 8), f32)
    api._known_images.clear()
    want = T.resize_nearest_neighbor_grad(dy, [2, 2], backend="numpy")
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, [2, 2]), want)
    assert len(api._known_images) == 1
    # every dx element gets 4 ones (each 2x2 block of dy lands on one pixel)
    assert_bitwise(want, np.full((1, 2, 2, 8), 4.0, f32))
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
    # not ndarray grads / not int sizes: the checks' conversions, the same result
    assert_bitwise(T.resize_nearest_neighbor_grad(dy.tolist(), [2, 2]), want.astype(f64))
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, np.array([2, 2])), want)
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, [np.int64(2), 2]), want)
    assert_bitwise(T.resize_nearest_neighbor_grad(dy, [2.0, 2]), want)  # integral floats pass
    # remembered under the checked int sizes: one key per grads dtype
    assert set(api._known_images) == {((1, 4, 4, 8), np.dtype(f32), 2, 2),
                                      ((1, 4, 4, 8), np.dtype(f64), 2, 2)}
    # another dtype is another key, checked on its own
    with pytest.raises(TypeError, match="grads"):
        T.resize_nearest_neighbor_grad(dy.astype(np.complex64), [2, 2])
    for w in range(1, 100):
        T.resize_nearest_neighbor_grad(dy, [2, w])
        assert len(api._known_images) <= 64


def test_functional_calls_follow_the_registry():
    """backend=None runs the default backend's registered kernel_func, through
    set_backend, a replacement registered with overwrite=True and its removal."""
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
