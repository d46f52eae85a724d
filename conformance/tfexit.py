"""End a process that has run TensorFlow ops without running native exit handlers.

TensorFlow 2.21's CPU build keeps a thread-local cache of oneDNN primitives
(``tensorflow::LRUCache<MklPrimitive>``) in every thread that ran an op eagerly, and glibc
destroys the main thread's cache inside ``exit()``. That destructor segfaulted (or glibc
aborted on a corrupt heap) in 9 of 90 runs of CI's bounds-checked test subset on the
development VM, and once in CI (exit code 139). Every crash inspected came after all tests had
passed and the summary was printed, in ``~dnnl_primitive_desc`` / ``~pd_t`` of a cached
convolution primitive, called from ``__call_tls_dtors``. A core dump showed float32 values
written over the descriptor's shared pointers: the heap had been corrupted while the suite ran.
Our kernels ran clean under AddressSanitizer through the whole test suite (repeatedly),
1,500 hypothesis examples per property and the full conformance grid, so we could not
attribute the write to tfcompat; with tfcompat's output pool off (TFCOMPAT_POOL_MB=0) the
crash still came, 2 of 40 runs; TF 2.21 has had reports of heap corruption in its oneDNN
kernels (tensorflow/tensorflow#117700, #123109).

The results are computed and reported before this point, so the harness and the tests leave
with ``os._exit`` once TF is loaded: streams are flushed, C++ destructors and ``atexit``
handlers are skipped. ``TFCOMPAT_NORMAL_EXIT=1`` restores the normal exit (to reproduce the
crash, or under a leak checker).
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
