"""Small native libraries built on first use with the system compilers and cached: the TF
plugin (tfcompat.tf) and the JAX front's FFI handler (tfcompat.jax). Each is built against the
framework installed now (its headers must match the library it is loaded into), so it is
built when first used rather than when tfcompat is installed."""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")


def cache_dir(kind):
    """Where built libraries of ``kind`` ("tf-plugin", "jax-ffi") are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfcompat", kind)


def compiler(variable, default, who):
    cmd = os.environ.get(variable, default).split()
    if shutil.which(cmd[0]) is None:
        raise RuntimeError(f"{who} builds a small library with the system's compilers and "
                           f"found no {cmd[0]!r} (set {variable} or install gcc and g++)")
    return cmd


def run_tool(cmd, who):
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{who}: building its library failed:\n" + " ".join(cmd) + "\n"
                           + run.stderr[-4000:])


def build(kind, name, tag, sources, extra_key, steps):
    """The path of library ``name`` (cached under cache_dir(kind), keyed by ``tag``, the bytes
    of ``sources`` and ``extra_key``), built if missing by ``steps(tmp, out)``, which writes
    it to ``out`` in a fresh directory ``tmp``."""
    parts = []
    for path in sources:
        with open(path, "rb") as f:
            parts.append(f.read())
    key = hashlib.sha256(b"\0".join([tag.encode(), *parts, extra_key.encode()])).hexdigest()[:16]
    target_dir = os.path.join(cache_dir(kind), f"{tag}-{key}")
    target = os.path.join(target_dir, name)
    if os.path.exists(target):
        return target
    os.makedirs(target_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target_dir) as tmp:
        out = os.path.join(tmp, name)
        steps(tmp, out)
        os.replace(out, target)    # atomic: another process may build the same library
    return target


def abi_version():
    """The C entry's ABI version (its TfcApi's first field, csrc/capi.h): the built
    libraries' cache key names it."""
    return ctypes.c_int32.from_address(capi_pointer()).value


def capi_pointer():
    """The address of tfcompat's C entry (the TfcApi in tfcompat._kernels.C_API)."""
    from . import _capi
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(_capi.capsule(), b"tfcompat.C_API")
