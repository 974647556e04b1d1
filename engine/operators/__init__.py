"""Operators: what runs inside a task's operator chain, batch by batch."""
