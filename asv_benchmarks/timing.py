"""The benchmarks' shared instruments: interleaved medians, the BLAS line every table prints
and the table renderer (compare.py and the fronts' tables, torch_front.py and jax_front.py,
import them from here)."""
import os
import time

import numpy as np


def blas_info():
    """Each BLAS loaded in this process: library, version, the kernel it picked (OpenBLAS's
    ``architecture``: Haswell is AVX2, SkylakeX and Zen4 AVX-512) and its threads."""
    from threadpoolctl import threadpool_info
    out = []
    for lib in threadpool_info():
        if lib.get("user_api") != "blas":
            continue
        out.append({"library": os.path.basename(lib.get("filepath", "?")),
                    "api": lib.get("internal_api"), "version": lib.get("version"),
                    "architecture": lib.get("architecture"),
                    "threads": lib.get("num_threads")})
    return out


def blas_line(libs):
    env = [f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
           if k in os.environ]
    text = "; ".join(f"{b['library']} ({b['api']} {b['version']}, {b['architecture']})"
                     for b in libs) or "no BLAS loaded"
    return text + ("; environment sets " + ", ".join(env) if env else "")


def median_interleaved(funcs, repeat, warmup=0.0, slow=None):
    """Median seconds of each callable: two warm-up calls each, ``warmup`` seconds of
    interleaved rounds, then ``repeat`` interleaved timed rounds. A callable whose first call
    took more than ``slow`` seconds is timed apart (three runs) instead."""
    first, apart = {}, {}
    for k, f in funcs.items():
        t = time.perf_counter()
        f()
        first[k] = time.perf_counter() - t
    if slow is not None:
        apart = {k: funcs[k] for k in funcs if first[k] > slow}
        funcs = {k: f for k, f in funcs.items() if k not in apart}
    for f in funcs.values():
        f()
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:  # interleaved warm-up rounds (see WARMUP_S)
        for f in funcs.values():
            f()
    times = {k: [] for k in funcs}
    for _ in range(repeat):
        for k, f in funcs.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    for k, f in apart.items():
        times[k] = []
        for _ in range(3):
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: float(np.median(v)) for k, v in times.items()}


def render(head, body, markdown, labels):
    """The rows as a Markdown table, or as aligned text: the first ``labels`` columns to the
    left, the numbers to the right."""
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(b) + " |" for b in body])
    w = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    return "\n".join("  ".join(x[i].ljust(w[i]) if i < labels else x[i].rjust(w[i])
                               for i in range(len(head))) for x in [head] + body)
