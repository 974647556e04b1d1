"""How much a second process gains on this machine, by kind of work.

Usage::

    .venv/bin/python tools/core_scaling.py [--repeat R]

Runs three fixed pieces of work in a fresh process, alone and then two at once (one per
core), and prints for each the speed-up of two processes over one: ``2 * alone / together``
(2.0: the cores are independent; 1.0: the second process gains nothing).

- ``compute``: a numba loop of dependent floating-point steps (registers only);
- ``memory``: a numba loop of random reads and writes in a 64 MiB array (as a pane table
  much larger than the caches);
- ``python``: a Python dict loop (as a per-record job's interpreter work).

The weir jobs of ``weir bench processes`` mix these; a job cannot gain more from a second
TaskManager process than its kind of work gains here. Each figure is the median of
``--repeat`` alternating rounds (alone, together).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

KINDS = ("compute", "memory", "python")


def _work(kind: str) -> float:
    """Seconds of one run of ``kind`` (in this process)."""
    import numpy as np
    from numba import njit

    @njit(cache=False)
    def compute(n: int) -> float:
        x = 0.0
        for i in range(n):
            x = x * 1.0000001 + (i & 7)
        return x

    @njit(cache=False)
    def memory(table: np.ndarray, at: np.ndarray) -> int:
        s = 0
        mask = table.shape[0] - 1
        for i in at:
            table[i] += 1
            s += table[(i * 7) & mask]
        return s

    def python(n: int) -> int:
        counts: dict[int, int] = {}
        for i in range(n):
            k = (i * 2654435761) % 10_000
            counts[k] = counts.get(k, 0) + 1
        return len(counts)

    table = np.zeros(1 << 23, np.int64)
    at = np.random.default_rng(1).integers(0, 1 << 23, 20_000_000)
    compute(10)
    memory(table, at[:10])  # compiled before the clock starts
    start = time.perf_counter()
    if kind == "compute":
        compute(400_000_000)
    elif kind == "memory":
        memory(table, at)
    else:
        python(6_000_000)
    return time.perf_counter() - start


def _spawn(kind: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, "--child", kind], stdout=subprocess.PIPE, text=True)


def _seconds(processes: list[subprocess.Popen[str]]) -> list[float]:
    out = []
    for p in processes:
        stdout, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"a child run failed with exit code {p.returncode}")
        out.append(float(stdout.strip()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(_work(args.child))
        return
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    print(f"{'work':<9} {'alone (s)':>10} {'together (s)':>13} {'2 processes / 1':>16}")
    for kind in KINDS:
        alone, together = [], []
        for _ in range(args.repeat):
            alone += _seconds([_spawn(kind)])
            together.append(statistics.mean(_seconds([_spawn(kind), _spawn(kind)])))
        a, t = statistics.median(alone), statistics.median(together)
        print(f"{kind:<9} {a:>10.3f} {t:>13.3f} {2 * a / t:>15.2f}x")


if __name__ == "__main__":
    main()
