"""tfcompat.tf (docs/architecture.md#inside-tensorflow): after ``enable()``, TF's own
ResizeBilinearGrad, ResizeNearestNeighborGrad and Conv2DBackpropInput run tfcompat's kernels,
in eager mode, in ``tf.function`` and under a GradientTape, with TF's results (computed in the
same process before ``enable()``: TF is the oracle; the conv's within the conformance metric,
and tfcompat's own bits) and TF's errors in tfcompat's words. Each scenario runs in a fresh
Python process, since enabling changes the process's TF for good."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import tf_or_skip

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(body, timeout=300, **env_vars):
    """Run ``body`` (which ends by printing one JSON line) in a fresh interpreter, with
    ``env_vars`` set; its JSON."""
    tf_or_skip()
    code = textwrap.dedent('''
        import json, os, sys
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import numpy as np
        import tensorflow as tf
        import tfcompat.tf as ttf
    ''') + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **env_vars)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_raw_ops_equal_tf_s_own_kernels_bit_for_bit():
    out = _run('''
        rng = np.random.default_rng(0)
        cases = []
        for (b, ih, iw, oh, ow, c) in [(2, 5, 7, 11, 3, 3), (1, 1, 1, 4, 3, 2), (3, 8, 8, 4, 4, 5),
                                       (2, 17, 5, 41, 9, 8), (1, 64, 64, 128, 128, 16)]:
            g = rng.standard_normal((b, oh, ow, c)).astype(np.float32)
            for dt in (np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype):
                img = np.zeros((b, ih, iw, c), dt)
                for ac, hp in ((False, False), (True, False), (False, True)):
                    cases.append(("b", g, img, ac, hp))
            for dt in (np.float32, np.float64, np.float16, np.int32, np.uint8):
                gn = (g * 10).astype(dt)
                for ac, hp in ((False, False), (True, False), (False, True), (True, True)):
                    cases.append(("n", gn, (ih, iw), ac, hp))
        def call(kind, g, second, ac, hp):
            if kind == "b":
                return tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=second,
                    align_corners=ac, half_pixel_centers=hp).numpy()
            return tf.raw_ops.ResizeNearestNeighborGrad(grads=g, size=list(second),
                align_corners=ac, half_pixel_centers=hp).numpy()
        before = [call(*c) for c in cases]
        assert ttf.enabled() is None
        ttf.enable()
        calls0 = ttf.enabled()["calls"]
        after = [call(*c) for c in cases]
        calls1 = ttf.enabled()["calls"]
        same = []
        for c, x, y in zip(cases, before, after):
            # float16 nearest grads: tfcompat sums in float32 and rounds once, TF in float16
            # (README: the documented exception); every other case: TF's bits
            if c[0] == "n" and x.dtype == np.float16:
                from conformance import metric
                scale = metric.magnitude("ResizeNearestNeighborGrad",
                                         {"dy": c[1], "images": np.zeros((c[1].shape[0],) + c[2]
                                                                         + (c[1].shape[3],),
                                                                         np.float16)},
                                         {"alignCorners": c[3], "halfPixelCenters": c[4]})
                same.append(metric.compare(y, x, scale, np.float16).passed)
            else:
                same.append(x.dtype == y.dtype and x.tobytes() == y.tobytes())
        print(json.dumps({"n": len(cases), "same": sum(same), "calls0": calls0,
                          "calls1": calls1}))
    ''')
    assert out["same"] == out["n"]
    for op in ("ResizeBilinearGrad", "ResizeNearestNeighborGrad"):
        assert out["calls1"][op] - out["calls0"][op] == out["n"] // 2 or out["calls1"][op] > \
            out["calls0"][op]
    assert sum(out["calls1"].values()) - sum(out["calls0"].values()) == out["n"]


def test_gradient_tape_in_eager_and_tf_function_equals_tf():
    out = _run('''
        rng = np.random.default_rng(1)
        x = tf.constant(rng.standard_normal((2, 10, 12, 3)).astype(np.float32))
        def grads(x):
            res = []
            for method in ("bilinear", "nearest"):
                with tf.GradientTape() as t:
                    t.watch(x)
                    y = tf.image.resize(x, (33, 7), method=method)
                    loss = tf.reduce_sum(y * y)
                res.append(t.gradient(loss, x))
            return res
        numpy = lambda ts: [t.numpy() for t in ts]
        before = numpy(grads(x) + tf.function(grads)(x))
        c0 = ttf.enable()["calls"]
        after = numpy(grads(x) + tf.function(lambda x: grads(x))(x))
        calls = {op: n - c0[op] for op, n in ttf.enabled()["calls"].items()}
        print(json.dumps({"same": [a.tobytes() == b.tobytes() for a, b in zip(before, after)],
                          "calls": calls}))
    ''')
    assert out["same"] == [True] * 4
    assert out["calls"]["ResizeBilinearGrad"] == 2
    assert out["calls"]["ResizeNearestNeighborGrad"] == 2


def test_invalid_inputs_raise_tf_errors_in_tfcompat_s_words():
    out = _run('''
        ttf.enable()
        g = np.ones((1, 4, 4, 1), np.float32)
        msgs = []
        for kwargs in (dict(grads=g[0], original_image=np.zeros((1, 2, 2, 1), np.float32)),
                       dict(grads=g, original_image=np.zeros((2, 2, 2, 1), np.float32)),
                       dict(grads=g, original_image=np.zeros((1, 2, 2, 1), np.float32),
                            align_corners=True, half_pixel_centers=True)):
            try:
                tf.raw_ops.ResizeBilinearGrad(**kwargs)
                msgs.append(None)
            except tf.errors.InvalidArgumentError as exc:
                msgs.append(exc.message)
        try:
            tf.raw_ops.ResizeNearestNeighborGrad(grads=g, size=[0, 3])
            msgs.append(None)
        except tf.errors.InvalidArgumentError as exc:
            msgs.append(exc.message)
        print(json.dumps({"msgs": msgs}))
    ''')
    m = out["msgs"]
    assert "grads: got shape (4, 4, 1) (rank 3); expected rank 4" in m[0]
    assert "grads: batch 1" in m[1] and "original_image batch 2" in m[1]
    assert "align_corners: got True together with half_pixel_centers=True" in m[2]
    assert "size" in m[3] and "expected >= 1" in m[3]


def test_jit_compile_keeps_tf_s_result_without_our_kernels():
    out = _run('''
        x = tf.constant(np.random.default_rng(2).standard_normal((1, 6, 5, 2)).astype(np.float32))
        def g(x):
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.image.resize(x, (13, 11))
            return t.gradient(y, x)
        want = tf.function(g, jit_compile=True)(x).numpy()
        c0 = ttf.enable()["calls"]["ResizeBilinearGrad"]     # enable()'s own check calls
        got = tf.function(g, jit_compile=True)(x).numpy()
        print(json.dumps({"same": want.tobytes() == got.tobytes(),
                          "calls": ttf.enabled()["calls"]["ResizeBilinearGrad"] - c0}))
    ''')
    assert out["same"] and out["calls"] == 0


def test_enable_takes_the_default_then_more_and_refuses_unknown_ops():
    out = _run('''
        first = ttf.enable()["ops"]
        more = ttf.enable(["Conv2DBackpropInput:float32"])["ops"]
        again = ttf.enable(["ResizeBilinearGrad"])["ops"]
        try:
            ttf.enable(["Conv2DBackpropInput:int32"])
            bad = None
        except ValueError as exc:
            bad = str(exc)
        print(json.dumps({"first": first, "more": more, "again": again, "bad": bad,
                          "default": ttf.DEFAULT}))
    ''')
    assert out["first"] == out["default"]
    assert out["more"]["Conv2DBackpropInput"] == ["float16", "float32", "float64"]
    assert out["again"] == out["more"]
    assert "ops: got 'Conv2DBackpropInput:int32'" in out["bad"]


def test_enable_is_idempotent_and_safe_from_threads():
    out = _run('''
        import threading
        results = []
        ts = [threading.Thread(target=lambda: results.append(ttf.enable()["library"]))
              for _ in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        again = ttf.enable()["library"]
        print(json.dumps({"libs": sorted(set(results + [again])), "n": len(results)}))
    ''')
    assert out["n"] == 4 and len(out["libs"]) == 1


KERAS_FIT = '''
    import hashlib
    import keras
    if ENABLE:
        # the default: the resize grads, and the conv in float16 and float64 only, so that a
        # float32 model's conv stays TF's (ours is TF's within the metric, not its bits)
        c0 = ttf.enable()["calls"]["ResizeBilinearGrad"]   # enable()'s own check calls
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).standard_normal((16, 8, 8, 3)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((16, 16, 16, 4)).astype(np.float32)
    m = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, padding="same"),
                          keras.layers.UpSampling2D(2, interpolation="bilinear"),
                          keras.layers.Conv2D(4, 3, padding="same")])
    m.compile(optimizer="sgd", loss="mse", jit_compile=False)
    m.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=False)
    weights = b"".join(v.numpy().tobytes() for v in m.weights)
    calls = ttf.enabled()["calls"]["ResizeBilinearGrad"] - c0 if ENABLE else 0
    print(json.dumps({"digest": hashlib.sha256(weights).hexdigest(), "calls": calls}))
'''


def test_keras_fit_weights_equal_tf_s_own():
    """Two epochs of a model with a bilinear UpSampling2D between convs: the weights are TF's
    own to the bit with our kernel in the backward (a fresh process each)."""
    pytest.importorskip("keras")
    theirs = _run("ENABLE = False\n" + textwrap.dedent(KERAS_FIT))
    ours = _run("ENABLE = True\n" + textwrap.dedent(KERAS_FIT))
    assert ours["calls"] == 8       # 2 epochs of 4 batches
    assert ours["digest"] == theirs["digest"]


def test_conformance_worker_runs_our_kernels_against_tf_s_in_this_process():
    """The harness's tf-plugin backend: TF's ops with the plugin in a worker process, equal to
    TF's own kernels here (not enabled in this process)."""
    tf = tf_or_skip()
    import numpy as np
    from conformance import tf_plugin_backend as B
    g = np.random.default_rng(4).standard_normal((2, 9, 7, 3)).astype(np.float32)
    img = np.zeros((2, 4, 5, 3), np.float32)
    attrs = {"alignCorners": False, "halfPixelCenters": True}
    got = B.resize_bilinear_grad({"dy": g, "images": img}, attrs)
    want = tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=img,
                                         half_pixel_centers=True).numpy()
    assert got.tobytes() == want.tobytes()
    assert B.WORKER.calls["ResizeBilinearGrad"] >= 1
    with pytest.raises(RuntimeError,
                       match=r"InvalidArgumentError: .*grads: got shape \(9, 7, 3\)"):
        B.resize_bilinear_grad({"dy": g[0], "images": img}, attrs)
    B.WORKER.close()



def test_each_op_s_code_registers_that_op_in_tf():
    """enable("all") sends each op's code (tfcompat._capi.CODES, from capi.h) to the plugin:
    TF's registry then lists our kernels (priority 1) under each op of COVERED (the op table's
    records with a TF front), in exactly its dtypes, and under no other TF op of the table; a
    code the plugin has no TF kernel for is refused."""
    out = _run('''
        import ctypes
        from tensorflow.python.framework import kernels
        from tfcompat import _capi, _native
        ttf.enable("all")
        ours = {}
        from tfcompat.ops import OPS
        for op in [n for n, o in OPS.items() if o.origin == "tensorflow"]:
            ours[op] = sorted(tf.as_dtype(t).name
                              for k in kernels.get_registered_kernels_for_op(op).kernel
                              if k.priority == 1 for c in k.constraint
                              for t in c.allowed_values.list.type)
        lib = ctypes.CDLL(ttf.enabled()["library"])
        lib.tfc_plugin_register.argtypes = ttf.REGISTER_ARGTYPES
        err = ctypes.create_string_buffer(256)
        # one past the last code, with a resize's arguments
        rc = lib.tfc_plugin_register(_native.capi_pointer(), max(_capi.CODES.values()) + 1,
                                     b"ResizeBilinear", 1, None, None,
                                     *ttf.register_spec("ResizeBilinear"), err, 256)
        print(json.dumps({"ours": ours, "covered": ttf.COVERED, "rc": rc,
                          "err": err.value.decode()}))
    ''')
    for op, dtypes in out["covered"].items():
        assert out["ours"][op] == sorted(dtypes), op
    assert all(dtypes == [] for op, dtypes in out["ours"].items() if op not in out["covered"])
    assert out["ours"]["ResizeBilinear"] == []
    assert out["rc"] == 1 and "no TF kernel of this library has that kernel code" in out["err"]

def test_a_call_tf_answers_with_its_own_kernel_fails_in_the_conformance_worker(monkeypatch):
    """The harness's tf-plugin backend judges whose kernel ran: with TF's oneDNN rewrite on and
    the plugin's conv left off the oneDNN op (``configure(onednn=False)``), a float32 conv is
    TF's oneDNN kernel's, and the worker says so instead of passing it; a float16 conv, where
    this CPU's oneDNN does not take it, is ours. Needs an x86 TF with oneDNN (any such CPU
    rewrites float32)."""
    tf_or_skip()
    import numpy as np
    import tfcompat.tf as ttf
    from conformance import tf_plugin_backend as B
    if "float32" not in ttf.onednn_kernels():
        pytest.skip("this TF has no oneDNN conv kernel to rewrite to")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    rng = np.random.default_rng(8)
    attrs = {"strides": [1, 1], "pad": "same", "dataFormat": "NHWC", "dilations": [1, 1],
             "inputShape": [1, 6, 6, 4]}
    try:
        B.configure(onednn=False)
        w = rng.standard_normal((3, 3, 4, 5)).astype(np.float32)
        dy = rng.standard_normal((1, 6, 6, 5)).astype(np.float32)
        with pytest.raises(RuntimeError, match=r"NotTfcompat: TF answered Conv2DBackpropInput "
                                               r"with its own kernel"):
            B.conv2d_backprop_input({"dy": dy, "filter": w}, attrs)
        B.configure()
        got = B.conv2d_backprop_input({"dy": dy, "filter": w}, attrs)
        assert got.shape == (1, 6, 6, 4) and B.WORKER.calls["Conv2DBackpropInput"] >= 1
    finally:
        B.configure()
        B.WORKER.close()


def test_the_conv_is_registered_for_every_dtype_tf_s_onednn_rewrite_can_hand_it():
    """Whatever the CPU: for every kernel TF's registry lists for the op its oneDNN rewrite
    makes of a Conv2DBackpropInput (float16 too, which TF rewrites on CPUs with AVX512-FP16),
    ours is registered with the same dtype and label above it, and each conv dtype ran ours
    when enable() checked it (with the rewrite on)."""
    out = _run('''
        from tensorflow.python.framework import kernels
        e = ttf.enable("all")
        theirs, ours = set(), set()
        for k in kernels.get_registered_kernels_for_op(ttf.ONEDNN_CONV).kernel:
            for c in k.constraint:
                for t in c.allowed_values.list.type:
                    (ours if k.priority == 1 else theirs).add(
                        (tf.as_dtype(t).name, k.label, tuple(k.host_memory_arg)))
        print(json.dumps({"theirs": sorted(theirs), "ours": sorted(ours),
                          "conv": e["ops"]["Conv2DBackpropInput"], "missed": e["missed"],
                          "labels": ttf.onednn_kernels()}))
    ''', TF_ENABLE_ONEDNN_OPTS="1")
    if not out["theirs"]:
        pytest.skip("this TF has no oneDNN conv kernel")
    assert {d for d, _, _ in out["theirs"]} >= {"float32", "bfloat16", "float16"}
    assert {(d, label) for d, label, _ in out["ours"]} == {(d, label)
                                                           for d, label, _ in out["theirs"]}
    assert all(h == ["input_sizes"] for _, _, h in out["ours"])
    assert out["conv"] == ["float16", "bfloat16", "float32", "float64"]
    assert out["missed"] == {}


def test_enable_warns_of_a_kernel_tf_did_not_run_and_does_not_list_it():
    """A forced miss: the conv kept off TF's oneDNN op (``onednn=False``) with the rewrite on.
    enable() names float32 in a RuntimeWarning with the reason and lists it under "missed",
    not "ops"; a real call confirms TF's kernel answered it."""
    out = _run('''
        import warnings
        if "float32" not in ttf.onednn_kernels():
            print(json.dumps({"skip": True}))
            sys.exit(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            e = ttf.enable(["Conv2DBackpropInput:float32", "Conv2DBackpropInput:float64"],
                           onednn=False)
        c0 = e["calls"]["Conv2DBackpropInput"]
        tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 6, 6, 4],
                                       filter=np.ones((3, 3, 4, 5), np.float32),
                                       out_backprop=np.ones((1, 6, 6, 5), np.float32),
                                       strides=[1, 1, 1, 1], padding="SAME")
        print(json.dumps({"skip": False, "warnings": [str(w.message) for w in caught
                                                      if w.category is RuntimeWarning],
                          "ops": e["ops"], "missed": e["missed"],
                          "moved": ttf.enabled()["calls"]["Conv2DBackpropInput"] - c0}))
    ''', TF_ENABLE_ONEDNN_OPTS="1")
    if out["skip"]:
        pytest.skip("this TF has no oneDNN conv kernel to rewrite to")
    assert len(out["warnings"]) == 1
    assert "Conv2DBackpropInput in float32 is not covered" in out["warnings"][0]
    assert "_MklNativeConv2DBackpropInput" in out["warnings"][0]
    assert out["ops"] == {"Conv2DBackpropInput": ["float64"]}
    assert list(out["missed"]["Conv2DBackpropInput"]) == ["float32"]
    assert "eager and in a tf.function" in out["missed"]["Conv2DBackpropInput"]["float32"]
    assert out["moved"] == 0



def test_with_tf_s_onednn_rewrite_off_the_plain_registrations_serve_every_dtype():
    """``TF_ENABLE_ONEDNN_OPTS=0`` (TF's default on CPUs without AVX512_VNNI, AVX512_BF16 or
    AMX): no call is renamed, and every kernel and dtype ran ours through its plain op."""
    out = _run('''
        e = ttf.enable("all")
        c0 = e["calls"]["Conv2DBackpropInput"]
        for dt in (np.float16, np.float32, np.float64):
            tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 6, 6, 4],
                                           filter=np.ones((3, 3, 4, 5), dt),
                                           out_backprop=np.ones((1, 6, 6, 5), dt),
                                           strides=[1, 1, 1, 1], padding="SAME")
        print(json.dumps({"ops": e["ops"], "missed": e["missed"], "covered": ttf.COVERED,
                          "moved": ttf.enabled()["calls"]["Conv2DBackpropInput"] - c0}))
    ''', TF_ENABLE_ONEDNN_OPTS="0")
    assert out["ops"] == out["covered"] and out["missed"] == {}
    assert out["moved"] == 3

def test_a_mixed_float16_keras_model_runs_our_conv():
    """Keras's mixed_float16 policy with the default enable(), TF's oneDNN rewrite on (on a
    CPU with AVX512-FP16 it renames the float16 conv): every step's input gradient of the
    second Conv2D and the Conv2DTranspose's forward ran ours, and enabled() lists float16."""
    pytest.importorskip("keras")
    out = _run('''
        import keras
        e = ttf.enable()
        keras.mixed_precision.set_global_policy("mixed_float16")
        keras.utils.set_random_seed(0)
        x = np.random.default_rng(0).standard_normal((8, 8, 8, 3)).astype(np.float32)
        y = np.random.default_rng(1).standard_normal((8, 16, 16, 4)).astype(np.float32)
        m = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(8, 3, padding="same"),
                              keras.layers.Conv2D(8, 3, padding="same"),
                              keras.layers.Conv2DTranspose(4, 3, 2, padding="same")])
        m.compile(optimizer="sgd", loss="mse", jit_compile=False)
        c0 = ttf.enabled()["calls"]["Conv2DBackpropInput"]
        m.fit(x, y, epochs=1, batch_size=4, verbose=0, shuffle=False)
        print(json.dumps({"ops": e["ops"]["Conv2DBackpropInput"], "missed": e["missed"],
                          "calls": ttf.enabled()["calls"]["Conv2DBackpropInput"] - c0,
                          "weights": str(m.layers[0].kernel.dtype)}))
    ''', TF_ENABLE_ONEDNN_OPTS="1")
    assert "float16" in out["ops"] and out["missed"] == {}
    # 2 steps of 4 samples, each: the Conv2DTranspose's forward and the second Conv2D's input
    # gradient (the first Conv2D's input is the data: Keras does not differentiate it)
    assert out["calls"] == 2 * 2, out

CONV_CASES = '''
    import ml_dtypes
    import tfcompat
    from conformance import metric
    from tfcompat.conv.problem import functional_attrs
    rng = np.random.default_rng(5)
    cases = []
    for dt in DTYPES:
        for xs, fs, st, pad, fmt, dil in [
                ((2, 10, 12, 128), (3, 3, 128, 256), 1, "SAME", "NHWC", 1),    # raw taps
                ((1, 9, 10, 120), (3, 3, 120, 256), 2, "SAME", "NHWC", 1),     # padded raw
                ((2, 11, 9, 40), (3, 3, 40, 48), 1, "VALID", "NHWC", 1),       # tap blocks
                ((2, 11, 9, 3), (3, 2, 3, 20), (2, 1), "SAME", "NHWC", 1),      # lanes
                ((2, 11, 9, 5), (3, 3, 5, 4), 1, "SAME", "NHWC", 2),
                ((3, 6, 6, 16), (1, 1, 16, 8), 1, "VALID", "NHWC", 1),        # 1x1
                ((2, 10, 1, 6), (3, 1, 6, 4), (2, 1), "SAME", "NHWC", 1),      # one pixel wide
                ((2, 5, 9, 11), (3, 3, 5, 7), 2, "SAME", "NCHW", 1)]:
            npdt = ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)
            st = (st, st) if isinstance(st, int) else st
            s4 = [1, *st, 1] if fmt == "NHWC" else [1, 1, *st]
            d4 = [1, dil, dil, 1] if fmt == "NHWC" else [1, 1, dil, dil]
            if fmt == "NHWC":
                y = tf.nn.conv2d(tf.zeros(xs, tf.float64), tf.zeros(fs, tf.float64), s4, pad,
                                 dilations=d4)
            else:
                y = tf.transpose(tf.nn.conv2d(tf.zeros((xs[0], xs[2], xs[3], xs[1]),
                                                       tf.float64), tf.zeros(fs, tf.float64),
                                              [1, *st, 1], pad, dilations=[1, dil, dil, 1]),
                                 (0, 3, 1, 2))
            w = rng.standard_normal(fs).astype(npdt)
            dy = rng.standard_normal(y.shape).astype(npdt)
            cases.append((list(xs), w, dy, dict(strides=s4, padding=pad, data_format=fmt,
                                                 dilations=d4)))
    def tf_conv(xs, w, dy, kw):
        # the harness's oracle: a half type computed by TF in float32 on the same values
        # (TF's own float16 kernel sums in float16)
        if np.dtype(w.dtype).itemsize == 2:
            w, dy = w.astype(np.float32), dy.astype(np.float32)
        return tf.raw_ops.Conv2DBackpropInput(input_sizes=xs, filter=w, out_backprop=dy,
                                              **kw).numpy()
    def tf_own(*c):
        # TF's Eigen kernels (float64) refuse dilations > 1 and NCHW as not implemented;
        # ours computes them (docs/architecture.md#inside-tensorflow)
        try:
            return tf_conv(*c)
        except tf.errors.InvalidArgumentError as exc:
            assert ("dilation rates larger than 1" in exc.message
                    or "only supports NHWC" in exc.message), exc.message
            return None
    theirs = [tf_own(*c) for c in cases]
    mine = [tfcompat.conv2d_backprop_input(*c[:3], **c[3]) for c in cases]
    ttf.enable("all")
    e0 = ttf.enabled()
    ours = [tf.raw_ops.Conv2DBackpropInput(input_sizes=c[0], filter=c[1], out_backprop=c[2],
                                           **c[3]).numpy() for c in cases]
    e1 = ttf.enabled()
    bitwise, within, refused = [], [], []
    for c, t, m, o in zip(cases, theirs, mine, ours):
        bitwise.append(o.dtype == m.dtype and o.tobytes() == m.tobytes())
        if t is None:
            refused.append(str(o.dtype))
            continue
        attrs = functional_attrs(c[0], c[1], c[2], explicit_paddings=(), **c[3])
        inputs = {"dy": c[2], "filter": c[1]}
        scale = metric.magnitude("Conv2DBackpropInput", inputs, attrs)
        within.append(bool(metric.compare(o, t, scale, o.dtype).passed))
    print(json.dumps({"n": len(cases), "bitwise": sum(bitwise), "within": sum(within),
                      "refused": refused,
                      "calls": e1["calls"]["Conv2DBackpropInput"]
                      - e0["calls"]["Conv2DBackpropInput"],
                      "python": e1["conv_calls_through_python"]
                      - e0["conv_calls_through_python"]}))
'''


@pytest.mark.parametrize("strategy", ["auto", "channel-tiles"])
def test_conv_raw_op_is_tfcompat_s_bits_and_tf_s_within_the_metric(strategy):
    """Conv2DBackpropInput in every dtype, NHWC and NCHW, strides, dilations and a 1x1: our
    kernel ran every call (TF's oneDNN rewrite of float32 and bfloat16 included), with
    tfcompat's own bits, within the metric of TF's own result; the tile strategies run in C
    (each of their filter-tap layouts with TFCOMPAT_CONV_STRATEGY=channel-tiles), the others
    through tfcompat's Python conv."""
    pytest.importorskip("ml_dtypes")
    if strategy.endswith("tiles"):
        from tfcompat.conv import current_machine
        if not current_machine().tiles:
            pytest.skip(f"{strategy} needs a CPU with AVX512F (this one: "
                        f"{current_machine().describe()})")
    # the tile kernels sum in float32: float64 only with the strategies chosen
    dtypes = ("float32", "float16", "bfloat16") + (("float64",) if strategy == "auto" else ())
    out = _run(f"DTYPES = {dtypes!r}\n" + textwrap.dedent(CONV_CASES),
               TFCOMPAT_CONV_STRATEGY=strategy)
    assert out["bitwise"] == out["n"]
    assert out["within"] == out["n"] - len(out["refused"])
    # TF's Eigen kernels refuse (float64 always; a half type where this CPU's oneDNN does not
    # take it, as on CPUs without AVX512-BF16 or AVX512-FP16); oneDNN's float32 never does
    assert "float32" not in out["refused"]
    assert ("float64" in out["refused"]) == (strategy == "auto")
    assert out["calls"] == out["n"]
    if strategy == "auto":
        from tfcompat.conv import current_machine
        # the tile strategies run in C; without AVX512F every conv runs the Python conv
        if current_machine().tiles:
            assert 0 < out["python"] < out["n"]
        else:
            assert out["python"] == out["n"]


def test_conv_gradients_and_conv2d_transpose_run_ours_in_tf_function():
    out = _run('''
        from conformance import metric
        from tfcompat.conv.problem import functional_attrs
        rng = np.random.default_rng(6)
        x = tf.constant(rng.standard_normal((2, 12, 12, 16)).astype(np.float32))
        w = tf.constant(rng.standard_normal((3, 3, 16, 32)).astype(np.float32))
        wt = tf.constant(rng.standard_normal((3, 3, 8, 16)).astype(np.float32))
        def f(x):
            with tf.GradientTape() as t:
                t.watch(x)
                y = tf.nn.conv2d(x, w, 2, "SAME")
                loss = tf.reduce_sum(y * y)
            up = tf.nn.conv2d_transpose(x, wt, (2, 24, 24, 8), 2, "SAME")
            return t.gradient(loss, x), up
        before = [a.numpy() for a in f(x)]
        ttf.enable("all")
        c0 = ttf.enabled()["calls"]["Conv2DBackpropInput"]
        after = [a.numpy() for a in tf.function(f)(x)]
        calls = ttf.enabled()["calls"]["Conv2DBackpropInput"] - c0
        dy = 2 * tf.nn.conv2d(x, w, 2, "SAME").numpy()
        checks = []
        pairs = [((x.shape, w, dy), before[0], after[0]),
                 (((2, 24, 24, 8), wt, x.numpy()), before[1], after[1])]
        for (xs, filt, g), b, a in pairs:
            st = 2
            attrs = functional_attrs(list(xs), filt, g, [1, st, st, 1], "SAME", (), "NHWC",
                                     [1, 1, 1, 1])
            scale = metric.magnitude("Conv2DBackpropInput", {"dy": g, "filter": np.asarray(filt)},
                                     attrs)
            checks.append(bool(metric.compare(a, b, scale, np.float32).passed))
        print(json.dumps({"calls": calls, "checks": checks}))
    ''')
    assert out["calls"] == 2 and out["checks"] == [True, True]


def test_conv_invalid_inputs_raise_tf_errors_in_tfcompat_s_words():
    out = _run('''
        ttf.enable(["Conv2DBackpropInput"])
        w = np.ones((3, 3, 4, 5), np.float32)
        dy = np.ones((1, 6, 6, 5), np.float32)
        msgs = []
        for kwargs in (dict(input_sizes=[1, 6, 6, 3], filter=w, out_backprop=dy),
                       dict(input_sizes=[1, 7, 7, 4], filter=w, out_backprop=dy),
                       dict(input_sizes=[6, 6, 4], filter=w, out_backprop=dy),
                       dict(input_sizes=[1, 6, 6, 4], filter=w, out_backprop=dy[0])):
            try:
                tf.raw_ops.Conv2DBackpropInput(strides=[1, 1, 1, 1], padding="SAME", **kwargs)
                msgs.append(None)
            except tf.errors.InvalidArgumentError as exc:
                msgs.append(exc.message)
        ok = tf.raw_ops.Conv2DBackpropInput(input_sizes=[1, 6, 6, 4], filter=w, out_backprop=dy,
                                            strides=[1, 1, 1, 1], padding="SAME").shape
        print(json.dumps({"msgs": msgs, "ok": list(ok),
                          "ops": sorted(ttf.enabled()["ops"])}))
    ''')
    m = out["msgs"]
    assert "filter: in_channels 4" in m[0] and "input_sizes's 3 channels" in m[0]
    assert "out_backprop: size of out_backprop doesn't match computed" in m[1]
    assert "input_sizes" in m[2] and "expected" in m[2]
    assert "out_backprop" in m[3] and "rank" in m[3]
    assert out["ok"] == [1, 6, 6, 4] and out["ops"] == ["Conv2DBackpropInput"]


def test_errors_name_tf_s_arguments_with_tf_s_error_classes():
    """Inside TF an error names the raw op's argument (``size``, ``input_sizes``,
    ``padding``) and takes TF's class: an output this machine cannot hold is
    ResourceExhaustedError (as TF answers out of memory), a bad shape InvalidArgumentError."""
    out = _run('''
        ttf.enable("all")
        def error(f):
            try:
                f()
                return None
            except tf.errors.OpError as exc:
                return [type(exc).__name__, exc.message]
        w, dy = np.ones((3, 3, 4, 5)), np.ones((1, 6, 6, 5))
        # 2^38 values of the nearest grad: 1 TiB of float32 (below the 2^40 values refused
        # as impossible, above this machine's memory)
        msgs = [error(lambda: tf.raw_ops.ResizeNearestNeighborGrad(
                    grads=np.ones((1, 4, 4, 1), np.float32), size=[1 << 20, 1 << 18])),
                error(lambda: tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=[1000, 1000, 1000, 4], filter=w, out_backprop=dy,
                    strides=[1, 1, 1, 1], padding="SAME")),
                error(lambda: tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=[1, 7, 7, 4], filter=w.astype(np.float32),
                    out_backprop=dy.astype(np.float32), strides=[1, 1, 1, 1],
                    padding="SAME"))]
        print(json.dumps({"msgs": msgs}))
    ''')
    (c0, m0), (c1, m1), (c2, m2) = out["msgs"]
    assert c0 == "ResourceExhaustedError" and "} size: an output of shape" in m0
    assert c1 == "ResourceExhaustedError" and "} input_sizes: an output of shape" in m1
    assert c2 == "InvalidArgumentError" and "padding 'SAME'" in m2 and "explicit_paddings" not in m2

def test_kernels_run_on_tf_s_intra_op_pool_without_threads_of_their_own():
    """Inside TF our kernels' shares run on TF's intra-op pool (docs/architecture.md#inside-
    tensorflow): eight large resize grads in one tf.function, and a conv, start no thread
    beyond TF's own, and give TF's bits (the conv: tfcompat's)."""
    out = _run('''
        import tfcompat
        rng = np.random.default_rng(7)
        gs = [tf.constant(rng.standard_normal((2, 64, 64, 16)).astype(np.float32))
              for _ in range(8)]
        im = tf.constant(np.zeros((2, 32, 32, 16), np.float32))
        w = rng.standard_normal((3, 3, 16, 32)).astype(np.float16)
        dy = rng.standard_normal((2, 32, 32, 32)).astype(np.float16)
        f = lambda: [tf.raw_ops.ResizeBilinearGrad(grads=g, original_image=im) for g in gs]
        want = [t.numpy() for t in tf.function(f)()]
        mine = tfcompat.conv2d_backprop_input([2, 32, 32, 16], w, dy, strides=[1, 1, 1, 1],
                                              padding="SAME")
        threads = lambda: len(os.listdir("/proc/self/task"))
        c0 = ttf.enable()["calls"]
        g = tf.function(lambda: f())
        got = [t.numpy() for t in g()]
        before = threads()
        for _ in range(20):
            got = [t.numpy() for t in g()]
            conv = tf.raw_ops.Conv2DBackpropInput(input_sizes=[2, 32, 32, 16], filter=w,
                                                  out_backprop=dy, strides=[1, 1, 1, 1],
                                                  padding="SAME").numpy()
        print(json.dumps({"same": all(a.tobytes() == b.tobytes() for a, b in zip(want, got)),
                          "conv": conv.tobytes() == mine.tobytes(),
                          "before": before, "after": threads(),
                          "calls": {op: n - c0[op]
                                    for op, n in ttf.enabled()["calls"].items()}}))
    ''')
    assert out["same"] and out["conv"]
    assert out["after"] == out["before"]
    assert out["calls"]["ResizeBilinearGrad"] == 21 * 8
    assert out["calls"]["Conv2DBackpropInput"] == 20
