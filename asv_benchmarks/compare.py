"""Side-by-side timings of tfcompat against TensorFlow (and PyTorch where installed).

    python -m asv_benchmarks.compare [resize|forward|interp|conv|all] [--repeat 7] [--threads 2]
                                     [--warmup 0.1] [--dtypes float32,float16,...] [--peers]
                                     [--json out.json] [--plot out.png] [--markdown]

``--peers`` adds the peer backends (conformance.peers: tfjs-cpu, onednn, jax, jax-antialias; torch
is always timed when installed), each called through its registry kernel_func on the same data,
and prints their times over ours. An implementation whose first call takes more than
``--slow`` seconds (tfjs's JavaScript kernels, whose times include the transfer to Node) is
timed apart, with three runs, so that it does not stretch the others' interleaved rounds.

One process; for every workload the implementations are called in turn (interleaved), after
two warm-up calls each and ``--warmup`` seconds of interleaved rounds, and each gets the median
of ``--repeat`` runs. Printed per workload:
medians, ratios (TF time / ours, torch time / ours: above 1 means we are faster), our effective
bandwidth as a percentage of a NumPy copy (resize ops: (|dy| + |dx|) bytes / time) or our
GFLOP/s as a percentage of a NumPy float32 matmul (conv), both measured in the same run, a
floor and TF's time over it, and the peak memory our call allocates beyond its output
(tracemalloc). A float32 conv also gets TF's time over its FLOPs at this CPU's float32
multiply-add peak (tfcompat's instrument ``instrument_fma_peak``, timed before each row like the
matmul): no implementation can be further ahead of TF than that.

The floor of a resize workload is tfcompat's ``stream_floor`` on arrays of |dy| and |dx| bytes:
it reads the one once and writes the other once with the same threads, and nothing else, so no
resampling backward can do much better. It takes its turn after the implementations, so it
meets the caches as they leave them. (A NumPy copy is no floor here: it writes as many bytes as
it reads, and on this kind of machine reading alone runs about twice as fast.) The floor of a
conv is its FLOPs at the matmul's speed (not shown for float64). TF/floor is then the most any
implementation could be ahead of TF in that minute.
"""
import argparse
import json
import os
import platform
import sys
import time
import tracemalloc

import numpy as np

from . import impls as I
from .timing import blas_info, blas_line, median_interleaved, render  # noqa: F401
from .shapes import CONV, INTERP, RESIZE


# The practical peaks are timed right before every row (median of ``repeat`` runs), so each row
# is compared with the machine as it was that minute. They are not interleaved with the
# implementations: OpenBLAS's worker threads keep spinning for a while after a NumPy matmul, and
# on two cores that would slow whichever implementation ran next; the warm-up calls absorb it.
_COPY_A = None
_MM = None


def copy_probe():
    """A NumPy copy of 256 MB; returns (callable, bytes read + written)."""
    global _COPY_A
    if _COPY_A is None:
        _COPY_A = (np.ones(2 ** 26, np.float32), np.empty(2 ** 26, np.float32))
    a, b = _COPY_A
    return (lambda: np.copyto(b, a)), 2 * a.nbytes


def matmul_probe():
    """A NumPy float32 matmul [4096, 1024] x [1024, 1024]; returns (callable, FLOPs)."""
    global _MM
    if _MM is None:
        rng = np.random.default_rng(0)
        _MM = (rng.standard_normal((4096, 1024)).astype(np.float32),
               rng.standard_normal((1024, 1024)).astype(np.float32),
               np.empty((4096, 1024), np.float32))
    a, b, out = _MM
    return (lambda: np.matmul(a, b, out=out)), 2.0 * 4096 * 1024 * 1024


def extra_memory(fn):
    """Peak bytes a call allocates beyond what it returns (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return max(0, peak - np.asarray(out).nbytes)


# Before the timed runs of a row, its implementations run in turn for this long: the row's
# probes leave the machine idle for a moment, after which every implementation starts slow and
# speeds up over ~10 rounds, a ramp a training loop does not see (docs/performance.md).
WARMUP_S = 0.1


def run(which, repeat, threads, dtypes, warmup=WARMUP_S, peers=(), slow=0.5):
    import tfcompat
    tfcompat.set_num_threads(threads)
    rng = np.random.default_rng(0)
    rows = []
    copy_fn, copy_bytes = copy_probe()
    mm_fn, mm_flops = matmul_probe()
    fma = I.fma_peak_probe(threads)
    copies, mms, fmas = [], [], []

    def bandwidth_row(name, funcs, nbytes, dy_nbytes):
        copy = copy_bytes / median_interleaved({"copy": copy_fn}, repeat)["copy"] / 1e9
        # the floor takes its turn after the others, so it meets the caches as they leave them
        floor = I.floor_probe(dy_nbytes, nbytes - dy_nbytes, threads)
        t = median_interleaved(dict(funcs, floor=floor), repeat, warmup, slow)
        copies.append(copy)
        rows.append(_row(name, "float32", t, funcs, gbs=nbytes / t["tfcompat"] / 1e9, copy=copy))

    for kind, make in (("resize", I.make_resize), ("forward", I.make_forward)):
        if which not in (kind, "all"):
            continue
        for sid in RESIZE:
            # the floor reads dy (the grads) or the image (the forward) and writes the output
            src = (_dy_nbytes(RESIZE[sid]) if kind == "resize"
                   else int(np.prod(RESIZE[sid][0])) * 4)
            for op in ("bilinear", "nearest"):
                for flags in ("legacy", "align", "half"):
                    funcs, nbytes = make(sid, op, flags, threads, rng, peers=peers)
                    name = f"{sid} {op} {flags}" + (" forward" if kind == "forward" else "")
                    bandwidth_row(name, funcs, nbytes, src)
    if which in ("interp", "all"):
        for sid in INTERP:
            for layout in ("NXC", "NCX"):
                funcs, nbytes = I.make_interp(sid, layout, threads, rng, peers=peers)
                bandwidth_row(f"{sid} trilinear {layout}", funcs, nbytes, _dy_nbytes(INTERP[sid]))
    if which in ("conv", "all"):
        for dt in dtypes:
            for sid in CONV:
                funcs, flops = I.make_conv(sid, dt, threads, rng, peers=peers)
                mm = mm_flops / median_interleaved({"mm": mm_fn}, repeat)["mm"] / 1e9
                time.sleep(0.3)  # OpenBLAS threads spin ~2**28 cycles after a call; let them sleep
                # (the FMA peak after that: spinning threads would take its cores)
                peak = (None if fma is None
                        else fma[1] / median_interleaved({"fma": fma[0]}, repeat)["fma"] / 1e9)
                t = median_interleaved(funcs, repeat, warmup, slow)
                mms.append(mm)
                if peak is not None:
                    fmas.append(peak)
                rows.append(_row(f"{sid} conv", dt, t, funcs, gflops=flops / t["tfcompat"] / 1e9,
                                 mm=mm, fma=peak))
    copy_gbs = float(np.median(copies)) if copies else copy_bandwidth_once(copy_fn, copy_bytes)
    mm = float(np.median(mms)) if mms else None
    fma_gflops = float(np.median(fmas)) if fmas else None
    meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "threads": threads,
            "repeat": repeat, "warmup_s": warmup, "copy_GBps": round(copy_gbs, 1),
            "matmul_GFLOPs": None if mm is None else round(mm, 1),
            "fma_peak_GFLOPs": None if fma_gflops is None else round(fma_gflops, 1),
            "fma_peak_isa": None if fma is None else fma[2],
            "numpy": np.__version__}
    tf = I.tf_module()
    meta["tensorflow"] = getattr(tf, "__version__", None)
    meta["blas"] = blas_info()
    meta["kernel_build"] = tfcompat.kernel_build()
    meta["gomp_spincount"] = os.environ.get("GOMP_SPINCOUNT")
    meta["others"] = [k for k in I.OTHERS if any(k in r["others_ms"] for r in rows)]
    if "onednn" in meta["others"]:
        from conformance.peers import onednn_peer
        meta["onednn"] = f"oneDNN {onednn_peer.library().version}: {onednn_peer.LAST_IMPL}"
    torch = I.torch_module()
    meta["torch"] = getattr(torch, "__version__", None)
    return rows, meta


def _dy_nbytes(shapes):
    """float32 bytes of the resized tensor (dy) of a (forward input, dy) shape pair."""
    return 4 * int(np.prod(shapes[1]))


def copy_bandwidth_once(fn, nbytes):
    fn()
    t = time.perf_counter()
    fn()
    return nbytes / (time.perf_counter() - t) / 1e9


def _row(name, dtype, t, funcs, gbs=None, copy=None, gflops=None, mm=None, fma=None):
    row = {"workload": name, "dtype": dtype, "ours_ms": t["tfcompat"] * 1e3,
           "tf_ms": t.get("tensorflow", float("nan")) * 1e3,
           "torch_ms": t.get("torch", float("nan")) * 1e3,
           "extra_MB": extra_memory(funcs["tfcompat"]) / 2 ** 20}
    row["tf_ratio"] = row["tf_ms"] / row["ours_ms"]
    row["torch_ratio"] = row["torch_ms"] / row["ours_ms"]
    # every other implementation (the peers): its time, and its time over ours
    row["others_ms"] = {k: v * 1e3 for k, v in t.items()
                        if k not in ("tfcompat", "tensorflow", "floor")}
    row["others_ratio"] = {k: v / row["ours_ms"] for k, v in row["others_ms"].items()}
    if gbs is not None:
        row["GBps"], row["peak"], row["pct_peak"] = gbs, copy, 100 * gbs / copy
        # resize ops: the stream floor, timed in turn with the others (impls.floor_probe)
        row["floor_ms"] = t.get("floor", float("nan")) * 1e3
    else:
        row["GFLOPs"], row["peak"], row["pct_peak"] = gflops, mm, 100 * gflops / mm
        # conv: the time of its FLOPs at the float32 matmul's speed (none for float64: the
        # probe is a float32 matmul, and float64 peaks at about half its speed)
        row["floor_ms"] = (float("nan") if dtype == "float64"
                           else row["ours_ms"] * row["pct_peak"] / 100)
    # the TF/ours of an implementation as fast as the floor: how far the workload lets anyone
    # get ahead of TF on this machine, in this minute
    row["tf_ceiling"] = row["tf_ms"] / row["floor_ms"]
    # float32 conv: TF's time over the conv's FLOPs at the multiply-add peak, the bound no
    # implementation passes (the half types and float64 peak elsewhere: not shown)
    row["tf_fma_ceiling"] = (row["tf_ms"] / (row["ours_ms"] * gflops / fma)
                             if gflops is not None and fma and dtype == "float32"
                             else float("nan"))
    return row


def _fmt(v, spec):
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def table(rows, markdown=False):
    others = [k for k in I.OTHERS if k != "torch" and any(k in r.get("others_ratio", {})
                                                         for r in rows)]
    head = (["workload", "dtype", "ours ms", "TF ms", "TF/ours", "torch ms", "torch/ours"]
            + [f"{k}/ours" for k in others]
            + ["ours GB/s|GFLOP/s", "numpy copy|matmul", "% of it", "floor ms", "TF/floor",
               "TF/FMA peak", "extra MB"])
    body = [[r["workload"], r["dtype"], _fmt(r["ours_ms"], ".2f"), _fmt(r["tf_ms"], ".2f"),
             _fmt(r["tf_ratio"], ".2f"), _fmt(r["torch_ms"], ".2f"), _fmt(r["torch_ratio"], ".2f")]
            + [_fmt(r.get("others_ratio", {}).get(k), ".2f") for k in others]
            + [_fmt(r.get("GBps", r.get("GFLOPs")), ".1f"), _fmt(r["peak"], ".1f"),
               _fmt(r["pct_peak"], ".0f"), _fmt(r["floor_ms"], ".2f"),
               _fmt(r["tf_ceiling"], ".2f"), _fmt(r["tf_fma_ceiling"], ".2f"),
               _fmt(r["extra_MB"], ".1f")] for r in rows]
    if markdown:
        head = [h.replace("|", " or ") for h in head]  # a bare | would split the cell
    return render(head, body, markdown, 2)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install 'tfcompat[bench]'", file=sys.stderr)
        return False
    names = [f"{r['workload']} {r['dtype'] if r['dtype'] != 'float32' else ''}".strip() for r in rows]
    series = [("TF", [r["tf_ratio"] for r in rows])]
    for k in I.OTHERS:
        vals = [r.get("others_ratio", {}).get(k, float("nan")) for r in rows]
        if not all(np.isnan(v) for v in vals):
            series.append((k, vals))
    y = np.arange(len(rows))
    h = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(9, (0.12 + 0.1 * len(series)) * len(rows) + 1.5))
    for j, (label, vals) in enumerate(series):
        ax.barh(y - 0.4 + h * (j + 0.5), [0 if np.isnan(v) else v for v in vals], h,
                label=f"{label} time / tfcompat time")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up of tfcompat (median, interleaved; > 1 is faster; log scale)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["train"]:   # Keras steps with and without tfcompat.tf, its own options
        from asv_benchmarks import train
        return train.main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m asv_benchmarks.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", nargs="?", default="all",
                    choices=("resize", "forward", "interp", "conv", "torch", "jax", "all"),
                    help="'torch', 'jax': the PyTorch and JAX fronts "
                         "(asv_benchmarks/torch_front.py, jax_front.py), each its own "
                         "table; 'all' is the other four; 'train' (its own options: "
                         "asv_benchmarks/train.py): Keras steps with and without "
                         "tfcompat.tf")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=WARMUP_S,
                    help="seconds of interleaved warm-up rounds before each row's timed runs "
                         f"(default {WARMUP_S}; 0: two warm-up calls each only)")
    ap.add_argument("--dtypes", default="float32",
                    help="conv dtypes, comma separated (float32,float16,bfloat16,float64)")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--peers", action="store_true",
                    help="also time the peer backends (conformance.peers) on the same data")
    ap.add_argument("--slow", type=float, default=0.5,
                    help="an implementation whose first call takes longer is timed apart with "
                         "three runs (default 0.5 s)")
    ap.add_argument("--workloads", help="torch, jax: the workloads, comma separated (default "
                    "T0 and R1-R4)")
    args = ap.parse_args(argv)
    if args.repeat < 7:
        print("note: fewer than 7 repeats", file=sys.stderr)
    if args.which == "torch":
        return _torch_main(args)
    if args.which == "jax":
        return _jax_main(args)
    peers = ()
    if args.peers:
        from conformance import peers as P
        P.register_peers(overwrite=True)
        peers = tuple(b for b in P.PEER_BACKENDS if b != "torch")
    rows, meta = run(args.which, args.repeat, args.threads, args.dtypes.split(","), args.warmup,
                     peers, args.slow)
    print(f"# {meta['machine']}, {meta['cpus']} CPUs, {meta['threads']} threads, median of "
          f"{meta['repeat']} interleaved runs after {meta['warmup_s']} s of interleaved warm-up "
          f"(the NumPy copy and matmul and the FMA peak are timed before each row; medians over "
          f"rows: copy {meta['copy_GBps']} GB/s"
          + (f", float32 matmul {meta['matmul_GFLOPs']} GFLOP/s" if meta["matmul_GFLOPs"] else "")
          + (f", float32 FMA peak {meta['fma_peak_GFLOPs']} GFLOP/s ({meta['fma_peak_isa']})"
             if meta["fma_peak_GFLOPs"] else "")
          + f"); TF {meta['tensorflow']}, torch {meta['torch']}; tfcompat {meta['kernel_build']} "
          f"kernels")
    print(f"# BLAS: {blas_line(meta['blas'])}")
    if meta.get("onednn"):
        print(f"# {meta['onednn']}")
    print(table(rows, args.markdown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    if args.plot and plot(rows, args.plot):
        print(f"plot written to {args.plot}")
    return 0


def _torch_main(args):
    from . import torch_front
    import tfcompat
    import torch
    rows = torch_front.run(args.repeat, args.threads, args.warmup,
                           args.workloads.split(",") if args.workloads else None)
    print(f"# {platform.platform()}, {os.cpu_count()} CPUs, {args.threads} threads (ours and "
          f"PyTorch's), median of {args.repeat} interleaved runs after {args.warmup} s of "
          f"interleaved warm-up; torch {torch.__version__}, TF "
          f"{getattr(I.tf_module(), '__version__', None)}; tfcompat {tfcompat.kernel_build()} "
          "kernels")
    print(torch_front.table(rows, args.markdown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    return 0


def _jax_main(args):
    from . import jax_front
    rows = jax_front.run(args.repeat, args.threads, args.warmup,
                         args.workloads.split(",") if args.workloads else None)
    print(jax_front.meta_line(args.threads, args.repeat, args.warmup))
    print(jax_front.table(rows, args.markdown))
    # the batch sharded over 2 host devices against 1: the first workload asked for whose
    # batch 2 devices divide (T0's batch is 1), else R1
    even = [w for w in (args.workloads.split(",") if args.workloads else ["R1"])
            if jax_front.WORKLOADS[w][0][0] % 2 == 0]
    sharded = jax_front.sharded(args.repeat, args.warmup, 2, (even or ["R1"])[0])
    print(jax_front.sharded_table(sharded, args.markdown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "sharded": sharded}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
