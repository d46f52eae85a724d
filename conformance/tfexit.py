"""End a process that has run TensorFlow ops without running native exit handlers.

History, and why this is now only a precaution. TensorFlow 2.21's CPU build keeps a
thread-local cache of oneDNN primitives (``tensorflow::LRUCache<MklPrimitive>``), and glibc
destroys the main thread's cache inside ``exit()``. That destructor segfaulted (or glibc
aborted on a corrupt heap) in 9 of 90 runs of CI's bounds-checked test subset on the
development VM, and once in CI (exit code 139); a core dump showed float32 values written over
a cached descriptor, 64 bytes apart. We could not find the writer then and suspected TF. It
was ours: in the bounds-checked build a failed index check only set a flag for an
``IndexError`` afterwards, and the test that provokes one on purpose
(``tests/test_threads.py::test_bounds_checked_build_detects_a_bad_table``) let the kernel go on
and add ones past the end of a 64-byte per-thread buffer (valgrind: invalid writes in
``_window_block8`` from ``_linear_rows_c8_f32``). Normal builds skip that test, which is why
AddressSanitizer runs of the suite were clean. Since 2026-11 a failed check aborts the process
before the access; with a normal exit, CI's checked subset then ran clean 15 times of 15 (the
old build crashed once in 15 in the same hour).

The harness and the tests still leave with ``os._exit`` once TF is loaded (streams flushed,
C++ destructors and ``atexit`` handlers skipped), as a precaution: their results are reported
by then. ``TFCOMPAT_NORMAL_EXIT=1`` restores the normal exit.
"""
import os
import sys


def exit_without_native_teardown(code):
    """``os._exit(code)`` after flushing, when TensorFlow is loaded; otherwise return ``code``."""
    if "tensorflow" not in sys.modules or os.environ.get("TFCOMPAT_NORMAL_EXIT") == "1":
        return code
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(int(code))
