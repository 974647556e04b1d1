"""Checkpointing: the coordinator's bookkeeping and barrier alignment (pure); storage (I/O)."""
