"""asv benchmarks of tfcompat against TensorFlow and PyTorch, and the side-by-side comparison
command ``python -m asv_benchmarks.compare``."""
