"""Conformance harness: every backend of tfcompat, and the peers' kernels, against TensorFlow.

Run ``python -m conformance --help``. Cases are data (:mod:`conformance.cases`); the oracles are
one ordered list of :class:`conformance.oracles.Oracle` records; :mod:`conformance.runner`
judges each backend's result by the first oracle that can (never the backend itself) with
:mod:`conformance.metric`; :mod:`conformance.report` writes the summary, markdown and JSON, and
:mod:`conformance.matrix` the cross-framework matrix.
"""
