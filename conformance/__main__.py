"""python -m conformance: compare every backend of tfcompat with TensorFlow's own gradients.

    python -m conformance                       # quick grid, cython + numpy, CPU (+ GPU if any)
    python -m conformance --grid full --shard 2/4 --json part2.json
    python -m conformance --case rbg_b2_i5x7_o10x3_c3_thp_f32 --backend cython
    python -m conformance merge part1.json part2.json ...
    python -m conformance --peers --matrix docs/peer-matrix.md   # + tfjs, oneDNN, torch, JAX
    python -m conformance --plugin              # + TF's ops with tfcompat.tf.enable()
    python -m conformance --jax-front           # + tfcompat.jax.resize under jax.jit
"""
import argparse
import dataclasses
import os
import sys
import textwrap
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
    ap.add_argument("--plugin", action="store_true",
                    help="also run the tf-plugin backend: TF's raw ops with tfcompat.tf.enable() "
                         "in a worker process, held to TF's bits like cython")
    ap.add_argument("--jax-front", action="store_true",
                    help="also run the jax-front backend: tfcompat.jax.resize and its vjp under "
                         "jax.jit, held to TF's bits like cython")
    ap.add_argument("--strict", action="store_true",
                    help="peers' differences and errors, and differences from PyTorch where it "
                         "stands in for TF, count in the exit status too")
    ap.add_argument("--matrix", metavar="OUT.md",
                    help="write the cross-framework matrix (OUT.md, OUT.json, OUT.png)")
    return ap


class _Progress:
    """A progress line on a terminal (redrawn with \\r), or a line at each tenth in a log
    (no \\r). The ETA counts from the tenth case on (or a tenth of them, if fewer): the first
    ones pay for TF's start-up."""

    def __init__(self, n, enabled, stream=sys.stderr):
        self.n, self.enabled, self.stream = n, enabled, stream
        self.tty = enabled and stream.isatty()
        self.mark = None            # (k, time) from which the ETA is measured
        self.tenth = 0

    def update(self, k, case_id, failed):
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.mark is None and k >= min(10, max(1, self.n // 10)):
            self.mark = (k, now)
        eta = "--"
        if self.mark is not None and k > self.mark[0]:
            rate = (k - self.mark[0]) / max(now - self.mark[1], 1e-9)
            eta = f"{(self.n - k) / rate:.0f}s"
        if self.tty:
            width = 30
            done = int(width * k / max(self.n, 1))
            self.stream.write(f"\r[{'#' * done}{'.' * (width - done)}] {k}/{self.n} failed "
                              f"{failed} eta {eta:>5} {case_id[:48]:<48}")
            if k == self.n:
                self.stream.write("\n")
        elif k * 10 // max(self.n, 1) > self.tenth or k == self.n:
            self.tenth = k * 10 // max(self.n, 1)
            self.stream.write(f"{k}/{self.n} cases, {failed} failed, eta {eta}\n")
        self.stream.flush()


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
    return [], ("none here (TF lists no GPU and PyTorch has no CUDA), so the GPU oracles did "
                "not run; the CPU results above are complete")


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
    if args.plugin:
        from conformance import tf_plugin_backend
        for config in tf_plugin_backend.KERNEL_CONFIGS:
            tfcompat.register_kernel(config, overwrite=True)
        backends = list(dict.fromkeys(backends + [tf_plugin_backend.BACKEND]))
        runner.BITWISE_BACKENDS.add(tf_plugin_backend.BACKEND)
    if args.jax_front:
        from conformance import jax_front_backend
        for config in jax_front_backend.KERNEL_CONFIGS:
            tfcompat.register_kernel(config, overwrite=True)
        backends = list(dict.fromkeys(backends + [jax_front_backend.BACKEND]))
        runner.BITWISE_BACKENDS.add(jax_front_backend.BACKEND)
        runner.BITWISE_ONLY[jax_front_backend.BACKEND] = jax_front_backend.bitwise
    for b in backends:
        if b not in tfcompat.list_backends():
            print(f"error: --backend {b!r} is not registered; registered: {tfcompat.list_backends()}",
                  file=sys.stderr)
            return 2
    runner.BITWISE_BACKENDS.update(args.bitwise)
    t0 = time.perf_counter()
    if not O.tf_available():
        print("warning: TensorFlow is not installed; oracles fall back to PyTorch/NumPy "
              "(pip install 'tfcompat[tf]')", file=sys.stderr)
    gpu_devs, gpu_note = _gpu_devices(args.device, args.torch_device)
    if args.device == "gpu" and not gpu_devs:
        print(f"error: --device gpu: {gpu_note}", file=sys.stderr)
        return 2
    devices = ([] if args.device == "gpu" else [("cpu", O.ORACLES)]) + gpu_devs
    records = []
    failed = 0
    progress = _Progress(len(cases), not args.no_progress)
    for k, case in enumerate(cases):
        progress.update(k, case.id, failed)
        for r in runner.run_case(case, backends, devices):
            failed += not r.passed and (args.strict or r.backend not in peers
                                        and not r.finding)
            records.append(dataclasses.asdict(r))
    progress.update(len(cases), "done", failed)
    elapsed = time.perf_counter() - t0
    meta = R.machine_info()
    meta.update({"grid": args.grid if not args.case else "cases", "shard": args.shard or "1/1",
                 "cases": len(cases), "backends": backends,
                 "devices": [d for d, _ in devices], "seconds": round(elapsed, 1),
                 "gpu_note": gpu_note})
    print(R.table_text(R.summarize(records, peers)))
    print(textwrap.fill(R.LEGEND, 100))
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
            written, why_not = M.write(args.matrix, rows, backends, meta)
            print("matrix written to " + ", ".join(written) + (f" ({why_not})" if why_not
                                                                else ""))
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
        print(f"records written to {args.json}")
    if args.report:
        R.write_markdown(args.report, records, meta, peers)
        print(f"report written to {args.report}")
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
