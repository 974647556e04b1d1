"""Event-loop tuning: busy polling, tickers on timerfd, GC pauses, warm-up of the compiled kernels."""
