"""The compiled loop of ``scalar_map``/``scalar_filter``: the user's function, compiled with
numba, called once per row inside one compiled loop over the columns.

The loop's source is weir's own template for the arities involved (never user text); it is
compiled once per function, arity and column types. The output types come from one call of
the compiled function on the first row: int -> int64, float -> float64, bool -> bool.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.errors import UsageError


def _dtype_of(value: Any, what: str) -> np.dtype[Any]:
    if isinstance(value, bool | np.bool_):
        return np.dtype(np.bool_)
    if isinstance(value, int | np.integer):
        return np.dtype(np.int64)
    if isinstance(value, float | np.floating):
        return np.dtype(np.float64)
    raise UsageError(
        f"{what} returned {value!r} ({type(value).__name__}); a compiled scalar function returns numbers or booleans"
    )


def _loop_source(n_in: int, n_out: int, tuple_out: bool) -> str:
    ins = ", ".join(f"c{j}" for j in range(n_in))
    outs = ", ".join(f"o{j}" for j in range(n_out))
    args = ", ".join(f"c{j}[i]" for j in range(n_in))
    lines = [f"def run(n, {ins}, {outs}):", "    for i in range(n):", f"        r = f({args})"]
    if tuple_out:
        lines += [f"        o{j}[i] = r[{j}]" for j in range(n_out)]
    else:
        lines.append("        o0[i] = r")
    return "\n".join(lines) + "\n"


def scalar_loop(owner: Any, f: Any, columns: Any, what: str) -> Any:
    """``f`` over every row of ``columns`` (numpy arrays of numbers), compiled; the result is
    one array, or a tuple of arrays when ``f`` returns tuples."""
    import numba

    api = f"scalar_{what}({getattr(f, '__name__', f)!r})"
    arrays = []
    for j, c in enumerate(columns):
        if not isinstance(c, np.ndarray) or c.dtype.kind not in "biuf":
            raise UsageError(
                f"{api}: field {j} is not a numeric column; compiled scalar functions take numbers"
            )
        arrays.append(c)
    n = len(arrays[0]) if arrays else 0
    signature = tuple(a.dtype.str for a in arrays)
    entry = owner._loops.get(signature)
    if entry is None:
        try:
            compiled = numba.njit(f)
            sample = compiled(*(a[0] for a in arrays)) if n else None
        except Exception as exc:
            raise UsageError(
                f"{api}: numba cannot compile it ({type(exc).__name__}: {str(exc).splitlines()[0]})"
            ) from exc
        if n == 0:
            return np.empty(0, np.bool_ if what == "filter" else np.float64)
        tuple_out = isinstance(sample, tuple)
        samples: Any = sample if tuple_out else (sample,)
        dtypes = [_dtype_of(s, api) for s in samples]
        namespace: dict[str, Any] = {"f": compiled}
        exec(
            compile(_loop_source(len(arrays), len(dtypes), tuple_out), f"<weir {api}>", "exec"), namespace
        )  # weir's own template
        entry = owner._loops[signature] = (numba.njit(namespace["run"]), dtypes, tuple_out)
    run, dtypes, tuple_out = entry
    outs = [np.empty(n, d) for d in dtypes]
    run(n, *arrays, *outs)
    return tuple(outs) if tuple_out else outs[0]
