"""Does each conv strategy earn its place? An interleaved A/B of the strategy that runs each
problem against the one that would run without it.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m asv_benchmarks.conv_ab \\
        [--shapes 48] [--dtypes float32,bfloat16,float16,float64] [--rounds 15] [--json OUT]

For C1-C5 and the first ``--shapes`` problems of the fixed random grid (conv_grid.py), in each
dtype: the strategy tfcompat picks (A) and the first of the list that would pick it were A not
there (B), both forced through TFCOMPAT_CONV_STRATEGY, called in turn ``--rounds`` times after
two warm-up calls each; printed: both medians and B/A (above 1: A is faster), per problem,
then per strategy the best and the median B/A over the problems it takes. A strategy that is
not 5 % faster than B on some problem it takes does not earn its place
(docs/performance.md#the-strategy-list).
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from .conv_grid import DTYPES, call_args, random_convs, workload_convs


def runner_up(p, machine, nthreads, name):
    """The strategy that would run problem ``p`` were ``name`` not in the list."""
    from tfcompat.conv import strategies as S
    for s in S.STRATEGIES:
        if s.name == name:
            continue
        if s.cannot(p, machine, nthreads) is None and s.declines(p, machine, nthreads) is None:
            return s.name
    return None


def _problem(args):
    from tfcompat.conv.problem import conv_problem, functional_attrs
    sizes, filt, dy, kw = args
    attrs = functional_attrs(sizes, filt, dy, kw["strides"], kw["padding"],
                             kw["explicit_paddings"], kw["data_format"], kw["dilations"])
    p = conv_problem({"dy": dy, "filter": filt}, attrs)
    return p.as_rows() or p


def timed(name, call):
    os.environ["TFCOMPAT_CONV_STRATEGY"] = name
    try:
        t = time.perf_counter()
        call()
        return time.perf_counter() - t
    finally:
        del os.environ["TFCOMPAT_CONV_STRATEGY"]


def ab(call, a, b, rounds):
    for _ in range(2):
        timed(a, call)
        timed(b, call)
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(timed(a, call))
        tb.append(timed(b, call))
    return float(np.median(ta)), float(np.median(tb))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m asv_benchmarks.conv_ab")
    ap.add_argument("--shapes", type=int, default=48)
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import tfcompat
    from tfcompat.conv import current_machine
    from .compare import blas_info, blas_line
    if args.threads:
        tfcompat.set_num_threads(args.threads)
    nthreads = tfcompat.get_num_threads()
    machine = current_machine()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{nthreads} threads; {machine.describe()}")
    rows = []
    problems = workload_convs() + random_convs(args.shapes)
    print("| problem | dtype | A | B | A ms | B ms | B/A |\n|---|---|---|---|---|---|---|")
    for pr in problems:
        for dtype in args.dtypes.split(","):
            cargs = call_args(pr, dtype)
            a = tfcompat.conv_strategy(*cargs[:3], **cargs[3]).name
            b = runner_up(_problem(cargs), machine, nthreads, a)
            if b is None:
                continue

            def call(cargs=cargs):
                tfcompat.conv2d_backprop_input(*cargs[:3], **cargs[3])
            ta, tb = ab(call, a, b, args.rounds)
            rows.append(dict(problem=pr["id"], dtype=dtype, a=a, b=b, ta=ta, tb=tb))
            print(f"| {pr['id']} | {dtype} | {a} | {b} | {ta * 1e3:.3f} | {tb * 1e3:.3f} | "
                  f"{tb / ta:.2f} |", flush=True)
    print("# BLAS:", blas_line(blas_info()))
    print("\n| strategy A | problems | best B/A | median B/A | B |\n|---|---|---|---|---|")
    for name in sorted({r["a"] for r in rows}):
        mine = [r for r in rows if r["a"] == name]
        ratios = [r["tb"] / r["ta"] for r in mine]
        bs = sorted({r["b"] for r in mine})
        print(f"| {name} | {len(mine)} | {max(ratios):.2f} | {np.median(ratios):.2f} | "
              f"{', '.join(bs)} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
