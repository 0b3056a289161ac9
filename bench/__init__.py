"""Benchmarks: ``python -m bench.run [--rows N] [--quick]`` (see :mod:`bench.run`)."""
