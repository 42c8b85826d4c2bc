"""Nexmark (online auctions: people, auctions, bids) for windowed-operator: a seeded generator, the
windowed queries with this library, native PySpark and brute-force models, and a benchmark
(``python benchmarks/nexmark/run.py``)."""
