"""Argument checking shared by every op: conversions and messages that name the argument,
the value received and what was expected (docs/semantics.md §7)."""
import functools
import math
import operator

import numpy as np

from .ops.table import BFLOAT16, FLOAT16, FLOAT32, FLOAT64  # noqa: F401
from .ops.table import FLOATS as FLOAT_DTYPES, HALVES as HALF_DTYPES  # noqa: F401

# Output elements above which we refuse before allocating (a clear error, not an OOM kill).
MAX_ELEMENTS = 2 ** 40


def dtype_names(dtypes):
    return ", ".join(str(d) for d in dtypes)


def as_array(value, name):
    """``np.asarray`` with a TypeError naming ``name`` for what cannot be a numeric array.
    Python numbers and (nested) lists and tuples of them become what ``tf.convert_to_tensor``
    makes of them: floats float32, ints int32 (int64 beyond its range), bools bool."""
    if value is None:
        raise TypeError(f"{name}: got None; expected an array-like of numbers")
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists, objects whose __array__ fails
        raise TypeError(f"{name}: could not convert {type(value).__name__} to an array "
                        f"({exc}); expected an array-like of numbers") from None
    if isinstance(value, (list, tuple, int, float)) and not isinstance(value, bool):
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.int64 and (arr.size == 0 or (arr.min() >= -2 ** 31
                                                          and arr.max() < 2 ** 31)):
            arr = arr.astype(np.int32)
    if arr.dtype.kind not in "biuf" and arr.dtype != BFLOAT16:
        raise TypeError(f"{name}: got dtype {arr.dtype}; expected a numeric array")
    if not arr.dtype.isnative:
        # big-endian data (FITS files, network formats): the same numbers, as TF takes them
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def check_dtype(arr, name, allowed):
    if arr.dtype not in allowed:
        raise TypeError(f"{name}: got dtype {arr.dtype}; expected one of {dtype_names(allowed)}")


def check_rank(arr, name, rank, what):
    if arr.ndim != rank:
        raise ValueError(f"{name}: got shape {tuple(arr.shape)} (rank {arr.ndim}); "
                         f"expected rank {rank} ({what})")


def as_bool(value, name):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name}: got {value!r}; expected True or False")


def as_int(value, name):
    if type(value) is int:
        # as it is: torch.compile's tracer shows a symbolic size as an int, and
        # operator.index would specialise the graph to its value
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: got {value!r}; expected an int")
    try:
        return operator.index(value)
    except TypeError:
        pass
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and value == int(value):
        return int(value)
    raise TypeError(f"{name}: got {value!r}; expected an int")


def as_int_tuple(value, name, lengths=None):
    """A sequence of ints (a list, tuple or 1-D integer array)."""
    if type(value) in (tuple, list) and all(type(v) is int for v in value):
        out = tuple(value)  # the common case: nothing to convert
    else:
        out = _convert_ints(value, name)
    if lengths is not None and len(out) not in lengths:
        want = " or ".join(str(n) for n in lengths)
        raise ValueError(f"{name}: got {list(out)} ({len(out)} values); expected {want} values")
    return out


def _convert_ints(value, name):
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: got {value!r}; expected a sequence of ints")
    try:
        items = list(np.asarray(value).reshape(-1)) if hasattr(value, "__array__") else list(value)
    except TypeError:
        raise TypeError(f"{name}: got {value!r}; expected a sequence of ints") from None
    return tuple(as_int(v, f"{name}[{i}]") for i, v in enumerate(items))


def as_float_tuple(value, name, length):
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: got {value!r}; expected {length} numbers")
    try:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise TypeError
        items = [float(v) for v in arr.astype(np.float64).reshape(-1)]
    except (TypeError, ValueError):
        raise TypeError(f"{name}: got {value!r}; expected {length} real numbers") from None
    if len(items) != length:
        raise ValueError(f"{name}: got {items} ({len(items)} values); expected {length} values")
    for i, v in enumerate(items):
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name}[{i}]: got {v}; expected a positive finite number")
    return tuple(items)


def front_size(size, name, note=""):
    """A framework front's output size: two positive ints (a list, tuple or torch.Size). A
    value that is not an int is a TypeError naming it, as in the NumPy API (as_int)."""
    if isinstance(size, (list, tuple)) and len(size) == 2:
        try:
            pair = tuple(as_int(v, f"{name}[{i}]") for i, v in enumerate(size))
        except TypeError as exc:
            raise TypeError(f"{exc}{note}") from None
        if pair[0] > 0 and pair[1] > 0:
            return pair
    raise ValueError(f"{name}: got {size!r}; expected two positive ints [height, width]{note}")


def front_flags(align_corners, half_pixel_centers):
    """A framework front's two flags: bools, and at most one of them True (TF's forward)."""
    for name, v in (("align_corners", align_corners), ("half_pixel_centers", half_pixel_centers)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{name}: got {v!r}; expected a bool")
    check_align_half(align_corners, half_pixel_centers, "align_corners", "half_pixel_centers")


def check_align_half(align, half, align_name="alignCorners", half_name="halfPixelCenters"):
    """TF's refusal of both flags (every op but the nearest grad, which takes both)."""
    if align and half:
        raise ValueError(f"{align_name}: got True together with {half_name}=True; if "
                         "half_pixel_centers is True, align_corners must be False (TF)")


# TF's nearest resize refuses an input axis of 2^24 or more (its float32 coordinates)
NEAREST_MAX_AXIS = 1 << 24


def front_spatial(shape, h, w, nearest):
    """A framework front's image height and width: non-zero, and below 2^24 for nearest (TF's
    checks), refused in ``x``'s name with its whole ``shape``."""
    if h == 0 or w == 0:
        raise ValueError(f"x: got shape {tuple(shape)}; expected a non-zero height and width "
                         "(TF: input image must be of non-zero size)")
    # (two comparisons, not max(): on torch.compile's symbolic sizes max() would guard on
    # which axis is longer, and recompile when that changes)
    if nearest and (h >= NEAREST_MAX_AXIS or w >= NEAREST_MAX_AXIS):
        raise ValueError(f"x: got shape {tuple(shape)}; expected a height and width below "
                         "2^24 (TF's nearest resize)")


def choice(value, name, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name}: got {value!r}; expected one of {list(allowed)}")
    return value


def check_attrs(attrs, name, known):
    unknown = set(attrs).difference(known)
    if unknown:
        unknown = sorted(unknown)
        raise ValueError(f"{name}: unknown attribute(s) {unknown}; expected some of {sorted(known)}")


def get_input(inputs, key, kernel, required=True):
    if key not in inputs or (not required and inputs[key] is None):
        if required:
            raise ValueError(f"{kernel}: missing input {key!r}; got inputs {sorted(inputs)}")
        return None
    return inputs[key]


MAX_AXIS = 2 ** 31 - 1  # the kernels' index tables are int32


@functools.lru_cache(maxsize=1)
def _physical_memory():
    try:
        import os
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_size(shape, name, itemsize=8):
    """Refuse, before allocating, an output that cannot exist: an axis beyond the int32 tables,
    or more bytes than this machine has (with overcommit, np.empty of such an array can succeed
    and the process be killed on first touch; a MemoryError is the honest answer)."""
    n = 1
    for i, d in enumerate(shape):
        if int(d) > MAX_AXIS:
            raise ValueError(f"{name}: dimension {i} of shape {tuple(shape)} is {d}; expected at "
                             f"most {MAX_AXIS}")
        n *= int(d)
    if n > MAX_ELEMENTS:
        raise ValueError(f"{name}: shape {tuple(shape)} has {n} elements; expected at most "
                         f"{MAX_ELEMENTS} (it would not fit in memory)")
    mem = _physical_memory()
    if mem is not None and n * itemsize > mem:
        raise MemoryError(f"{name}: an output of shape {tuple(shape)} needs {n * itemsize / 2**30:.1f} "
                          f"GiB; this machine has {mem / 2**30:.1f} GiB")
