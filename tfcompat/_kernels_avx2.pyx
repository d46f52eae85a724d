# The kernels of _kernels.pyx, compiled with -mavx2 (see setup.py); tfcompat/_simd.py loads
# this build only on a CPU (and OS) with AVX2. No FMA: -ffp-contract=off holds here too, so
# every result is bit for bit the one of the baseline build.
include "_kernels.pyx"
