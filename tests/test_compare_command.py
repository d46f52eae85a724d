"""The comparison command end to end, on one small conv in place of the benchmark's workloads:
it runs, and prints the columns and the header its readers compare. No time is asserted."""
import contextlib
import io

from asv_benchmarks import compare, impls


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_conv_command_prints_the_fma_peak_for_float32_rows(monkeypatch):
    small = {"C9": ((2, 8, 8, 16), (3, 3, 16, 32), 2, "SAME")}
    monkeypatch.setattr(compare, "CONV", small)
    monkeypatch.setattr(impls, "CONV", small)
    # PyTorch's thread count is process-wide: leave it as the other tests set it
    monkeypatch.setattr(impls, "torch_module", lambda threads=None: None)
    out = io.StringIO()  # (conftest restores the thread count the command sets)
    with contextlib.redirect_stdout(out):
        status = compare.main(["conv", "--repeat", "1", "--warmup", "0",
                               "--dtypes", "float32,float64", "--markdown"])
    assert status == 0
    lines = out.getvalue().splitlines()
    probe = impls.fma_peak_probe(2)
    if probe is None:
        assert "FMA peak" not in lines[0]
    else:
        assert "float32 FMA peak " in lines[0] and f" GFLOP/s ({probe[2]})" in lines[0]
    head = _cells(next(line for line in lines if line.startswith("| workload")))
    rows = {tuple(_cells(line)[:2]): dict(zip(head, _cells(line)))
            for line in lines if line.startswith("| C9 conv")}
    assert set(rows) == {("C9 conv", "float32"), ("C9 conv", "float64")}
    f32, f64 = rows["C9 conv", "float32"], rows["C9 conv", "float64"]
    assert f64["TF/FMA peak"] == "-"  # float64 multiplies at another rate
    if probe is None or impls.tf_module() is None:
        assert f32["TF/FMA peak"] == "-"
    else:
        assert float(f32["TF/FMA peak"]) > 0
        assert float(f32["TF ms"]) > 0
