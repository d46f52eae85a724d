"""Results must not depend on the number of threads: bitwise equality for 1, 2, 3, 4 and 8."""
import os

import ml_dtypes
import numpy as np
import pytest

import tfcompat as T

THREADS = (1, 2, 3, 4, 8)


def _same_for_all_thread_counts(fn):
    outs = []
    for n in THREADS:
        T.set_num_threads(n)
        outs.append(fn())
    for n, o in zip(THREADS[1:], outs[1:]):
        assert o.dtype == outs[0].dtype
        assert np.array_equal(np.ascontiguousarray(o).view(np.uint8),
                              np.ascontiguousarray(outs[0]).view(np.uint8)), f"{n} threads differ"


@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_resize_bilinear_threads(align, half, dtype, rng):
    dy = rng.standard_normal((3, 37, 29, 5)).astype(np.float32)
    img = np.zeros((3, 13, 41, 5), dtype)
    _same_for_all_thread_counts(lambda: T.resize_bilinear_grad(dy, img, align_corners=align,
                                                               half_pixel_centers=half))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32, ml_dtypes.bfloat16])
def test_resize_nearest_threads(dtype, rng):
    dy = (rng.standard_normal((3, 37, 29, 5)) * 10).astype(dtype)
    _same_for_all_thread_counts(lambda: T.resize_nearest_neighbor_grad(dy, [13, 11],
                                                                       half_pixel_centers=True))


@pytest.mark.parametrize("mode,rank,fmt", [("linear", 1, "NXC"), ("linear", 3, "NCX"),
                                           ("trilinear", 3, "NXC"), ("nearest", 3, "NCX"),
                                           ("bilinear", 2, "NCX")])
def test_interpolate_threads(mode, rank, fmt, rng):
    in_sp, out_sp = (5, 9, 4)[:rank], (11, 4, 9)[:rank]
    shape = lambda sp: (2,) + sp + (3,) if fmt == "NXC" else (2, 3) + sp  # noqa: E731
    dy = rng.standard_normal(shape(out_sp)).astype(np.float32)
    src = np.zeros(shape(in_sp), np.float32)
    _same_for_all_thread_counts(lambda: T.interpolate_backward(src, dy, mode=mode, data_format=fmt))


def test_resize_grad_threads(rng):
    dy = rng.standard_normal((2, 3, 17, 11)).astype(np.float32)
    x = np.zeros((2, 3, 7, 5), np.float32)
    _same_for_all_thread_counts(lambda: T.resize_grad(dy, x, scales=[1, 1, 2.5, 2.3]))


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_conv_threads(fmt, rng):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    dy = rng.standard_normal((3, 16, 16, 16) if fmt == "NCHW" else (3, 16, 16, 16)).astype(np.float32)
    sizes = [3, 8, 31, 31] if fmt == "NCHW" else [3, 31, 31, 8]
    run = lambda: T.conv2d_backprop_input(sizes, w, dy, strides=[1, 1, 2, 2] if fmt == "NCHW"  # noqa: E731
                                          else [1, 2, 2, 1], padding="SAME", data_format=fmt)
    # the GEMM runs in BLAS; pin its threads so only our col2im's threads vary
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        _same_for_all_thread_counts(run)
    # and BLAS's own thread count does not change the result either (it splits the output)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        a = run()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        b = run()
    assert np.array_equal(a, b)


def test_omp_num_threads_env(monkeypatch):
    T.set_num_threads(None)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert T.get_num_threads() == 3


def test_thread_count_beyond_the_cap_is_refused(monkeypatch, rng):
    """A call with 100,000 threads crashed the process (libgomp could not create them): more
    than MAX_THREADS (or the CPUs, if more) is refused where it is set, and from the
    environment at the call; at the cap a call runs, with the bits of one thread."""
    from tfcompat._threads import MAX_THREADS
    most = max(MAX_THREADS, len(os.sched_getaffinity(0)))
    with pytest.raises(ValueError, match=f"num_threads: got {most + 1}; expected at most {most}"):
        T.set_num_threads(most + 1)
    T.set_num_threads(None)
    monkeypatch.setenv("OMP_NUM_THREADS", "100000")
    with pytest.raises(ValueError, match="OMP_NUM_THREADS: got 100000"):
        T.resize_bilinear_grad(np.ones((1, 4, 4, 1), np.float32), np.zeros((1, 2, 2, 1)))
    monkeypatch.delenv("OMP_NUM_THREADS")
    dy = rng.standard_normal((2, 37, 29, 5)).astype(np.float32)
    img = np.zeros((2, 13, 41, 5), np.float32)
    T.set_num_threads(1)
    one = T.resize_bilinear_grad(dy, img)
    T.set_num_threads(MAX_THREADS)
    assert np.array_equal(T.resize_bilinear_grad(dy, img), one)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")   # JAX's, when a test loaded it
# Python 3.12's warning on every fork of a process with threads: the hazard this test is about
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_runs_kernels_after_the_parent_ran_threads(rng):
    """GNU OpenMP (oneDNN's threads) cannot run a team of threads in a child forked after the
    parent ran one (the child hung for ever in its first kernel call: multiprocessing's default
    start method on Linux). There the kernels run on one thread, with the parent's bits, and
    say so once."""
    import time
    import warnings
    dy = rng.standard_normal((2, 32, 32, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 16)).astype(np.float32)
    run = lambda: (T.resize_bilinear_grad(dy, np.zeros((2, 16, 16, 16), np.float32)),  # noqa: E731
                   T.conv2d_backprop_input([2, 64, 64, 16], w, dy, strides=[1, 2, 2, 1],
                                           padding="SAME"))
    T.set_num_threads(2)
    want = run()
    pid = os.fork()
    if pid == 0:  # the child: its exit status is the verdict
        code = 1
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                T.set_num_threads(2)
                got = run()
            same = all(np.array_equal(a, b) for a, b in zip(got, want))
            warned = sum("forked" in str(c.message) for c in caught) == 1
            code = 0 if same and warned and T.get_num_threads() == 1 else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's kernel call hung")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0


_BAD_TABLE = """
import numpy as np
from tfcompat import _kernels as K, _tables
from tfcompat._resample import Axis, Rule
tables = _tables.resample_tables([Axis(2, 2, Rule.LINEAR_ASYMMETRIC)], 1, False)
bad_x = np.array([0, 5], np.int32)  # source index 5 in an axis of size 2
tables = tables._replace(x_lo=bad_x, x_hi=bad_x)
plan = K.ResamplePlan(K.ResampleKind.LINEAR_F64, (1, 1, 1, 2, 1, 1, 2, 1), tables, 0)
plan.run(np.ones(2), np.empty(2), 1)
print("returned")
"""


def test_bounds_checked_build_detects_a_bad_table():
    """In the TFCOMPAT_BOUNDSCHECK=1 build a table index past the end stops the process before
    the access, naming the check: going on would write past the kernel's buffers."""
    import subprocess
    import sys
    from tfcompat import _kernels as K
    if not K.index_checks_enabled():
        pytest.skip("normal build: index checks are compiled out (CI runs the checked build)")
    res = subprocess.run([sys.executable, "-c", _BAD_TABLE], capture_output=True, text=True)
    assert res.returncode != 0
    assert "returned" not in res.stdout
    assert "tfcompat: index check failed" in res.stderr


_ENV_AFTER_IMPORT = """
import json, os, sys
before = dict(os.environ)
import tfcompat
print(json.dumps({"changed": sorted(k for k in set(before) | set(os.environ)
                                    if before.get(k) != os.environ.get(k)),
                  "tensorflow": "tensorflow" in sys.modules}))
"""


def test_import_changes_no_process_wide_setting():
    """import tfcompat sets no environment variable (OpenMP's spin count among them) and
    imports no TensorFlow."""
    import json
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", _ENV_AFTER_IMPORT], env=env, capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout) == {"changed": [], "tensorflow": False}



def test_calls_from_several_threads_at_once_give_the_one_thread_bits(rng):
    """Python threads calling kernels at the same time share one team (csrc/team.h): a call
    that finds it busy runs its shares on its own thread. Every result is the one-thread
    result, bit for bit: resize grads, a forward resize, a half-type conv."""
    import threading
    dy = rng.standard_normal((2, 24, 24, 16)).astype(np.float32)
    img = np.zeros((2, 12, 12, 16), np.float32)
    x = rng.standard_normal((2, 12, 12, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 16)).astype(ml_dtypes.bfloat16)
    cdy = rng.standard_normal((2, 12, 12, 16)).astype(ml_dtypes.bfloat16)
    calls = [lambda: T.resize_bilinear_grad(dy, img, half_pixel_centers=True),
             lambda: T.resize_nearest_neighbor_grad(dy, [12, 12], align_corners=True),
             lambda: T.resize_bilinear(x, [29, 17]),
             lambda: T.conv2d_backprop_input([2, 24, 24, 8], w, cdy, strides=[1, 2, 2, 1],
                                             padding="SAME")]
    T.set_num_threads(1)
    want = [c() for c in calls]
    T.set_num_threads(2)
    bad, errors = [], []

    def worker(k):
        try:
            for i in range(40):
                j = (k + i) % len(calls)
                if not np.array_equal(calls[j](), want[j]):
                    bad.append(j)
        except Exception as e:   # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not bad


_TEAM_THREADS = """
import os, threading
import numpy as np
import tfcompat
tfcompat.set_num_threads(int(os.environ["N"]))
dy = np.ones((2, 64, 64, 16), np.float32)
img = np.zeros((2, 32, 32, 16), np.float32)
before = len(os.listdir("/proc/self/task"))       # NumPy's BLAS threads started at import
def call():
    for _ in range(20):
        tfcompat.resize_bilinear_grad(dy, img)
threads = [threading.Thread(target=call) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
import time
time.sleep(0.5)    # a joined thread leaves /proc once the OS has ended it
print(len(os.listdir("/proc/self/task")) - before)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
@pytest.mark.parametrize("n", [2, 3])
def test_one_team_of_threads_whoever_calls(n):
    """Kernels called from four Python threads at n threads each leave n - 1 worker threads in
    the process, the one team, not a pool per calling thread (GNU OpenMP's: 4 * (n - 1))."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _TEAM_THREADS], env={**os.environ, "N": str(n)},
                         capture_output=True, text=True, check=True)
    assert int(out.stdout.strip()) == n - 1
