"""The dtype ladder: the order in which every table, picture and peak list shows the dtypes, widest first."""

from __future__ import annotations

DTYPE_ORDER = ["float32", "tf32", "float16", "bfloat16", "float8_e4m3fn"]


def dtypes_in_order(values) -> list[str]:
    """The dtypes present, in ladder order (unknown names last, sorted)."""
    present = {str(v) for v in values}
    return [d for d in DTYPE_ORDER if d in present] + sorted(present - set(DTYPE_ORDER))
