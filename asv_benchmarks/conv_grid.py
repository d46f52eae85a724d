"""A fixed, seeded grid of Conv2DBackpropInput problems, and a tool that fingerprints every
output on it, for refactors that must not change a bit.

    python -m asv_benchmarks.conv_grid bits OUT.json [--shapes 200] [--threads 1,2]
    python -m asv_benchmarks.conv_grid compare BEFORE.json AFTER.json

``bits`` runs C1-C5 (docs/semantics.md §10), SPECIAL and the first ``--shapes`` shapes of the
random grid in float32, bfloat16, float16 and float64, on each thread count, through
``tfcompat.conv2d_backprop_input`` with the cython backend, and writes a SHA-256 of each
output's bytes (with the strategy that ran). ``compare`` lists the outputs whose bits differ.
The grid is also the strategy A/B's shape set (docs/performance.md).
"""
import argparse
import hashlib
import json
import sys

import numpy as np

from .shapes import CONV, conv_out

DTYPES = ("float32", "bfloat16", "float16", "float64")


def random_convs(count, seed=20261128):
    """``count`` conv problems as dicts (input_sizes, filter shape, dy shape, attributes):
    strides 1-3, dilations 1-2, 1-512 channels (log-uniform), 1x1 to 7x7 filters, batch 1-16,
    SAME/VALID/EXPLICIT, NHWC and NCHW; at most ~2e8 multiply-adds each."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        n = int(rng.choice([1, 1, 2, 3, 4, 8, 16]))
        c, oc = (int(np.exp(rng.uniform(0, np.log(512)))) for _ in range(2))
        fh, fw = (int(rng.choice([1, 1, 2, 3, 3, 5, 7])) for _ in range(2))
        if rng.random() < 0.5:
            fw = fh
        s = int(rng.choice([1, 1, 2, 3]))
        d = int(rng.choice([1, 1, 1, 2]))
        h, w = (int(rng.integers(1, 64)) for _ in range(2))
        if rng.random() < 0.5:
            w = h
        padding = str(rng.choice(["SAME", "VALID", "EXPLICIT"]))
        pads = [int(rng.integers(0, 3)) for _ in range(4)] if padding == "EXPLICIT" else None
        eff_h, eff_w = (fh - 1) * d + 1, (fw - 1) * d + 1
        ph = (pads[0] + pads[1]) if pads else 0
        pw = (pads[2] + pads[3]) if pads else 0
        if padding == "SAME":
            oh, ow = -(-h // s), -(-w // s)
        else:
            oh, ow = (h + ph - eff_h) // s + 1, (w + pw - eff_w) // s + 1
        if oh < 1 or ow < 1:
            continue
        if n * oh * ow * oc * fh * fw * c > 2e8:
            continue
        fmt = "NHWC" if rng.random() < 0.7 else "NCHW"
        out.append(dict(id=f"g{len(out):03d}", n=n, h=h, w=w, c=c, oc=oc, fh=fh, fw=fw, s=s, d=d,
                        padding=padding, pads=pads, oh=oh, ow=ow, fmt=fmt))
    return out


def workload_convs():
    """C1-C5 in the grid's dict form."""
    out = []
    for name, (x, wshape, s, pad) in CONV.items():
        dy = conv_out(x, wshape, s, pad)
        out.append(dict(id=name, n=x[0], h=x[1], w=x[2], c=x[3], oc=wshape[3], fh=wshape[0],
                        fw=wshape[1], s=s, d=1, padding=pad, pads=None, oh=dy[1], ow=dy[2],
                        fmt="NHWC"))
    return out


# shapes on which a strategy's variant runs (asv_benchmarks/conv_ab.py variants): id, N, H, W,
# C, OC, filter, stride, padding
SPECIAL = [
    ("S1", 64, 7, 7, 256, 256, 1, 1, "VALID"),    # 1x1 of small images: folded
    ("S2", 8, 7, 7, 512, 512, 3, 1, "SAME"),      # rows of 7: the channel tiles' runs
    ("S3", 4, 14, 14, 256, 512, 3, 1, "SAME"),    # filter over 1 MiB a block: groups, raw
    ("S4", 2, 14, 14, 128, 1000, 3, 1, "SAME"),   # a group over 2 MiB: the filter copied once
    ("S5", 1, 224, 224, 64, 64, 1, 1, "VALID"),   # one image of a 1x1: short bands
    ("S6", 1, 7, 7, 512, 512, 3, 1, "SAME"),      # one small image: columns split
    ("S7", 1, 64, 64, 3, 64, 7, 2, "SAME"),       # a stem layer: few channels, one image
    ("S8", 16, 32, 32, 3, 32, 3, 1, "SAME"),      # RGB, 16 images
    ("S9", 16, 4, 4, 512, 512, 3, 1, "SAME"),     # rows of 4: runs
    ("S10", 8, 14, 14, 256, 256, 3, 2, "SAME"),   # stride 2 on 14: phase rows of 7, runs
    ("S11", 8, 4000, 1, 16, 16, (9, 1), 1, "SAME"),   # images one pixel wide: as rows
    ("S12", 2, 64, 64, 3, 4, 3, 1, "SAME"),       # 4 output channels: dx pixels in the lanes
]


def special_convs():
    """SPECIAL in the grid's dict form."""
    out = []
    for sid, n, h, w, c, oc, k, s, pad in SPECIAL:
        fh, fw = k if isinstance(k, tuple) else (k, k)
        dy = conv_out((n, h, w, c), (fh, fw, c, oc), s, pad)
        out.append(dict(id=sid, n=n, h=h, w=w, c=c, oc=oc, fh=fh, fw=fw, s=s, d=1, padding=pad,
                        pads=None, oh=dy[1], ow=dy[2], fmt="NHWC"))
    return out


def call_args(p, dtype, seed=0):
    """(input_sizes, filter, out_backprop, keyword arguments) for problem ``p`` in ``dtype``."""
    from .impls import dtype_of
    rng = np.random.default_rng(seed)
    dt = dtype_of(dtype)
    filt = rng.standard_normal((p["fh"], p["fw"], p["c"], p["oc"]), np.float32).astype(dt)
    dy = rng.standard_normal((p["n"], p["oh"], p["ow"], p["oc"]), np.float32).astype(dt)
    sizes = [p["n"], p["h"], p["w"], p["c"]]
    strides, dil = [1, p["s"], p["s"], 1], [1, p["d"], p["d"], 1]
    explicit = []
    if p["pads"]:
        t, b, l, r = p["pads"]
        explicit = [0, 0, t, b, l, r, 0, 0]
    if p["fmt"] == "NCHW":
        dy = np.ascontiguousarray(dy.transpose(0, 3, 1, 2))
        sizes = [sizes[0], sizes[3], sizes[1], sizes[2]]
        strides, dil = [1, 1, p["s"], p["s"]], [1, 1, p["d"], p["d"]]
        if explicit:
            explicit = [0, 0, 0, 0] + explicit[2:6]
    kw = dict(strides=strides, padding=p["padding"], explicit_paddings=explicit,
              data_format=p["fmt"], dilations=dil)
    return sizes, filt, dy, kw


def _strategy(sizes, filt, dy, kw):
    import tfcompat
    ask = getattr(tfcompat, "conv_strategy", None)
    return ask(sizes, filt, dy, **kw).name if ask else None


def bits(out_path, shapes, threads):
    import tfcompat
    problems = workload_convs() + special_convs() + random_convs(shapes)
    result = {}
    for p in problems:
        for dtype in DTYPES:
            args = call_args(p, dtype)
            entry = {"strategy": _strategy(*args)}
            for k in threads:
                tfcompat.set_num_threads(k)
                dx = tfcompat.conv2d_backprop_input(args[0], args[1], args[2], **args[3])
                entry[str(k)] = hashlib.sha256(np.ascontiguousarray(dx).view(np.uint8)).hexdigest()
            result[f"{p['id']}/{dtype}"] = entry
        print(p["id"], end=" ", flush=True)
    print()
    with open(out_path, "w") as f:
        json.dump(result, f, indent=0, sort_keys=True)
    same = sum(len({v for k, v in e.items() if k != "strategy"}) == 1 for e in result.values())
    print(f"{len(result)} outputs written to {out_path}; {same} the same on every thread count")


def compare(before, after):
    a, b = (json.load(open(x)) for x in (before, after))
    diff = []
    for key in sorted(set(a) | set(b)):
        ea, eb = a.get(key, {}), b.get(key, {})
        threads = sorted((set(ea) & set(eb)) - {"strategy"})
        if key not in a or key not in b or any(ea[t] != eb[t] for t in threads):
            diff.append((key, ea.get("strategy"), eb.get("strategy")))
    for key, sa, sb in diff:
        print(f"differs: {key} (strategy before {sa}, after {sb})")
    print(f"{len(set(a) & set(b))} outputs in both; {len(diff)} differ")
    return 1 if diff else 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m asv_benchmarks.conv_grid")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bits")
    b.add_argument("out")
    b.add_argument("--shapes", type=int, default=200)
    b.add_argument("--threads", default="1,2")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args(argv)
    if args.cmd == "bits":
        bits(args.out, args.shapes, [int(t) for t in args.threads.split(",")])
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
