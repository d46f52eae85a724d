"""Keras training steps with TF's kernels and with tfcompat.tf's (issue: what the plugin buys):
``python -m asv_benchmarks.compare train [--runs 3] [--models a,b,c] [--steps 8]``.

Models (NHWC, batch 8, SGD on a mean squared error, ``jit_compile=False``):

- **a**, a segmentation head as DeepLab's: a 3x3 conv, a 1x1 conv to 21 class logits, and a
  bilinear ``UpSampling2D`` by 8 (TF2's half-pixel resize) to the image: [32, 32, 128] to
  [256, 256, 21].
- **b**, a generator: conv, nearest ``Resizing`` (half-pixel), conv, ``Conv2DTranspose``
  (whose forward is Conv2DBackpropInput), conv: [16, 16, 64] to [64, 64, 3].
- **c**, b under the ``mixed_bfloat16`` policy.
- **d**, a decoder that upsamples twice: conv, bilinear ``UpSampling2D`` by 2, conv, bilinear
  ``UpSampling2D`` by 2, 1x1 conv: [32, 32, 64] to [128, 128, 8].

Three variants: TF's own kernels (``tf``), ``tfcompat.tf.enable()`` (``plugin``: its default,
the resize grads and the float16/float64 conv) and ``enable("all")`` (``plugin-all``: the
float32 and bfloat16 conv too). Each measurement is a fresh process (enabling the plugin
cannot be undone), the variants taken in turn within each run, their order rotated from run to
run: the median of 5 rounds of ``--steps`` ``train_on_batch`` steps after 5 warm-up steps. Each
process then profiles 3 steps with TF's profiler and reports each op type's time per step.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

MODELS = {"a": "segmentation head, logits upsampled x8 (bilinear, half pixel)",
          "b": "generator, nearest Resizing and Conv2DTranspose",
          "c": "b under mixed_bfloat16",
          "d": "decoder, two bilinear x2 UpSampling2D between convs"}
COVERED = ("ResizeBilinearGrad", "ResizeNearestNeighborGrad", "Conv2DBackpropInput")


def _model(name, keras):
    L = keras.layers
    if name == "a":
        layers = [keras.Input((32, 32, 128)),
                  L.Conv2D(128, 3, padding="same", activation="relu"), L.Conv2D(21, 1),
                  L.UpSampling2D(8, interpolation="bilinear")]
        return keras.Sequential(layers), (32, 32, 128), (256, 256, 21)
    if name == "d":
        layers = [keras.Input((32, 32, 64)), L.Conv2D(64, 3, padding="same", activation="relu"),
                  L.UpSampling2D(2, interpolation="bilinear"),
                  L.Conv2D(32, 3, padding="same", activation="relu"),
                  L.UpSampling2D(2, interpolation="bilinear"), L.Conv2D(8, 1)]
        return keras.Sequential(layers), (32, 32, 64), (128, 128, 8)
    layers = [keras.Input((16, 16, 64)), L.Conv2D(64, 3, padding="same", activation="relu"),
              L.Resizing(32, 32, interpolation="nearest"),
              L.Conv2D(64, 3, padding="same", activation="relu"),
              L.Conv2DTranspose(32, 3, strides=2, padding="same", activation="relu"),
              L.Conv2D(3, 3, padding="same", dtype="float32")]
    return keras.Sequential(layers), (16, 16, 64), (64, 64, 3)


def _op_type(name):
    """An executor event's op type ("node:Type"), TF's oneDNN rewrite's name folded back."""
    kind = name.rsplit(":", 1)[1]
    for prefix in ("_MklNative", "_Mkl"):
        if kind.startswith(prefix):
            kind = kind[len(prefix):]
    return kind


def _shares(logdir, steps):
    """ms per step of each op type in the profile under logdir, and of the steps."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    files = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    space = xplane_pb2.XSpace()
    with open(files[0], "rb") as f:
        space.ParseFromString(f.read())
    ops, step = {}, 0.0
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            for ev in line.events:
                name = names.get(ev.metadata_id, "")
                ms = ev.duration_ps / 1e9
                if name.startswith("one_step_on_data"):
                    step += ms
                elif ":" in name and "/" in name:
                    kind = _op_type(name)
                    ops[kind] = ops.get(kind, 0.0) + ms
    return {k: v / steps for k, v in ops.items()}, step / steps


def child(model, variant, steps):
    """One measurement (in this process): {"step_ms", "ops_ms", "profiled_step_ms", ...}."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import keras
    if variant.startswith("plugin"):
        import tfcompat.tf as ttf
        ttf.enable("all" if variant == "plugin-all" else None)
    if model == "c":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    m, xs, ys = _model(model, keras)
    m.compile(optimizer="sgd", loss="mse", jit_compile=False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8,) + xs).astype(np.float32)
    y = rng.standard_normal((8,) + ys).astype(np.float32)
    for _ in range(5):
        m.train_on_batch(x, y)
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(steps):
            m.train_on_batch(x, y)
        rounds.append((time.perf_counter() - t) / steps * 1e3)
    logdir = tempfile.mkdtemp(prefix="tfcompat-train-")
    try:
        tf.profiler.experimental.start(logdir)
        for _ in range(3):
            m.train_on_batch(x, y)
        tf.profiler.experimental.stop()
        ops, profiled = _shares(logdir, 3)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    out = {"model": model, "variant": variant, "step_ms": float(np.median(rounds)),
           "rounds_ms": rounds, "ops_ms": ops, "profiled_step_ms": profiled}
    if variant.startswith("plugin"):
        import tfcompat.tf as ttf
        out["calls"] = ttf.enabled()["calls"]
        out["conv_calls_through_python"] = ttf.enabled()["conv_calls_through_python"]
    return out


def _spawn(model, variant, steps):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-m", "asv_benchmarks.train", "--child", model,
                          variant, str(steps)], capture_output=True, text=True, env=env,
                         timeout=900)
    if run.returncode != 0:
        raise RuntimeError(f"train {model} {variant}: {run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


VARIANTS = ("tf", "plugin", "plugin-all")


def measure(models=("a", "b", "c", "d"), runs=3, steps=8, log=None):
    """{model: {variant: [results]}}, the variants in turn, rotated from run to run."""
    out = {m: {v: [] for v in VARIANTS} for m in models}
    for r in range(runs):
        for m in models:
            order = VARIANTS[r % 3:] + VARIANTS[:r % 3]
            for v in order:
                res = _spawn(m, v, steps)
                out[m][v].append(res)
                if log:
                    log(f"run {r + 1} model {m} {v}: {res['step_ms']:.1f} ms/step")
    return out


def _fmt_range(xs, f="{:.1f}"):
    return f.format(min(xs)) + "-" + f.format(max(xs)) if len(xs) > 1 else f.format(xs[0])


def table(results):
    """The markdown table of :func:`measure`'s results: ms per step, each plugin variant's
    speed-up per run (TF's step over its, the same run), the covered ops' share of TF's
    step."""
    rows = ["| model | TF's kernels ms/step | `enable()` ms/step | TF/it per run | "
            "`enable(\"all\")` ms/step | TF/it per run | covered ops' share of TF's step |",
            "|---|---|---|---|---|---|---|"]
    for m, res in results.items():
        tf_ms = [r["step_ms"] for r in res["tf"]]
        cells = []
        for v in ("plugin", "plugin-all"):
            ms = [r["step_ms"] for r in res[v]]
            cells += [_fmt_range(ms), ", ".join(f"{a / b:.2f}" for a, b in zip(tf_ms, ms))]
        shares = [100 * sum(r["ops_ms"].get(k, 0.0) for k in COVERED) / r["profiled_step_ms"]
                  for r in res["tf"] if r["profiled_step_ms"]]
        share = _fmt_range(shares, "{:.0f}") + " %" if shares else "-"
        rows.append(f"| {m}: {MODELS[m]} | {_fmt_range(tf_ms)} | " + " | ".join(cells)
                    + f" | {share} |")
    return "\n".join(rows)


def op_table(results):
    """Per model and variant, the median ms per step of each covered op (TF's profiler) and of
    the profiled step."""
    import statistics
    rows = ["| model | variant | " + " | ".join(COVERED) + " | step (profiled) |",
            "|---|---|" + "---|" * (len(COVERED) + 1)]
    for m, res in results.items():
        for v in VARIANTS:
            rs = res[v]
            cells = [f"{statistics.median(r['ops_ms'].get(k, 0.0) for r in rs):.1f}"
                     for k in COVERED]
            step = statistics.median(r["profiled_step_ms"] for r in rs)
            rows.append(f"| {m} | {v} | " + " | ".join(cells) + f" | {step:.1f} |")
    return "\n".join(rows)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(child(argv[1], argv[2], int(argv[3]))))
        return 0
    import argparse
    ap = argparse.ArgumentParser(prog="python -m asv_benchmarks.compare train")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--models", default="a,b,c,d")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    models = tuple(args.models.split(","))
    bad = [m for m in models if m not in MODELS]
    if bad:
        ap.error(f"--models: got {bad}; expected some of {list(MODELS)}")
    results = measure(models, args.runs, args.steps,
                      log=lambda s: print("#", s, file=sys.stderr, flush=True))
    print(table(results))
    print()
    print(op_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
