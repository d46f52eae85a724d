"""Tests of the conformance harness itself."""
import json

import numpy as np
import pytest

import tfcompat
from conformance import metric
from conformance import __main__ as cli, cases as C, oracles as O, runner


@pytest.mark.parametrize("name", ["quick", "full"])
def test_ids_round_trip_and_are_unique(name):
    cases = C.grid(name)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    for case in cases[:: max(1, len(cases) // 500)]:
        assert C.parse_id(case.id) == case


def test_grid_sizes_and_coverage():
    quick, full = C.grid("quick"), C.grid("full")
    assert 200 <= len(quick) <= 600
    assert len(full) >= 3000
    for g in (quick, full):
        assert {c.op for c in g} == set(C.OPS)
        assert {"lg", "ac", "hp"} <= {c.t for c in g if c.op == "rbg"}
        assert "achp" in {c.t for c in g if c.op == "rnn"}
        assert {"SAME", "VALID"} <= {c.p for c in g if c.op == "conv"}
        assert any(c.p.startswith("E0.2") for c in g if c.op == "conv")  # asymmetric explicit
        assert {"nhwc", "nchw"} == {c.l for c in g if c.op == "conv"}
        assert {1, 2, 3} == {len(c.i) for c in g if c.op == "interp"}
        assert {"f32", "f64", "f16", "bf16"} <= {c.dtype for c in g}


def test_parse_rejects_malformed_ids():
    for bad in ("rbg", "xyz_b1_f32", "rbg_b1_i2x2_o3x3_c1_thp_f128", "rbg_q1_i2_o3_c1_thp_f32",
                "rbg_b01_i2x2_o3x3_c1_thp_f32"):
        with pytest.raises(ValueError, match="case id"):
            C.parse_id(bad)


def test_shards_are_disjoint_and_cover():
    cases = C.grid("quick")
    parts = [C.shard(cases, f"{k}/3") for k in (1, 2, 3)]
    ids = [c.id for p in parts for c in p]
    assert sorted(ids) == sorted(c.id for c in cases) and len(ids) == len(set(ids))
    with pytest.raises(ValueError, match="shard"):
        C.shard(cases, "4/3")


def test_metric_and_ulp():
    a = np.array([1.0, 2.0], np.float32)
    b = np.nextafter(a, np.float32(3))
    assert metric.ulp_distance(a, b) == 1 and metric.ulp_distance(a, a) == 0
    assert metric.ulp_distance(np.float32([-0.0]), np.float32([0.0])) == 0
    cmp = metric.compare(a, a + np.float32(1e-3), np.array([1.0, 1.0]), np.float32)
    assert not cmp.passed and cmp.index in ([0], [1])
    assert metric.compare(a, a, np.zeros(2), np.float32).passed
    # within tolerance: 1e-6 of S = 1 is inside float32's 2e-6; integers must be equal
    assert metric.compare(a, a + np.float32(1e-6), np.ones(2), np.float32).passed
    assert not metric.compare(np.int8([3]), np.int8([4]), np.ones(1), np.int8).passed


def _one_ulp_off(inputs, attrs):
    out = tfcompat.get_kernel("ResizeBilinearGrad", "cython").kernel_func(inputs, attrs).copy()
    out.reshape(-1)[-1] = np.nextafter(out.reshape(-1)[-1], np.float32(np.inf))
    return out


def _index_bug(inputs, attrs):
    """A plausible kernel bug: the last two source columns swapped."""
    out = tfcompat.get_kernel("ResizeBilinearGrad", "cython").kernel_func(inputs, attrs).copy()
    out[:, :, [-1, -2]] = out[:, :, [-2, -1]]
    return out


@pytest.mark.parametrize("name,func,extra", [("broken_index", _index_bug, []),
                                             ("broken_one_ulp", _one_ulp_off,
                                              ["--bitwise", "broken_one_ulp"])])
def test_a_wrong_backend_is_reported_failing(name, func, extra, tmp_path):
    pytest.importorskip("tensorflow", reason="the TF oracle is needed to judge the backend")
    tfcompat.register_kernel(tfcompat.KernelConfig("ResizeBilinearGrad", name, func))
    try:
        case = "rbg_b1_i5x7_o11x3_c2_thp_f32"
        out = tmp_path / "r.json"
        md = tmp_path / "r.md"
        rc = cli.main(["--case", case, "--backend", name, "--backend", "cython", "--device", "cpu",
                       "--no-progress", "--json", str(out), "--report", str(md)] + extra)
        assert rc == 1
        recs = {r["backend"]: r for r in json.loads(out.read_text())["records"]}
        assert recs["cython"]["passed"] and recs["cython"]["ulp"] == 0
        assert not recs[name]["passed"] and recs[name]["ulp"] >= 1
        text = md.read_text()
        assert "## Failing cases" in text and case in text and f"--backend {name}" in text
    finally:
        tfcompat.unregister_kernel("ResizeBilinearGrad", name)
        runner.BITWISE_BACKENDS.discard(name)


def test_no_gpu_path_says_so(monkeypatch, capsys):
    monkeypatch.setattr(O, "tf_gpus", lambda: [])
    monkeypatch.setattr(O, "torch_available", lambda cuda=False: False)
    rc = cli.main(["--case", "rnn_b1_i3x5_o5x9_c1_tac_f32", "--device", "gpu", "--no-progress"])
    assert rc == 2
    assert "error: --device gpu: none here (TF lists no GPU" in capsys.readouterr().err
    rc = cli.main(["--case", "rnn_b1_i3x5_o5x9_c1_tac_f32", "--device", "auto", "--no-progress",
                   "--backend", "numpy"])
    out = capsys.readouterr().out
    assert rc == 0 and "GPU: none here (TF lists no GPU and PyTorch has no CUDA), so the GPU " \
        "oracles did not run" in out


def test_a_difference_from_a_stand_in_oracle_is_a_finding(monkeypatch, tmp_path, capsys):
    """A GPU oracle that stands in for TF (Oracle.finding) and differs: the result is a
    finding, listed in the report apart from the failures, counted only under --strict; the
    same difference from an oracle that does not stand in is a failure."""
    case = "rnn_b1_i3x5_o5x9_c1_tac_f32"

    def run(finding, *extra):
        off = O.Oracle("stand-in", "gpu0", lambda: True, supports=lambda c: True,
                       compute=lambda c, i, a: O.numpy_reference(c, i, a) + 1.0,
                       finding=lambda c: finding)
        monkeypatch.setattr(O, "gpu_oracles", lambda torch_device: [off])
        out, report = tmp_path / "r.json", tmp_path / "r.md"
        rc = cli.main(["--case", case, "--device", "gpu", "--backend", "cython", "--no-progress",
                       "--json", str(out), "--report", str(report), *extra])
        (rec,) = json.loads(out.read_text())["records"]
        return rc, rec, report.read_text(), capsys.readouterr().out

    rc, rec, text, printed = run(True)
    assert rc == 0 and rec["outcome"] == "differs" and rec["finding"] and not rec["passed"]
    assert "## Findings" in text and "## Failing cases" not in text and case in text
    assert "0 failing, 1 findings" in text and "1 results differ from PyTorch" in printed
    assert run(True, "--strict")[0] == 1
    rc, rec, text, _ = run(False)
    assert rc == 1 and not rec["finding"] and "## Failing cases" in text


def test_pytorch_oracle_computes_where_tf_does(monkeypatch, tmp_path):
    """PyTorch standing in as the GPU oracle (on the CPU here, as --torch-device allows): an
    align-corners upsample in float32 takes TF's float32 sample positions (in float64 they
    moved weights by 2.1e-6 of S, over the tolerance), and int8 sums wrap as TF's do (this
    case's sums reach 190, which TF stores as -66)."""
    pytest.importorskip("torch")
    monkeypatch.setattr(O, "tf_gpus", lambda: [])
    cases = ["rbg_b1_i32x24_o64x48_c8_tac_f32", "rnn_b1_i6x9_o13x4_c64_tlg_i8"]
    out = tmp_path / "r.json"
    rc = cli.main([x for c in cases for x in ("--case", c)]
                  + ["--device", "gpu", "--torch-device", "cpu", "--backend", "cython",
                     "--backend", "numpy", "--no-progress", "--json", str(out)])
    recs = json.loads(out.read_text())["records"]
    assert rc == 0 and len(recs) == 4
    for r in recs:
        assert r["oracle"] == "torch-cuda" and r["device"] == "cpu", r
        assert r["outcome"] in (("bitwise",) if r["dtype"] == "i8" else ("bitwise", "within")), r


def test_merge_combines_shards(tmp_path, capsys):
    paths = []
    for k in (1, 2):
        p = tmp_path / f"s{k}.json"
        assert cli.main(["--case", "ortrg_b1_i4x4_o8x8_c1_thp_f32", "--case",
                         "ortrg_b1_i4x4_o8x8_c1_tac_f32", "--shard", f"{k}/2", "--device", "cpu",
                         "--no-progress", "--json", str(p)]) == 0
        paths.append(str(p))
    capsys.readouterr()
    assert cli.main(["merge"] + paths) == 0
    out = capsys.readouterr().out
    assert "2 cases from 2 files" in out and "ResizeGrad" in out


def test_unknown_backend_and_bad_case_exit_2(capsys):
    assert cli.main(["--backend", "nope", "--case", "ortrg_b1_i4x4_o8x8_c1_thp_f32"]) == 2
    assert cli.main(["--case", "garbage"]) == 2


def test_a_backend_is_never_graded_against_itself(tmp_path):
    """The tensorflow backend computes InterpolateBackward the way the tf-cpu oracle does, so
    another oracle judges it; where only the backend itself could judge (the numpy backend on
    a float64 linear interpolation, defined by the NumPy reference alone), the result says
    self-check."""
    pytest.importorskip("tensorflow", reason="the tensorflow backend needs TensorFlow")
    out = tmp_path / "r.json"
    rc = cli.main(["--case", "interp_mlinear_thp_lnxc_b2_i5_o9_c3_f32", "--case",
                   "interp_mlinear_thp_lnxc_b2_i5_o9_c3_f64", "--backend", "tensorflow",
                   "--backend", "numpy", "--backend", "cython", "--device", "cpu",
                   "--no-progress", "--json", str(out)])
    recs = {(r["backend"], r["dtype"]): r for r in json.loads(out.read_text())["records"]}
    # a finding this grading surfaced: TF resizes linearly in float32 even for float64 data,
    # so the tensorflow backend's float64 result is float32-precise, not within 1e-12
    tf64 = recs.pop(("tensorflow", "f64"))
    assert tf64["oracle"] == "numpy-reference" and tf64["outcome"] == "differs"
    assert 1e-12 < tf64["norm_err"] < 1e-6
    assert rc == 1 and all(r["passed"] for r in recs.values())
    for (backend, dtype), r in recs.items():
        assert r["oracle"] not in {"tensorflow": ("tf-cpu",), "numpy": ("numpy-reference",),
                                   "cython": ()}[backend], (backend, dtype, r["oracle"])
    assert recs[("numpy", "f64")]["outcome"] == "self-check"
    assert recs[("cython", "f64")]["oracle"] == "numpy-reference"
    assert recs[("cython", "f64")]["outcome"] in ("bitwise", "within")


def test_an_unsupported_mode_is_na_not_a_failure(tmp_path):
    def lacking(inputs, attrs):
        raise tfcompat.UnsupportedError("this backend has no legacy bilinear mode")

    tfcompat.register_kernel(tfcompat.KernelConfig("ResizeBilinearGrad", "lacking", lacking))
    try:
        out = tmp_path / "r.json"
        rc = cli.main(["--case", "rbg_b1_i5x7_o11x3_c2_tlg_f32", "--backend", "lacking",
                       "--device", "cpu", "--no-progress", "--json", str(out)])
        (rec,) = json.loads(out.read_text())["records"]
        assert rc == 0
        assert rec["outcome"] == "n/a" and rec["passed"]
        assert "no legacy bilinear mode" in rec["note"]
    finally:
        tfcompat.unregister_kernel("ResizeBilinearGrad", "lacking")


def test_oracles_are_one_ordered_list():
    """Precedence on the CPU: TF's raw ops, TF compositions, PyTorch, the NumPy reference; only
    TF's raw ops are a bitwise reference, for float32 ResizeBilinearGrad and
    ResizeNearestNeighborGrad."""
    assert [o.name for o in O.ORACLES] == ["tf-cpu-raw", "tf-cpu", "torch-cpu",
                                           "numpy-reference"]
    rbg = C.parse_id("rbg_b1_i5x7_o11x3_c2_thp_f32")
    assert [o.name for o in O.ORACLES if o.bitwise(rbg)] == ["tf-cpu-raw"]
    assert not any(o.bitwise(C.with_dtype(rbg, "f64")) for o in O.ORACLES)
