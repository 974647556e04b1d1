"""The compile chain: transformations → stream_graph → job_graph (chaining) → execution_graph.

Everything in this package is pure: no Trio, no I/O, no clock.
"""
