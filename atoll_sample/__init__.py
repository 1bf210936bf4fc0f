"""The deterministic sample benchmark: two fictional worlds and their tasks, in the APEX layout.

``generate_sample_benchmark(out_dir, seed=0)`` writes it; see docs/sample-benchmark.md.
"""

from atoll_sample.generator import generate_sample_benchmark

__all__ = ["generate_sample_benchmark"]
