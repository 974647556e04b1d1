"""The network stack: buffers, pools and credit (pure); partitions, gates, flusher, transport (Trio)."""
