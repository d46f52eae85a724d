"""python -m conformance: compare every backend of tfcompat with TensorFlow's own gradients.

    python -m conformance                       # quick grid, cython + numpy, CPU (+ GPU if any)
    python -m conformance --grid full --shard 2/4 --json part2.json
    python -m conformance --case rbg_b2_i5x7_o10x3_c3_thp_f32 --backend cython
    python -m conformance merge part1.json part2.json ...
    python -m conformance --peers --matrix docs/peer-matrix.md   # + tfjs, oneDNN, torch, JAX
"""
import argparse
import dataclasses
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _parser():
    ap = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="quick", choices=("quick", "full"))
    ap.add_argument("--case", action="append", default=[], metavar="ID",
                    help="run only this case id (repeatable)")
    ap.add_argument("--backend", action="append", default=[], metavar="NAME",
                    help="backend to test (repeatable; default: cython and numpy)")
    ap.add_argument("--bitwise", action="append", default=[], metavar="NAME",
                    help="also hold this backend to 0 ULP on float32 TF-pair resize cases "
                         "(cython always is)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu", "all"),
                    help="cpu: TF CPU oracle; gpu: GPU oracles only; all/auto: both "
                         "(auto does not fail when there is no GPU)")
    ap.add_argument("--shard", metavar="K/N", help="run the K-th of N disjoint slices")
    ap.add_argument("--report", metavar="OUT.md")
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--list", action="store_true", help="print the case ids and exit")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--torch-device", default="cuda",
                    help="device of the PyTorch GPU oracle (default cuda)")
    ap.add_argument("--peers", action="store_true",
                    help="also run the peer backends (conformance.peers: tfjs-cpu, onednn, torch, "
                         "jax, jax-antialias); a peer that differs from TF is a finding, not a "
                         "failure, unless --strict")
    ap.add_argument("--strict", action="store_true",
                    help="peers' differences and errors, and differences from PyTorch where it "
                         "stands in for TF, count in the exit status too")
    ap.add_argument("--matrix", metavar="OUT.md",
                    help="write the cross-framework matrix (OUT.md, OUT.json, OUT.png)")
    return ap


def _progress(k, n, t0, case_id, failed, enabled):
    if not enabled:
        return
    width = 30
    done = int(width * k / max(n, 1))
    rate = k / max(time.perf_counter() - t0, 1e-9)
    eta = (n - k) / rate if rate > 0 else 0
    sys.stderr.write(f"\r[{'#' * done}{'.' * (width - done)}] {k}/{n} failed {failed} "
                     f"eta {eta:4.0f}s {case_id[:48]:<48}")
    sys.stderr.flush()


def _gpu_devices(mode, torch_device):
    """([(device, [its oracle])], one line for the report)."""
    from . import oracles as O
    if mode == "cpu":
        return [], "not requested (--device cpu)"
    gpu = O.gpu_oracles(torch_device)
    if gpu and gpu[0].name.startswith("tf-"):
        return ([(o.device, [o]) for o in gpu],
                f"TF GPU oracle on {', '.join(o.device for o in gpu)} (tolerance, not bitwise; "
                "TF GPU kernels use FMA and atomics)")
    if gpu:
        return ([(o.device, [o]) for o in gpu],
                f"TF lists no GPU; PyTorch {torch_device} gradients are the GPU oracle for the "
                "modes it shares with TF")
    return [], "NO GPU FOUND: TF lists no GPU and PyTorch has no CUDA; GPU conformance was NOT run"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "merge":
        return _merge(argv[1:])
    args = _parser().parse_args(argv)
    from . import cases as C, oracles as O, report as R, runner
    try:
        cases = [C.parse_id(i) for i in args.case] if args.case else C.grid(args.grid)
        if args.shard:
            cases = C.shard(cases, args.shard)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(c.id for c in cases))
        return 0
    import tfcompat
    backends = args.backend or ["cython", "numpy"]
    peers = ()
    if args.peers:
        from conformance import peers as P
        peers = P.register_peers(overwrite=True)
        backends = list(dict.fromkeys(backends + list(peers)))
    for b in backends:
        if b not in tfcompat.list_backends():
            print(f"error: --backend {b!r} is not registered; registered: {tfcompat.list_backends()}",
                  file=sys.stderr)
            return 2
    runner.BITWISE_BACKENDS.update(args.bitwise)
    t0 = time.perf_counter()
    if O.tf_available():
        O.tf_module().get_logger().setLevel("ERROR")  # the v1 resize ops are deprecated aliases
    else:
        print("warning: TensorFlow is not installed; oracles fall back to PyTorch/NumPy "
              "(pip install 'tfcompat[tf]')", file=sys.stderr)
    gpu_devs, gpu_note = _gpu_devices(args.device, args.torch_device)
    if args.device == "gpu" and not gpu_devs:
        print(f"error: --device gpu: {gpu_note}", file=sys.stderr)
        return 2
    devices = ([] if args.device == "gpu" else [("cpu", O.ORACLES)]) + gpu_devs
    records = []
    failed = 0
    show = not args.no_progress
    for k, case in enumerate(cases):
        _progress(k, len(cases), t0, case.id, failed, show)
        for r in runner.run_case(case, backends, devices):
            failed += not r.passed and (args.strict or r.backend not in peers
                                        and not r.finding)
            records.append(dataclasses.asdict(r))
    _progress(len(cases), len(cases), t0, "done", failed, show)
    if show:
        sys.stderr.write("\n")
    elapsed = time.perf_counter() - t0
    meta = R.machine_info()
    meta.update({"grid": args.grid if not args.case else "cases", "shard": args.shard or "1/1",
                 "cases": len(cases), "backends": backends,
                 "devices": [d for d, _ in devices], "seconds": round(elapsed, 1),
                 "gpu_note": gpu_note})
    print(R.table_text(R.summarize(records)))
    counted = [r for r in records
               if args.strict or r["backend"] not in peers and not r["finding"]]
    nfail = sum(not r["passed"] for r in counted)
    findings = [r for r in records if r["finding"] and r["backend"] not in peers]
    if peers:
        from conformance import peers as P
        from . import matrix as M
        meta["peers_missing"] = {b: w for b, w in P.missing().items() if w}
        rows = M.build(records)
        print("\npeers, rows of the matrix by outcome:")
        for b, counts in M.summary(rows, backends).items():
            print(f"  {b:14s} " + ", ".join(f"{o} {n}" for o, n in counts.items() if n))
        if args.matrix:
            print("matrix written to " + ", ".join(M.write(args.matrix, rows, backends, meta)))
    print(f"\n{len(cases)} cases, {len(records)} results, {nfail} failed"
          + ("" if args.strict or not peers else " (tfcompat's own backends; peers are findings)")
          + ", "
          f"{elapsed:.1f} s (TF {meta.get('tensorflow', 'not installed')}; "
          f"{meta.get('kernel_build', '?')} kernels)")
    print(f"GPU: {gpu_note}")
    if findings:
        print(f"{len(findings)} results differ from PyTorch where it stands in for TF: findings "
              f"about PyTorch ({'counted: --strict' if args.strict else 'not counted'}; "
              "listed in the report; docs/semantics.md §9)")
    for r in counted:
        if not r["passed"]:
            print(f"FAILED {r['id']} [{r['backend']}, {r['device']}] {r['outcome']} |err|/S "
                  f"{r['norm_err']:.3e} ULP {r['ulp']} {r['note']}")
    if args.json:
        R.write_json(args.json, records, meta)
    if args.report:
        R.write_markdown(args.report, records, meta)
    return 1 if nfail else 0


def _merge(paths):
    from . import report as R
    if not paths:
        print("usage: python -m conformance merge a.json b.json ...", file=sys.stderr)
        return 2
    records, metas = R.merge(paths)
    print(R.table_text(R.summarize(records)))
    nfail = sum(not r["passed"] and not r.get("finding") for r in records)
    print(f"\n{sum(m['cases'] for m in metas)} cases from {len(paths)} files "
          f"({', '.join(m.get('shard', '?') for m in metas)}), {len(records)} results, {nfail} failed")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
