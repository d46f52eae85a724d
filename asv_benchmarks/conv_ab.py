"""Does each conv strategy, and each of its variants, earn its place? Interleaved A/Bs.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m asv_benchmarks.conv_ab \\
        [strategies|variants|nchw] [--shapes 48] [--dtypes float32,bfloat16,float16,float64]
        [--rounds 11] [--json OUT]

On C1-C5, the shapes on which variants run (conv_grid.SPECIAL) and the first ``--shapes``
problems of the fixed random grid (conv_grid.py), in each dtype:

- ``strategies``: the strategy tfcompat picks (A) against the one the list would pick were A
  not in it (B);
- ``variants``: for each variant of VARIANTS (a strategy's parameters changed, which turns
  one of its specialisations off), the list as it is (A) against the list with that strategy
  so changed (B), on the problems that strategy takes;
- ``nchw``: an NCHW dx of 128 MiB, transposed into a copy (A, where memory allows) against
  transposed in place image by image (B, where the copy would not fit: docs/semantics.md §11),
  on three float32 convs (NCHW_PROBLEMS).

Each pair is called in turn ``--rounds`` times after two warm-up calls each, in one process;
printed per problem: both medians and B/A (above 1: A is faster); then per strategy or
variant the best and the median B/A over its problems. One that is not 5 % faster than B on
some problem it takes does not earn its place (docs/performance.md#the-strategy-list).
"""
import argparse
import dataclasses
import json
import os
import platform
import sys
import time

import numpy as np

from .conv_grid import DTYPES, call_args, random_convs, special_convs, workload_convs

# (strategy, variant, the parameters that turn it off)
VARIANTS = [
    ("col2im", "ring of column bands", dict(band_bytes=0)),
    ("col2im", "1x1 images folded", dict(fold_pixels=0)),
    ("blas-gather", "columns split for few units", dict(split_units=0)),
    ("blas-gather", "short bands of one 1x1 image", dict(one_image_rows=0)),
    ("onednn-gather", "column classes", dict(classes=False)),
    ("onednn-gather", "merged row phases", dict(merge=False)),
    ("onednn-gather", "rows stored in AVX-512", dict(avx512_rows=False)),
    ("onednn-gather", "streaming stores", dict(stream_bytes=0)),
    ("onednn-gather", "1x1 images folded", dict(fold_pixels=0)),
    ("channel-tiles", "runs of narrow rows", dict(runs=False)),
    ("channel-tiles", "groups of columns", dict(filter_bytes=1 << 40)),
    ("channel-tiles", "group taps copied per worker", dict(raw_bytes=0)),
    ("channel-tiles", "streaming stores", dict(stream_bytes=0)),
    ("lane-tiles", "dx pixels in the lanes", dict(pixel_lanes=False)),
]


# (N, C, H = W, OC, k, stride): a 128 MiB float32 dx each, cheap to costly per byte
NCHW_PROBLEMS = [(2, 16, 1024, 8, 3, 2), (4, 32, 512, 32, 3, 2), (8, 64, 256, 64, 3, 1)]


def nchw_ab(rounds, repeat):
    from tfcompat.conv.problem import conv_problem
    from tfcompat.conv.run import run_conv
    rng = np.random.default_rng(0)
    rows = []
    print("| problem | copy ms | in place ms | B/A |\n|---|---|---|---|")
    for n, c, h, oc, k, s in NCHW_PROBLEMS:
        o = -(-h // s)
        p = conv_problem({"dy": rng.standard_normal((n, oc, o, o)).astype(np.float32),
                          "filter": rng.standard_normal((k, k, c, oc)).astype(np.float32)},
                         {"inputShape": [n, c, h, h], "strides": [1, 1, s, s], "pad": "same",
                          "dataFormat": "NCHW"})
        in_place = dataclasses.replace(p, nchw_in_place=True)
        name = f"{n}x{c}x{h}x{h} OC {oc} {k}x{k} stride {s}"
        for _ in range(repeat):
            ta, tb = ab(lambda: run_conv(p), lambda: run_conv(in_place), rounds)
            rows.append(dict(problem=name, variant="NCHW dx in place", ta=ta, tb=tb))
            print(f"| {name} | {ta * 1e3:.1f} | {tb * 1e3:.1f} | {tb / ta:.2f} |", flush=True)
    return rows


def _problem(args):
    from tfcompat.conv.problem import conv_problem, functional_attrs
    sizes, filt, dy, kw = args
    attrs = functional_attrs(sizes, filt, dy, kw["strides"], kw["padding"],
                             kw["explicit_paddings"], kw["data_format"], kw["dilations"])
    return conv_problem({"dy": dy, "filter": filt}, attrs)


def runner_up(p, machine, nthreads, name):
    """The strategy that would run problem ``p`` were ``name`` not in the list."""
    from tfcompat.conv import STRATEGIES
    p = p.as_rows() or p
    for s in STRATEGIES:
        if s.name != name and s.cannot(p, machine, nthreads, s.params) is None \
                and s.declines(p, machine, nthreads, s.params) is None:
            return s.name
    return None


def _timed(call):
    t = time.perf_counter()
    call()
    return time.perf_counter() - t


def ab(call_a, call_b, rounds):
    for _ in range(2):
        call_a()
        call_b()
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(_timed(call_a))
        tb.append(_timed(call_b))
    return float(np.median(ta)), float(np.median(tb))


def _forced(name, problem, strategies, as_rows=True):
    from tfcompat.conv.run import run_conv

    def call():
        os.environ["TFCOMPAT_CONV_STRATEGY"] = name
        try:
            run_conv(problem, strategies, as_rows)
        finally:
            del os.environ["TFCOMPAT_CONV_STRATEGY"]
    return call


def _summary(rows, key):
    print(f"\n| {key} | problems | best B/A | median B/A |\n|---|---|---|---|")
    for name in dict.fromkeys(r[key] for r in rows):
        ratios = [r["tb"] / r["ta"] for r in rows if r[key] == name]
        print(f"| {name} | {len(ratios)} | {max(ratios):.2f} | {np.median(ratios):.2f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m asv_benchmarks.conv_ab")
    ap.add_argument("what", nargs="?", default="strategies",
                    choices=["strategies", "variants", "nchw"])
    ap.add_argument("--shapes", type=int, default=48)
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--problems", default=None,
                    help="only these problem ids (comma-separated: C1, S5, g012, ...)")
    ap.add_argument("--variant", default=None, help="only variants whose name contains this")
    ap.add_argument("--repeat", type=int, default=1,
                    help="A/B each pair this many times (the B/A of each in the table)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import tfcompat
    from tfcompat.conv import STRATEGIES, current_machine
    from tfcompat.conv.run import strategy_of
    from .timing import blas_info, blas_line
    if args.threads:
        tfcompat.set_num_threads(args.threads)
    nthreads = tfcompat.get_num_threads()
    machine = current_machine()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{nthreads} threads; {machine.describe()}")
    if args.what == "nchw":
        rows = nchw_ab(args.rounds, args.repeat)
        print("# BLAS:", blas_line(blas_info()))
        _summary(rows, "variant")
        return 0
    rows = []
    problems = workload_convs() + special_convs() + random_convs(args.shapes)
    if args.problems:
        keep = args.problems.split(",")
        problems = [pr for pr in problems if pr["id"] in keep]
    if args.what == "strategies":
        print("| problem | dtype | A | B | A ms | B ms | B/A |\n|---|---|---|---|---|---|---|")
    else:
        print("| variant | problem | dtype | A ms | B ms | B/A |\n|---|---|---|---|---|---|")
    for pr in problems:
        for dtype in args.dtypes.split(","):
            p = _problem(call_args(pr, dtype))
            a = strategy_of(p, nthreads).name
            if args.what == "strategies":
                b = runner_up(p, machine, nthreads, a)
                if b is None:
                    continue
                for _ in range(args.repeat):
                    ta, tb = ab(_forced(a, p, STRATEGIES), _forced(b, p, STRATEGIES),
                                args.rounds)
                    rows.append(dict(problem=pr["id"], dtype=dtype, a=a, b=b, ta=ta, tb=tb))
                    print(f"| {pr['id']} | {dtype} | {a} | {b} | {ta * 1e3:.3f} | "
                          f"{tb * 1e3:.3f} | {tb / ta:.2f} |", flush=True)
                continue
            if p.as_rows() is not None and (not args.variant or "rows" in args.variant):
                # the rewrite of images one pixel wide, against the same strategy without it
                for _ in range(args.repeat):
                    ta, tb = ab(_forced(a, p, STRATEGIES), _forced(a, p, STRATEGIES, False),
                                args.rounds)
                    rows.append(dict(problem=pr["id"], dtype=dtype, a=a,
                                     variant="images one pixel wide as rows", ta=ta, tb=tb))
                    print(f"| images one pixel wide as rows ({a}) | {pr['id']} | {dtype} | "
                          f"{ta * 1e3:.3f} | {tb * 1e3:.3f} | {tb / ta:.2f} |", flush=True)
            for name, variant, change in VARIANTS:
                if name != a or (args.variant and args.variant not in f"{a}: {variant}"):
                    continue
                changed = tuple(dataclasses.replace(s, params=dataclasses.replace(
                    s.params, **change)) if s.name == a else s for s in STRATEGIES)
                for _ in range(args.repeat):
                    ta, tb = ab(_forced(a, p, STRATEGIES), _forced(a, p, changed), args.rounds)
                    rows.append(dict(problem=pr["id"], dtype=dtype, a=a,
                                     variant=f"{a}: {variant}", ta=ta, tb=tb))
                    print(f"| {a}: {variant} | {pr['id']} | {dtype} | {ta * 1e3:.3f} | "
                          f"{tb * 1e3:.3f} | {tb / ta:.2f} |", flush=True)
    print("# BLAS:", blas_line(blas_info()))
    _summary(rows, "a" if args.what == "strategies" else "variant")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
