"""Conformance harness: every backend of tfcompat against TensorFlow's own gradients.

Run ``python -m conformance --help``. Cases are data (:mod:`conformance.cases`), oracles live
in :mod:`conformance.oracles`, the metric and the run loop in :mod:`conformance.runner`, and
the terminal/markdown/JSON output in :mod:`conformance.report`.
"""
