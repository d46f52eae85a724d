"""What this machine offers the conv's strategies, found once: the AVX-512 tile kernels and
oneDNN's matmul, with the types it multiplies at full speed."""
import functools
import os
from dataclasses import dataclass

import numpy as np

from .. import _checks as ck
from .._arrays import avx512_kernels
from ..registry import UnsupportedError

F32 = ck.FLOAT32

# TFCOMPAT_ONEDNN: "off" keeps oneDNN out of the conv (our BLAS GEMMs and tile kernels only);
# anything else, or unset, uses it where it is installed
ONEDNN_VARIABLE = "TFCOMPAT_ONEDNN"


@dataclass(frozen=True)
class Machine:
    """The facts the strategies' choices read (docs/architecture.md).

    ``tiles``: the AVX-512 tile kernels are compiled in and the CPU has AVX512F.
    ``onednn``: oneDNN is installed (an OpenMP or sequential build) and not turned off.
    ``onednn_f32``: its single-threaded float32 matmul runs a brgemm kernel (the fast ones).
    ``onednn_bf16``/``onednn_f16``: it multiplies that type in that type at least as fast as
    float32 (bfloat16: AMX, or AVX512-BF16 without AVX512-FP16, as on AMD Zen 4 and 5;
    float16: AVX512-FP16), with a brgemm kernel; else the half type is widened to float32.
    ``amx``: oneDNN runs AMX kernels here."""

    tiles: bool = False
    onednn: bool = False
    onednn_f32: bool = False
    onednn_bf16: bool = False
    onednn_f16: bool = False
    amx: bool = False

    def gemm_type(self, dtype):
        """The dtype oneDNN's matmuls read for a conv of ``dtype`` (float32 accumulation), or
        None for our own BLAS GEMMs (no oneDNN, or float64, which its CPU matmul lacks)."""
        if dtype == ck.FLOAT64 or not self.onednn:
            return None
        f32 = F32 if self.onednn_f32 else None
        if dtype == ck.BFLOAT16:
            return dtype if self.onednn_bf16 else f32
        if dtype == ck.FLOAT16:
            return dtype if self.onednn_f16 else f32
        return f32

    def describe(self):
        parts = ["AVX-512 tiles" if self.tiles else "no AVX-512 tiles"]
        if not self.onednn:
            parts.append("no oneDNN")
        else:
            kinds = [n for n, on in (("float32", self.onednn_f32),
                                     ("bfloat16", self.onednn_bf16),
                                     ("float16", self.onednn_f16)) if on]
            parts.append("oneDNN matmul in " + (", ".join(kinds) or "no type")
                         + (" (AMX)" if self.amx else ""))
        return "; ".join(parts)


def _onednn_usable():
    from .. import _dnnl
    return _dnnl.missing() is None and _dnnl.library().cpu_runtime in (_dnnl.RUNTIME_SEQ,
                                                                       _dnnl.RUNTIME_OMP)


def _brgemm(dtype):
    """Whether oneDNN runs a single-threaded matmul of ``dtype`` with one of its brgemm kernels
    (the fast ones, and single-threaded as made: on CPUs without them it falls back to a
    reference or a differently threaded GEMM, which tfcompat does not use; or, as oneDNN 3.2
    does for float16 on a CPU without AVX512-FP16, to none)."""
    from .. import _dnnl
    code = {F32: _dnnl.F32, ck.BFLOAT16: _dnnl.BF16, ck.FLOAT16: _dnnl.F16}[np.dtype(dtype)]
    try:
        return all(_dnnl.matmul(1024, 576, 64, code, _dnnl.F32, 1, True,
                                accumulate=add).impl.startswith("brg:") for add in (False, True))
    except UnsupportedError:
        return False


@functools.lru_cache(maxsize=None)
def _detect(onednn_on):
    if not (onednn_on and _onednn_usable()):
        return Machine(tiles=avx512_kernels())
    from .. import _dnnl
    bf16, fp16, amx = _dnnl.cpu_isa()
    return Machine(tiles=avx512_kernels(), onednn=True, onednn_f32=_brgemm(F32),
                   onednn_bf16=(amx or (bf16 and not fp16)) and _brgemm(ck.BFLOAT16),
                   onednn_f16=fp16 and _brgemm(ck.FLOAT16), amx=amx)


def current_machine():
    """This machine's :class:`Machine`, found once (per value of TFCOMPAT_ONEDNN)."""
    value = os.environ.get(ONEDNN_VARIABLE, "auto")
    choice = value.strip().lower() or "auto"
    if choice not in ("auto", "on", "off"):
        raise ValueError(f"{ONEDNN_VARIABLE}: got {value!r}; expected 'auto' (or 'on': oneDNN "
                         "where it is installed) or 'off'")
    return _detect(choice != "off")
