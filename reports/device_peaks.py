"""The peaks each device's results are read against, from its run's machine_info: datasheet and achievable.

A run records the datasheet peaks of its GPU (`machine_info.gpu.peaks`: FLOP/s per dtype and bandwidth, with
their source) and the achievable peaks found by the search (`machine_info.achievable`: the best gemm FLOP/s per
dtype and the best copy/triad bandwidth on that machine). The frame of reports.format.load keeps only per-case
columns, so this reads the machine_info of each device's latest run from its file again (every field checked by
reports.format.load.machine_info, so a value read here has its type).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.dtypes import DTYPE_ORDER
from reports.format.errors import InputError
from reports.format.load import machine_info, warn

COLUMNS = ["device", "kind", "dtype", "value", "at", "how"]  # dtype `bandwidth`: value in bytes/s


def _rows(device: str, machine: dict) -> list[dict]:
    rows = []
    for dtype, peak in ((machine.get("gpu") or {}).get("peaks") or {}).items():
        if isinstance(peak, dict) and peak.get("value"):
            rows.append({"device": device, "kind": "datasheet", "dtype": dtype, "value": float(peak["value"]),
                         "at": None, "how": peak.get("source")})
    found = machine.get("achievable") or {}
    entries = dict(found.get("flops") or {})
    if found.get("bandwidth"):
        entries["bandwidth"] = found["bandwidth"]
    for dtype, peak in entries.items():
        if isinstance(peak, dict) and peak.get("value"):
            at, how = peak.get("at"), peak.get("how", "")
            if peak.get("raised_by"):  # a case of the run beat the search: it is where the peak was reached
                searched = peak.get("searched_value")
                unit = "GB/s" if dtype == "bandwidth" else "GFLOP/s"
                was = f" ({searched / 1e9:.4g} {unit} at {at})" if searched else ""
                at, how = peak["raised_by"], f"a case of the run beat the search{was}, which {how}"
            rows.append({"device": device, "kind": "achievable", "dtype": dtype, "value": float(peak["value"]),
                         "at": at, "how": how})
    return rows


def peaks(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per device, kind (`datasheet`, `achievable`) and dtype (or `bandwidth`).

    The datasheet figure is the latest run's; the achievable one is the best over the device's runs in the
    frame, since each run's is the best it saw and a case of one run may have beaten another run's search.
    """
    if frame.empty or "file" not in frame:
        return pd.DataFrame(columns=COLUMNS)
    runs = frame.sort_values("datetime", kind="stable")[["device", "file"]].drop_duplicates()
    rows: list[dict] = []
    for device, file in runs.itertuples(index=False):
        try:
            machine = machine_info(Path(file))
        except InputError as exc:
            warn(f"peaks of {device}: {exc}")
            continue
        rows += _rows(str(device), machine)
    table = pd.DataFrame(rows, columns=COLUMNS)
    datasheet = table[table["kind"] == "datasheet"].drop_duplicates(["device", "dtype"], keep="last")
    achievable = table[table["kind"] == "achievable"].sort_values("value", kind="stable")
    achievable = achievable.drop_duplicates(["device", "dtype"], keep="last")
    return pd.concat([datasheet, achievable], ignore_index=True)


def of(table: pd.DataFrame, device: str, kind: str) -> dict[str, float]:
    """{dtype or 'bandwidth': value} of one device and kind."""
    part = table[(table["device"] == device) & (table["kind"] == kind)]
    return dict(zip(part["dtype"], part["value"], strict=True))


def readable(table: pd.DataFrame) -> pd.DataFrame:
    """The peaks as a table for people: a value with its unit, where it was reached, how it was found."""
    def text(row) -> str:
        if row["dtype"] == "bandwidth":
            return f"{row['value'] / 1e9:.4g} GB/s"
        return f"{row['value'] / 1e12:.4g} TFLOP/s" if row["value"] >= 1e12 else f"{row['value'] / 1e9:.4g} GFLOP/s"

    if table.empty:
        return pd.DataFrame(columns=["device", "kind", "dtype", "peak", "at", "how"])
    kinds = {"achievable": 0, "datasheet": 1}
    ladder = {d: i for i, d in enumerate([*DTYPE_ORDER, "bandwidth"])}
    shown = table.assign(peak=table.apply(text, axis=1), _k=table["kind"].map(kinds),
                         _d=table["dtype"].map(ladder).fillna(len(ladder)))
    shown = shown.sort_values(["device", "_k", "_d"], kind="stable")
    return shown[["device", "kind", "dtype", "peak", "at", "how"]].reset_index(drop=True)
