"""The ``tfjs-cpu`` peer: tfjs's own CPU kernels (@tensorflow/tfjs-core and
@tensorflow/tfjs-backend-cpu 4.22.0, pure JavaScript), run unmodified under Node.js.

One long-lived Node process (``conformance/peers/tfjs/server.js``) serves every call; frames of a
JSON header and raw little-endian buffers go over its stdin and stdout. It is started on the
first call, reused, restarted after a crash (the call that saw the crash raises a
RuntimeError naming the exit code and the end of Node's stderr), and ended at exit. A call
that gets no answer within ``$TFCOMPAT_TFJS_TIMEOUT`` seconds (default 10; every call of the
conformance grids takes milliseconds) kills the process and raises TimeoutError: some tfjs
kernels loop forever (docs/peers.md).

Install the pinned packages (``conformance/peers/tfjs/package-lock.json``) into a cache
directory, never into the repository:

    python -m conformance.peers.tfjs_peer install

The directory is ``$TFCOMPAT_TFJS_DIR``, or ``~/.cache/tfcompat/tfjs-4.22.0``. Without Node or
the packages every kernel raises tfcompat.UnsupportedError saying which is missing.

Kernels: ResizeBilinearGrad, ResizeNearestNeighborGrad, Conv2DBackpropInput and the forward
ResizeBilinear, ResizeNearestNeighbor, with tfjs's own attribute names passed as they are. tfjs computes in float32 (and int32); other dtypes, and
dilations (tfjs's Conv2DBackpropInput has none), are unsupported.
"""
import atexit
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from tfcompat import _forward as fw, _resample as rs
from tfcompat.conv import problem as _conv
from tfcompat.kernel_names import (CONV2D_BACKPROP_INPUT, RESIZE_BILINEAR,
                                   RESIZE_BILINEAR_GRAD, RESIZE_NEAREST_NEIGHBOR,
                                   RESIZE_NEAREST_NEIGHBOR_GRAD)
from tfcompat.registry import KernelConfig, UnsupportedError

BACKEND = "tfjs-cpu"
VERSION = "4.22.0"
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfjs")


def install_dir():
    return os.environ.get("TFCOMPAT_TFJS_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tfcompat", f"tfjs-{VERSION}")


def missing():
    """Why this peer cannot run here, or None."""
    if shutil.which("node") is None:
        return ("Node.js (node) is not on PATH: install Node.js 18 or newer, then run "
                "python -m conformance.peers.tfjs_peer install")
    mods = os.path.join(install_dir(), "node_modules", "@tensorflow")
    if not all(os.path.isdir(os.path.join(mods, p)) for p in ("tfjs-core", "tfjs-backend-cpu")):
        return (f"the tfjs packages are not installed in {install_dir()}: run "
                "python -m conformance.peers.tfjs_peer install")
    return None


def install(target=None):
    """npm ci of the pinned lock file into ``target`` (default: install_dir())."""
    target = target or install_dir()
    if shutil.which("npm") is None:
        raise RuntimeError("npm is not on PATH: install Node.js 18 or newer")
    os.makedirs(target, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(os.path.join(HERE, name), os.path.join(target, name))
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=target,
                   check=True)
    return target


class NodeProcess:
    """The one Node process, its pipes, and the lock that keeps one request in flight."""

    def __init__(self):
        self.proc = None
        self.stderr = None
        self.lock = threading.Lock()

    def _start(self):
        self.stderr = tempfile.TemporaryFile()
        env = dict(os.environ, NODE_PATH=os.path.join(install_dir(), "node_modules"))
        self.proc = subprocess.Popen(["node", os.path.join(HERE, "server.js")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env)
        ready, _ = self._read(60.0)
        if not ready.get("ready"):
            raise RuntimeError(f"tfjs-cpu: the Node process did not start: {ready}")

    def _stderr_tail(self):
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-2000:].strip()

    def _died(self):
        code = self.proc.poll() if self.proc else None
        if code is None and self.proc:
            self.proc.kill()
            code = self.proc.wait()
        tail = self._stderr_tail()
        self.close()
        return RuntimeError(f"tfjs-cpu: the Node process exited (code {code})"
                            + (f"; its stderr ends: {tail}" if tail else ""))

    def _read_exact(self, n, deadline):
        data = bytearray()
        fd = self.proc.stdout.fileno()
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return bytes(data)

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        (n,) = struct.unpack("<I", self._read_exact(4, deadline))
        header = json.loads(self._read_exact(n, deadline))
        payload = None
        if header.get("ok") and "shape" in header:
            count = int(np.prod(header["shape"], dtype=np.int64))
            payload = self._read_exact(count * np.dtype(header["dtype"]).itemsize, deadline)
        return header, payload

    def call(self, kernel, inputs, attrs):
        """runKernel(kernel, inputs, attrs) in Node: the output as a NumPy array."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                if self.proc is not None:
                    self.close()
                self._start()
            specs, blobs = [], []
            for name, arr in inputs.items():
                arr = np.ascontiguousarray(arr)
                specs.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape)})
                blobs.append(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
            header = json.dumps({"kernel": kernel, "attrs": attrs, "inputs": specs}).encode()
            timeout = float(os.environ.get("TFCOMPAT_TFJS_TIMEOUT", "10"))
            try:
                self.proc.stdin.write(struct.pack("<I", len(header)) + header + b"".join(blobs))
                self.proc.stdin.flush()
                result, payload = self._read(timeout)
            except TimeoutError:
                self.close()
                raise TimeoutError(f"tfjs-cpu {kernel}: no answer within {timeout:g} s; the "
                                   "Node process was killed") from None
            except (BrokenPipeError, EOFError, OSError, ValueError):
                raise self._died() from None
        if not result.get("ok"):
            raise RuntimeError(f"tfjs-cpu {kernel}: {result.get('error')}")
        dtype = np.dtype(result["dtype"]).newbyteorder("<")
        return np.frombuffer(payload, dtype).reshape(result["shape"]).astype(dtype.newbyteorder("="))

    @property
    def pid(self):
        return None if self.proc is None else self.proc.pid

    def close(self):
        """End the process (if any) and reap it."""
        proc, self.proc = self.proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None


NODE = NodeProcess()
atexit.register(NODE.close)


def _need_tfjs(dtypes):
    why = missing()
    if why:
        raise UnsupportedError(f"tfjs-cpu: {why}")
    for d in dtypes:
        if d not in (np.float32, np.int32):
            raise UnsupportedError(f"tfjs-cpu computes in float32 (and int32); got {d}")


def _resize(kernel, parser, inputs, attrs):
    problem = parser(inputs, attrs)  # our checks first: the same errors as every backend
    dy = np.asarray(problem.dy)
    images = inputs["images"]
    _need_tfjs({dy.dtype, np.dtype(problem.out_dtype)})
    tf_attrs = {k: bool(v) for k, v in attrs.items()}
    return NODE.call(kernel, {"dy": dy, "images": np.zeros(np.shape(images), dy.dtype)},
                     tf_attrs)


def resize_bilinear_grad(inputs, attrs):
    return _resize("ResizeBilinearGrad", rs.resize_bilinear_grad_problem, inputs, attrs)


def resize_nearest_neighbor_grad(inputs, attrs):
    return _resize("ResizeNearestNeighborGrad", rs.resize_nearest_neighbor_grad_problem, inputs,
                   attrs)


def _forward(kernel, parser, inputs, attrs):
    problem = parser(inputs, attrs)  # our checks first: the same errors as every backend
    images = np.asarray(problem.images)
    _need_tfjs({images.dtype})
    tf_attrs = {"size": [a.out_size for a in problem.axes],
                "alignCorners": bool(attrs.get("alignCorners", False)),
                "halfPixelCenters": bool(attrs.get("halfPixelCenters", False))}
    return NODE.call(kernel, {"images": images}, tf_attrs).astype(problem.out_dtype, copy=False)


def resize_bilinear(inputs, attrs):
    return _forward("ResizeBilinear", fw.resize_bilinear_problem, inputs, attrs)


def resize_nearest_neighbor(inputs, attrs):
    return _forward("ResizeNearestNeighbor", fw.resize_nearest_neighbor_problem, inputs, attrs)


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def conv2d_backprop_input(inputs, attrs):
    p = _conv.conv_problem(inputs, attrs)
    _need_tfjs({p.dtype})
    if (p.dh, p.dw) != (1, 1):
        raise UnsupportedError("tfjs's Conv2DBackpropInput has no dilations")
    tf_attrs = {k: _plain(v) for k, v in attrs.items() if k != "dilations"}
    tf_attrs["strides"] = [p.sh, p.sw]
    tf_attrs["dataFormat"] = "NHWC" if p.channels_last else "NCHW"
    if isinstance(tf_attrs.get("pad", "valid"), str):
        tf_attrs["pad"] = tf_attrs.get("pad", "valid").lower()
    return NODE.call("Conv2DBackpropInput", {"dy": np.asarray(p.dy), "filter": np.asarray(p.filter)},
                     tf_attrs)


KERNEL_CONFIGS = (
    KernelConfig(RESIZE_BILINEAR_GRAD, BACKEND, resize_bilinear_grad),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR_GRAD, BACKEND, resize_nearest_neighbor_grad),
    KernelConfig(CONV2D_BACKPROP_INPUT, BACKEND, conv2d_backprop_input),
    KernelConfig(RESIZE_BILINEAR, BACKEND, resize_bilinear),
    KernelConfig(RESIZE_NEAREST_NEIGHBOR, BACKEND, resize_nearest_neighbor),
)


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        print(f"tfjs {VERSION} installed in {install(None)}")
    else:
        print("usage: python -m conformance.peers.tfjs_peer install", file=sys.stderr)
        sys.exit(2)
