"""tfcompat.jax (docs/architecture.md#inside-jax): TF's resizes as XLA FFI custom calls in JAX.
Forward and backward equal to TF's raw ops bit for bit in float32 (TF is the oracle) under jit,
on 1 and 2 threads; grad of grad against finite differences; vmap; ahead-of-time compilation
and JAX's persistent compilation cache in a fresh process; bad input refused in the caller's
words."""
import itertools
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
tj = pytest.importorskip("tfcompat.jax")
jnp = jax.numpy

import tfcompat as T
from conformance import metric
from conformance.runner import same_bits

from helpers import random_front_cases, tf_or_skip, tf_resize, tf_resize_grad

FLAGS = [(False, False), (True, False), (False, True)]
METHODS = ("bilinear", "nearest")
CASES = random_front_cases(16, 17)


def _jitted(method, size, align, half):
    """jit of the resize and jit of its vjp (the backward alone, given a cotangent)."""
    def f(x):
        return tj.resize(x, size, method, align_corners=align, half_pixel_centers=half)

    def back(x, g):
        return jax.vjp(f, x)[1](g)[0]

    return jax.jit(f), jax.jit(back)


def _np(a):
    return np.asarray(a)


@pytest.mark.parametrize("case", CASES, ids=["b{}c{}_{}x{}_to_{}x{}".format(*c) for c in CASES])
def test_float32_forward_and_backward_equal_tf_bit_for_bit(case):
    tf = tf_or_skip()
    b, c, ih, iw, oh, ow = case
    rng = np.random.default_rng(sum(case))
    x = (rng.standard_normal((b, ih, iw, c)) * 8).astype(np.float32)
    g = rng.standard_normal((b, oh, ow, c)).astype(np.float32)
    for method, (align, half) in itertools.product(METHODS, FLAGS):
        want_y = tf_resize(tf, method, x, (oh, ow), align, half)
        want_dx = tf_resize_grad(tf, method, g, x, align, half)
        f, back = _jitted(method, (oh, ow), align, half)
        for threads in (1, 2):
            T.set_num_threads(threads)
            y = f(x)
            what = (method, align, half, threads)
            assert y.dtype == jnp.float32 and y.shape == (b, oh, ow, c), what
            assert same_bits(_np(y), want_y), what
            assert same_bits(_np(back(x, g)), want_dx), what


def test_large_calls_on_xla_pool_equal_tf():
    """Calls large enough to split into shares (run on XLA's intra-op pool; as many as
    tfcompat's thread count) give TF's bits on 1 and 2 threads."""
    tf = tf_or_skip()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 40, 50, 24)).astype(np.float32)
    g = rng.standard_normal((2, 81, 33, 24)).astype(np.float32)
    for method, (align, half) in itertools.product(METHODS, FLAGS):
        f, back = _jitted(method, (81, 33), align, half)
        for threads in (1, 2):
            T.set_num_threads(threads)
            what = (method, align, half, threads)
            assert same_bits(_np(f(x)), tf_resize(tf, method, x, (81, 33), align, half)), what
            assert same_bits(_np(back(x, g)), tf_resize_grad(tf, method, g, x, align, half)), what


def test_a_streamed_forward_through_the_c_entry_equals_tf():
    """A float32 bilinear output of 32 MiB or more (streaming stores) through the custom call:
    TF's bits."""
    tf = tf_or_skip()
    x = np.random.default_rng(9).standard_normal((1, 61, 67, 32)).astype(np.float32)
    f, _ = _jitted("bilinear", (512, 513), False, True)
    want = tf_resize(tf, "bilinear", x, (512, 513), False, True)
    assert want.nbytes >= 32 << 20 and same_bits(_np(f(x)), want)


@pytest.mark.parametrize("np_dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16",
                                                                            "bfloat16"])
def test_half_types_are_tf_float32_results_rounded_once(np_dtype):
    """float16/bfloat16: TF's float32 forward of the half-type image rounded once (nearest
    copies it); the backward is TF's grad of the half-type image given the grad as float32
    (bilinear) or as it is (nearest), rounded once by TF itself."""
    tf = tf_or_skip()
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 5, 7, 3)) * 4).astype(np_dtype)
    g = rng.standard_normal((2, 9, 4, 3)).astype(np_dtype)
    for method, (align, half) in itertools.product(METHODS, FLAGS):
        f, back = _jitted(method, (9, 4), align, half)
        y = f(x)
        assert y.dtype == np_dtype
        want = tf_resize(tf, method, x, (9, 4), align, half)
        assert same_bits(_np(y), want.astype(np_dtype)), (method, align, half)
        g_tf = g.astype(np.float32) if method == "bilinear" else g
        dx = back(x, g)
        assert dx.dtype == np_dtype
        assert same_bits(_np(dx), tf_resize_grad(tf, method, g_tf, x, align, half)), method


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32"])
def test_integer_nearest_is_tf_s_copy_and_has_no_gradient(dtype):
    """The nearest forward copies TF's integer types (the op table's dtypes of
    ResizeNearestNeighbor) under jit and vmap, TF's bits in every flag; JAX refuses the
    gradient of an integer input itself, and the bilinear resize refuses integers by name."""
    tf = tf_or_skip()
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.min, info.max, (2, 5, 7, 3)).astype(dtype)
    for align, half in FLAGS:
        want = tf.raw_ops.ResizeNearestNeighbor(images=x, size=[9, 4], align_corners=align,
                                                half_pixel_centers=half).numpy()
        f, _ = _jitted("nearest", (9, 4), align, half)
        got = _np(f(x))
        assert got.dtype == want.dtype and same_bits(got, want), (align, half)
        assert same_bits(_np(jax.vmap(f)(x[:, None]))[:, 0], want)
    with pytest.raises(TypeError, match="integer"):
        jax.grad(lambda x: tj.resize(x, (9, 4), "nearest").sum())(x)
    with pytest.raises(TypeError, match=f"x: got dtype {dtype}; tfcompat.jax.resize takes "
                                         "float32, float64, float16, bfloat16 with "
                                         "method='bilinear'"):
        tj.resize(x, (9, 4))


def test_float64_within_the_metric_of_tf():
    """float64 (x64 on) bilinear computes in float64: within the float32 metric of TF's result,
    forward and backward (scales: the NumPy reference on the absolute values). Nearest is TF's
    own float64 kernel: the same bits."""
    tf = tf_or_skip()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 5, 4))
    g = rng.standard_normal((2, 11, 3, 4))
    with jax.enable_x64(True):
        for method, (align, half) in itertools.product(METHODS, FLAGS):
            kw = dict(align_corners=align, half_pixel_centers=half)
            f, back = _jitted(method, (11, 3), align, half)
            y, dx = _np(f(x)), _np(back(x, g))
            assert y.dtype == dx.dtype == np.float64
            if method == "nearest":
                assert same_bits(y, tf_resize(tf, method, x, (11, 3), align, half))
                assert same_bits(dx, tf_resize_grad(tf, method, g, x, align, half))
                continue
            want = tf_resize(tf, method, x, (11, 3), align, half)
            scale = T.resize_bilinear(np.abs(x), [11, 3], backend="numpy", **kw)
            assert metric.compare(y, want, scale, np.float32).passed, kw
            want = tf_resize_grad(tf, method, g.astype(np.float32), x, align, half)
            scale = T.resize_bilinear_grad(np.abs(g), x, backend="numpy", **kw)
            assert metric.compare(dx, want, scale, np.float32).passed, kw


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("flags", FLAGS, ids=["legacy", "align", "half"])
def test_grad_of_grad_against_finite_differences(method, flags):
    """jax.test_util.check_grads, reverse mode to order 2, in float64: the first and second
    derivatives of a non-linear function of the resize against central differences of the
    forward."""
    from jax.test_util import check_grads
    align, half = flags
    with jax.enable_x64(True):
        x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 5, 4, 3)))

        def f(x):
            y = tj.resize(x, (7, 3), method, align_corners=align, half_pixel_centers=half)
            return jnp.sum(jnp.sin(y) * y)

        check_grads(f, (x,), order=2, modes=["rev"])
        check_grads(jax.jit(f), (x,), order=2, modes=["rev"])


def test_vmap_folds_into_the_batch():
    """vmap over a leading axis (and two) gives the per-example results, forward and grad,
    bit for bit; jit(vmap(grad)) too."""
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((3, 2, 5, 6, 4)).astype(np.float32)
    w = rng.standard_normal((2, 9, 7, 4)).astype(np.float32)
    for method, (align, half) in itertools.product(METHODS, FLAGS):
        def f(x):
            return tj.resize(x, (9, 7), method, align_corners=align, half_pixel_centers=half)

        def loss(x):
            return jnp.sum(f(x) * w)

        ys = jax.vmap(f)(xs)
        grads = jax.jit(jax.vmap(jax.grad(loss)))(xs)
        for i in range(3):
            assert same_bits(_np(ys[i]), _np(f(xs[i])))
            assert same_bits(_np(grads[i]), _np(jax.grad(loss)(xs[i])))
        twice = jax.vmap(jax.vmap(f))(xs.reshape(3, 2, 1, 5, 6, 4)[:, :, 0:1])
        assert twice.shape == (3, 2, 1, 9, 7, 4)


def test_ahead_of_time_compile_and_the_hand_worked_legacy_case():
    """TF1's legacy mode on [0, 10] resized to 4: source x = 0, 0.5, 1, 1.5 (scale 1/2), the
    last clamped to pixel 1: 0, 5, 10, 10 (jax.image.resize's half-pixel linear gives 0, 2.5,
    7.5, 10); its grad: each input pixel collects the weights that read it, 1.5 and 2.5.
    Compiled ahead of time with jit(...).lower(...).compile()."""
    x = jnp.asarray([[[[0.0], [10.0]]]])
    f = jax.jit(lambda x: tj.resize(x, (1, 4))).lower(x).compile()
    assert _np(f(x)).ravel().tolist() == [0.0, 5.0, 10.0, 10.0]
    g = jax.jit(jax.grad(lambda x: jnp.sum(tj.resize(x, (1, 4))))).lower(x).compile()
    assert _np(g(x)).ravel().tolist() == [1.5, 2.5]


def test_persistent_compilation_cache_in_a_fresh_process(tmp_path):
    """An executable loaded from JAX's persistent compilation cache by a second process (no
    tracing, no plan made at trace time) finds its plan by signature and gives the first
    process's bits."""
    script = textwrap.dedent(f"""
        import jax, numpy as np
        jax.config.update("jax_compilation_cache_dir", {str(tmp_path / 'cache')!r})
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        import jax.monitoring
        hits = []
        jax.monitoring.register_event_listener(
            lambda name, *a, **kw: hits.append(name) if "cache_hits" in name else None)
        jax.monitoring.register_event_duration_secs_listener(
            lambda name, *a, **kw: hits.append(name) if "cache_hits" in name else None)
        import tfcompat.jax as tj
        x = np.arange(2 * 5 * 6 * 3, dtype=np.float32).reshape(2, 5, 6, 3) / 7
        f = jax.jit(jax.grad(lambda x: (tj.resize(x, (9, 4), align_corners=True) ** 2).sum()))
        dx = np.asarray(f(x)).tobytes().hex()
        print(len(hits), dx)
    """)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env={**os.environ, "JAX_PLATFORMS": "cpu"})
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(out.stdout.split())
    assert runs[0][0] == "0" and int(runs[1][0]) >= 1, runs    # the second run hit the cache
    assert runs[0][1] == runs[1][1]


def test_a_serialized_export_runs_in_a_fresh_process(tmp_path):
    """jax.export's serialized grad, deserialized by a process that never traced the resize
    (it calls tfcompat.jax.register() first), gives this process's bits: the computation holds
    the kernel code and flags only, and the plans are found by signature."""
    x = np.arange(2 * 5 * 6 * 3, dtype=np.float32).reshape(2, 5, 6, 3) / 7
    f = jax.jit(jax.grad(lambda x: (tj.resize(x, (9, 4), align_corners=True) ** 2).sum()))
    exp = jax.export.export(f, disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call(tj.TARGET)])(x)
    (tmp_path / "grad.bin").write_bytes(exp.serialize())
    script = textwrap.dedent(f"""
        import jax, numpy as np
        import tfcompat.jax as tj
        tj.register()
        exp = jax.export.deserialize(bytearray(open({str(tmp_path / 'grad.bin')!r}, "rb").read()))
        x = np.arange(2 * 5 * 6 * 3, dtype=np.float32).reshape(2, 5, 6, 3) / 7
        print(np.asarray(exp.call(x)).tobytes().hex())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == np.asarray(f(x)).tobytes().hex()



SHARDED = '''
import json, os, sys
N = int(sys.argv[1])
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={N}"
import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
import tfcompat.jax as tj

out = {}
rng = np.random.default_rng(0)
x = rng.standard_normal((2 * N, 4 * N, 7, 2 * N)).astype(np.float32)
v = rng.standard_normal(x.shape).astype(np.float32)
SIZE = (13, 5)
bits = lambda a, b: np.asarray(a).tobytes() == np.asarray(b).tobytes()

for method in ("bilinear", "nearest"):
    f = lambda x: tj.resize(x, SIZE, method, half_pixel_centers=True)
    loss = lambda x: (f(x) ** 2).sum()
    # grad of grad: the derivative of <grad(loss)(x), v>
    ggv = lambda x, v: jax.grad(lambda x: (jax.grad(loss)(x) * v).sum())(x)
    gg = lambda x: ggv(x, v)
    ref = [np.asarray(jax.jit(fn)(x)) for fn in (f, jax.grad(loss), gg)]
    r = out[method] = {}

    # shard_map with its default checks (check_vma=True), forward, grad, grad of grad
    mesh = jax.make_mesh((N,), ("b",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, P("b"))
        sm = lambda fn: jax.jit(jax.shard_map(fn, in_specs=P("b"), out_specs=P("b")))
        r["shard_map"] = [bits(sm(f)(xs), ref[0]), bits(sm(jax.grad(loss))(xs), ref[1]),
                          bits(jax.jit(jax.shard_map(ggv, in_specs=(P("b"), P("b")),
                                                     out_specs=P("b")))(
                              xs, jax.device_put(v, P("b"))), ref[2])]
        # a loss summed over shards: grad through the custom call of each shard
        r["shard_map_global_grad"] = bits(jax.jit(jax.grad(
            lambda x: (jax.shard_map(f, in_specs=P("b"), out_specs=P("b"))(x) ** 2).sum()))(xs),
            ref[1])
        # jit on the explicit-sharding mesh: the result keeps the batch sharding
        y = jax.jit(f)(xs)
        r["explicit"] = [bits(y, ref[0]), str(jax.typeof(y).sharding.spec),
                         bits(jax.jit(jax.grad(loss))(xs), ref[1])]
        # an explicit H sharding: undone before the call, the gradient sharded as x is
        xh = jax.device_put(x, P(None, "b"))
        gh = jax.jit(jax.grad(loss))(xh)
        r["explicit_h"] = [bits(jax.jit(f)(xh), ref[0]), bits(gh, ref[1]),
                           str(jax.typeof(gh).sharding.spec)]
        # no channels: an empty result of x's type, and its gradient, inside shard_map
        xe = jax.device_put(np.zeros((2 * N, 4, 4, 0), np.float32), P("b"))
        r["empty"] = list(sm(jax.grad(lambda x: f(x).sum()))(xe).shape)

    # jit over NamedShardings of an auto mesh: batch, then channels
    amesh = jax.make_mesh((N,), ("d",), axis_types=(AxisType.Auto,))
    for name, spec in (("batch", P("d")), ("channels", P(None, None, None, "d"))):
        xs = jax.device_put(x, NamedSharding(amesh, spec))
        row = r[name] = {}
        for what, fn, want in (("forward", f, ref[0]), ("grad", jax.grad(loss), ref[1])):
            jf = jax.jit(fn)
            y = jf(xs)
            hlo = jf.lower(xs).compile().as_text()
            row[what] = {"bits": bits(y, want), "spec": str(y.sharding.spec),
                         "all_gather": "all-gather" in hlo,
                         "per_device": [list(s.data.shape) for s in y.addressable_shards][:1]}
    # pmap over the batch
    xp = x.reshape(N, 2, *x.shape[1:])
    r["pmap"] = bits(np.asarray(jax.pmap(f)(xp)).reshape(ref[0].shape), ref[0])
    # vmap still folds its axis into the batch
    r["vmap"] = bits(jax.jit(jax.vmap(f))(xp).reshape(ref[0].shape), ref[0])
print(json.dumps(out))
'''


@pytest.mark.parametrize("devices", [2, 4])
def test_sharded_calls_compute_each_shard_on_its_device_with_the_unsharded_bits(devices):
    """On 2 and 4 host devices (a fresh process: XLA_FLAGS fixes the count at start), against
    the same calls unsharded: shard_map with its default checks (forward, grad, grad of grad,
    and a grad through a shard_map), jit on an explicit-sharding mesh (batch, and H: undone
    before the call), jit over batch- and
    channel-sharded NamedShardings of an auto mesh (the compiled HLO holds no all-gather, each
    device computes its shard, the result keeps the input's sharding), pmap and vmap: the
    same bits."""
    run = subprocess.run([sys.executable, "-c", SHARDED, str(devices)], capture_output=True,
                         text=True, timeout=600, cwd=os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__))))
    assert run.returncode == 0, run.stderr[-3000:]
    out = __import__("json").loads(run.stdout.strip().splitlines()[-1])
    n = devices
    for method in METHODS:
        r = out[method]
        assert r["shard_map"] == [True, True, True] and r["shard_map_global_grad"], method
        assert r["explicit"] == [True, "P('b', None, None, None)", True], method
        assert r["explicit_h"] == [True, True, "P(None, 'b', None, None)"], method
        assert r["empty"] == [2 * n, 4, 4, 0], method
        for name, spec, local in (("batch", "P('d',)", [2, 13, 5, 2 * n]),
                                  ("channels", "P(None, None, None, 'd')", [2 * n, 13, 5, 2])):
            fwd, grad = r[name]["forward"], r[name]["grad"]
            assert fwd == {"bits": True, "spec": spec, "all_gather": False,
                           "per_device": [local]}, (method, name)
            assert grad["bits"] and grad["spec"] == spec and not grad["all_gather"]
        assert r["pmap"] and r["vmap"], method



TWO_PROCESSES = '''
import json, os, sys
pid, port = int(sys.argv[1]), sys.argv[2]
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid)
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
import tfcompat.jax as tj
x = np.random.default_rng(0).standard_normal((4, 9, 7, 3)).astype(np.float32)
mesh = jax.make_mesh((2,), ("d",), axis_types=(AxisType.Auto,))
sh = NamedSharding(mesh, P("d"))
xs = jax.make_array_from_callback(x.shape, sh, lambda idx: x[idx])
f = lambda x: tj.resize(x, (13, 5), half_pixel_centers=True)
loss = lambda x: (f(x) ** 2).sum()
jf, jg = jax.jit(f), jax.jit(jax.grad(loss))
y, g = jf(xs), jg(xs)
hlo = jf.lower(xs).compile().as_text()
# this process's shard against the same call, unsharded, on its own images
lo = pid * 2
mine = jax.device_put(x[lo:lo + 2], jax.local_devices()[0])
want_y, want_g = np.asarray(jax.jit(f)(mine)), np.asarray(jax.jit(jax.grad(loss))(mine))
(ys,), (gs,) = y.addressable_shards, g.addressable_shards
print(json.dumps({"pid": pid, "y": np.asarray(ys.data).tobytes() == want_y.tobytes(),
                  "g": np.asarray(gs.data).tobytes() == want_g.tobytes(),
                  "shape": list(ys.data.shape), "all_gather": "all-gather" in hlo}))
jax.distributed.shutdown()
'''


def test_two_processes_each_compute_their_shard():
    """jax.distributed on this machine (two processes, one CPU device each, gloo collectives):
    a batch sharded across the processes is resized and differentiated under jit with no
    all-gather, each process's shard with the bits of the same call on its own images."""
    import json
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    procs = [subprocess.Popen([sys.executable, "-c", TWO_PROCESSES, str(i), port], cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=300)
        finally:
            p.kill()
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for i, o in enumerate(outs):
        assert o == {"pid": i, "y": True, "g": True, "shape": [2, 13, 5, 3],
                     "all_gather": False}, o

def test_identity_and_empty_inputs():
    # an image resized to its own size: TF's cast, so an infinity stays one
    x = jnp.asarray([[[[1.0], [np.inf]], [[2.0], [3.0]]]])
    assert same_bits(_np(jax.jit(lambda x: tj.resize(x, (2, 2)))(x)), _np(x))
    # an empty batch: an empty output and an empty gradient
    e = jnp.zeros((0, 4, 4, 3))
    assert tj.resize(e, (8, 8)).shape == (0, 8, 8, 3)
    assert jax.grad(lambda e: jnp.sum(tj.resize(e, (8, 8))))(e).shape == e.shape


def test_the_handler_runs_every_kernel():
    """Each code the front sends (tfcompat._capi.CODES, from capi.h) runs the kernel of its
    name: the handler's counter of that name moves, and only the resizes' (the conv has
    none here)."""
    before = tj.library_info()["calls"]
    x = np.ones((1, 3, 3, 2), np.float32)
    for method in METHODS:
        jax.grad(lambda x: jnp.sum(tj.resize(x, (5, 5), method)))(x)
    after = tj.library_info()["calls"]
    from tfcompat.ops import OPS
    names = [name for name, op in OPS.items() if "jax" in op.fronts]
    assert sorted(after) == sorted(names)
    for name in names:
        assert after[name] > before[name], name


@pytest.mark.parametrize("call, exc, words", [
    (lambda: tj.resize(np.zeros((1, 2, 2)), (3, 3)), ValueError, "x: got shape (1, 2, 2)"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1), jnp.int32), (3, 3)), TypeError,
     "x: got dtype int32; tfcompat.jax.resize takes float32"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1)), (0, 3)), ValueError, "size: got (0, 3)"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1)), 3), ValueError, "size: got 3"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1)), (2.5, 3)), TypeError,
     "size[0]: got 2.5; expected an int"),    # as the NumPy API says it
    (lambda: jax.jit(lambda x, s: tj.resize(x, (s, 3)))(jnp.zeros((1, 2, 2, 1)), 4),
     TypeError, "not traced values"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1)), (3, 3), "bicubic"), ValueError,
     "method: got 'bicubic'"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1)), (3, 3), align_corners=True,
                       half_pixel_centers=True), ValueError, "align_corners: got True together"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1)), (3, 3), align_corners=1), TypeError,
     "align_corners: got 1; expected a bool"),
    (lambda: tj.resize(jnp.zeros((1, 0, 2, 1)), (3, 3)), ValueError,
     "x: got shape (1, 0, 2, 1); expected a non-zero height"),
    (lambda: tj.resize(jnp.zeros((1, 2, 2, 1)), (1 << 20, 1 << 20)), MemoryError,
     "size: an output of shape (1, 1048576, 1048576, 1) needs 4096.0 GiB"),
])
def test_errors_name_the_argument(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)


@pytest.mark.skipif("not any(d.platform != 'cpu' for d in jax.devices())",
                    reason="no non-CPU JAX device here")
def test_another_platform_is_refused():
    """The FFI target is the CPU's: an array on another platform is refused by name."""
    gpu = next(d for d in jax.devices() if d.platform != "cpu")
    with pytest.raises(ValueError, match="tfcompat.jax.resize runs on the CPU only"):
        tj.resize(jax.device_put(jnp.zeros((1, 2, 2, 1)), gpu), (3, 3))


def test_a_direct_custom_call_with_a_bad_kernel_is_an_error_not_a_crash():
    """The handler proves what it reads (a kernel code, ranks) before it plans: a hand-made
    custom call of the target gets XLA's error with the handler's (or the C entry's)
    message."""
    from tfcompat._capi import CODES
    from tfcompat._simd import kernels
    tj.library_info()
    x = jnp.zeros((1, 2, 2, 1))
    call = jax.ffi.ffi_call(tj.TARGET, jax.ShapeDtypeStruct((1, 3, 3, 1), x.dtype))
    kinds = np.array([kernels.ARG_KINDS["tensor"], kernels.ARG_KINDS["values"]], np.int64)
    counts = np.array([2], np.int64)

    def run(code, align, half):
        return np.asarray(call(x, kernel=np.int32(code), kinds=kinds, counts=counts,
                               values=np.array([3, 3, align, half], np.int64)))

    # the conv's code (a front's call of it is refused), and a code no kernel has
    for code, words in ((CODES["Conv2DBackpropInput"], "Conv2DBackpropInput takes TF.s"),
                        (max(CODES.values()) + 1, "expected an op's kernel code")):
        with pytest.raises(Exception, match=words):
            run(code, 0, 0)
    with pytest.raises(Exception, match="align_corners: got True together"):  # the policy layer
        run(CODES["ResizeBilinear"], 1, 1)
    np.testing.assert_array_equal(run(CODES["ResizeBilinear"], 0, 1), np.zeros((1, 3, 3, 1)))


def test_compare_jax_command_prints_every_row():
    """``python -m asv_benchmarks.compare jax`` end to end on T0: a row per method and pass,
    each with its times, and the sharded rows (the batch over 2 host devices, the same bits;
    no time asserted)."""
    import contextlib
    import io
    from asv_benchmarks import compare
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = compare.main(["jax", "--workloads", "T0", "--repeat", "1", "--warmup", "0",
                               "--markdown"])
    assert status == 0
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in out.getvalue().splitlines() if line.startswith(("| T0", "| R1"))]
    assert len(rows) == 8       # the front's four on T0, then the sharded four (R1: T0's batch
    for part in (rows[:4], rows[4:]):                           # is 1)
        assert {(r[1], r[2]) for r in part} == {(f"{m} half", p) for m in METHODS
                                                for p in ("forward", "backward")}
    for r in rows[:4]:
        assert all(float(v) > 0 for v in r[3:5] + r[6:9]), r
    for r in rows[4:]:
        assert r[5] == "2" and r[7] == "True" and all(float(v) > 0 for v in r[3:5]), r
