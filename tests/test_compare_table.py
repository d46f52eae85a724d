"""The comparison command's derived columns, checked by hand arithmetic (no timing here)."""
import pytest

from asv_benchmarks import compare, timing


def test_bandwidth_row_ratios_and_ceiling():
    # ours 2 ms, TF 6 ms, torch 3 ms, the stream floor 1.5 ms; 40 MB moved at 20 GB/s = 2 ms;
    # the copy ran at 25 GB/s
    t = {"tfcompat": 2e-3, "tensorflow": 6e-3, "torch": 3e-3, "floor": 1.5e-3}
    funcs = {"tfcompat": lambda: b""}
    row = compare._row("R9 test", "float32", t, funcs, gbs=20.0, copy=25.0)
    assert row["tf_ratio"] == 3.0
    assert row["torch_ratio"] == 1.5
    assert row["pct_peak"] == 80.0
    assert row["floor_ms"] == 1.5
    assert abs(row["tf_ceiling"] - 4.0) < 1e-12  # 6 / 1.5


def test_flops_row_ceiling_and_missing_peers():
    # 10 GFLOP in 100 ms = 100 GFLOP/s against a 200 GFLOP/s matmul; TF 150 ms; no torch
    t = {"tfcompat": 0.1, "tensorflow": 0.15}
    row = compare._row("C9 conv", "float32", t, {"tfcompat": lambda: b""}, gflops=100.0, mm=200.0)
    assert row["pct_peak"] == 50.0
    assert abs(row["tf_ceiling"] - 3.0) < 1e-12  # 50 ms at the matmul's speed; 150 / 50
    text = compare.table([row])
    header, line = text.splitlines()
    assert "floor ms" in header and "TF/floor" in header
    assert line.split()[:5] == ["C9", "conv", "float32", "100.00", "150.00"]
    assert "50.00" in line.split()  # the floor
    assert "3.00" in line.split() and "-" in line.split()  # the ceiling; torch absent


def test_no_ceiling_for_float64_conv():
    # the matmul probe is float32; a float64 conv cannot be held to its speed
    t = {"tfcompat": 0.1, "tensorflow": 0.15}
    row = compare._row("C9 conv", "float64", t, {"tfcompat": lambda: b""}, gflops=50.0, mm=200.0)
    assert row["pct_peak"] == 25.0
    assert row["tf_ceiling"] != row["tf_ceiling"]  # NaN, printed as "-"
    assert row["floor_ms"] != row["floor_ms"]


def test_fma_peak_ceiling_for_float32_conv_only():
    # 10 GFLOP in 100 ms; at a 400 GFLOP/s multiply-add peak they take 25 ms; TF 150 ms
    t = {"tfcompat": 0.1, "tensorflow": 0.15}
    funcs = {"tfcompat": lambda: b""}
    row = compare._row("C9 conv", "float32", t, funcs, gflops=100.0, mm=200.0, fma=400.0)
    assert abs(row["tf_fma_ceiling"] - 6.0) < 1e-12  # 150 / 25
    header, line = compare.table([row]).splitlines()
    assert "TF/FMA peak" in header and "6.00" in line.split()
    for dtype in ("bfloat16", "float16", "float64"):  # their peaks are not float32's
        row = compare._row("C9 conv", dtype, t, funcs, gflops=100.0, mm=200.0, fma=400.0)
        assert row["tf_fma_ceiling"] != row["tf_fma_ceiling"]
    row = compare._row("C9 conv", "float32", t, funcs, gflops=100.0, mm=200.0)  # no instrument
    assert row["tf_fma_ceiling"] != row["tf_fma_ceiling"]


def test_fma_peak_probe_runs_every_chain_on_every_thread():
    # every chain computes a <- a * 0.5 + 1 from a small integer and settles at exactly 2.0
    # within 30 rounds, so the chains' sum is 2 x (chains x lanes) per thread: FLOPs / 2 per
    # round and thread, and FLOPs count 2 per lane and multiply-add
    from asv_benchmarks.impls import fma_peak_probe
    for threads in (1, 2, 3):
        probe = fma_peak_probe(threads, rounds=64)
        if probe is None:
            pytest.skip("the instrument is not built here or this CPU has no FMA")
        fn, flops, isa = probe
        assert isa in ("AVX-512", "AVX2")
        done, total = fn()
        assert done == flops
        assert total == 2.0 * (flops / 64 / 2)
    for bad, error in (({"threads": 0}, ValueError), ({"threads": 2, "rounds": 0}, ValueError),
                       ({"threads": 1.5}, TypeError), ({"threads": True}, TypeError)):
        name = "rounds" if "rounds" in bad else "threads"
        with pytest.raises(error, match=f"{name}: got"):
            fma_peak_probe(**bad)


def test_stream_floor_reads_and_writes_every_float():
    # every float of destination chunk k holds the OR of the bits of source chunk k, which
    # NumPy computes independently; NaN-filled destinations show any float left unwritten
    import numpy as np
    from asv_benchmarks.impls import stream_floor
    rng = np.random.default_rng(3)
    for ns, nd, chunks, threads in [(100, 37, 5, 2), (1000, 4000, 7, 1), (33, 33, 33, 4),
                                    (70001, 9, 9, 2)]:
        src = rng.standard_normal(ns).astype(np.float32)
        dst = np.full(nd, np.nan, np.float32)
        stream_floor(src, dst, chunks, threads)
        su, du = src.view(np.uint32), dst.view(np.uint32)
        for k in range(chunks):
            want = np.bitwise_or.reduce(su[k * ns // chunks:(k + 1) * ns // chunks])
            assert (du[k * nd // chunks:(k + 1) * nd // chunks] == want).all()
    with pytest.raises(ValueError, match="chunks: got 38"):
        stream_floor(np.ones(100, np.float32), np.ones(37, np.float32), 38, 2)


def test_warm_up_rounds_are_interleaved_and_untimed():
    """Two warm-up rounds, then whole rounds in turn for the warm-up time, then ``repeat``
    timed rounds: every implementation is called the same number of times, in the same
    order."""
    calls = []
    funcs = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    times = timing.median_interleaved(funcs, 3, warmup=0.01)
    assert sorted(times) == ["a", "b", "c"]
    assert len(calls) % 3 == 0 and calls == ["a", "b", "c"] * (len(calls) // 3)
    assert len(calls) // 3 > 2 + 3  # warm-up rounds ran before the 3 timed ones
    calls.clear()
    timing.median_interleaved(funcs, 3)  # no warm-up time: 2 rounds, then 3 timed ones
    assert calls == ["a", "b", "c"] * 5


def test_a_slow_implementation_is_timed_apart():
    """One whose first call takes longer than ``slow`` leaves the interleaved rounds: it is
    timed with three runs of its own, after the others."""
    import time
    calls = []

    def slow():
        calls.append("slow")
        time.sleep(0.02)

    funcs = {"a": lambda: calls.append("a"), "slow": slow}
    times = timing.median_interleaved(funcs, 4, slow=0.01)
    assert sorted(times) == ["a", "slow"] and times["slow"] >= 0.02
    assert calls == ["a", "slow"] + ["a"] * (1 + 4) + ["slow"] * 3
