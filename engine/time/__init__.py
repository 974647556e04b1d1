"""Event time: watermark valves, timers, window assigners and triggers (pure)."""
