"""Speed and memory benchmarks of SPEN's EMA traces, training and decoding, against GPT-2.

Run ``python -m benchmarks.run --help``. Results are recorded in ``BENCHMARKS.md``.
"""
