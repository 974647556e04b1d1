"""The task: builds the operator chain, reads its inputs, writes its outputs, takes its snapshots (Trio)."""
