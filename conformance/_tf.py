"""TensorFlow for the harness's own processes (the conformance suite, the comparison command):
imported once, quietly. TF 2.21 writes its start-up lines (absl's "All log messages before
absl::InitializeLog()", "oneDNN custom operations are on") straight to file descriptor 2
before TF_CPP_MIN_LOG_LEVEL applies, so the import runs with that descriptor pointed at
/dev/null. tfcompat itself never does this: a user's process keeps its stderr."""
import os
import sys


def import_tensorflow():
    """The ``tensorflow`` module (ImportError where it is not installed)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        import tensorflow as tf
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
    tf.get_logger().setLevel("ERROR")   # the v1 resize ops are deprecated aliases
    return tf
