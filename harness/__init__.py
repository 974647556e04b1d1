"""Benchmarks and (later) the workload replay harness: measurement, sweeps and reports."""
