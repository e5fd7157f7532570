"""Which machine and software stack measured a run: the columns that keep histories apart and explain changes.

A run of this suite carries `machine_info.identity` (suites/core/devices.py): `machine` (GPU UUID, or CPU model
with its threads), driver, CUDA, cuDNN, torch and world size. Files without it (older runs, other projects) get
the closest stand-in: the device name on the node that ran it, and the versions found elsewhere in machine_info.
`machine_id` is the series key of `history` and the filter of `compare`'s history baseline; the others are named
by `compare` when baseline and candidate differ, and `torch_version` can be a column of `table` and `hardware`.
"""

from __future__ import annotations

import pandas as pd

# identity key -> column of the loaded frame (`ranks`: `world_size` is a collective's extra_info field)
COLUMNS = {"machine": "machine_id", "torch": "torch_version", "driver": "driver_version", "cuda": "cuda_version",
           "cudnn": "cudnn_version", "world_size": "ranks"}
LABELS = {"machine_id": "machine", "torch_version": "torch", "driver_version": "driver", "cuda_version": "CUDA",
          "cudnn_version": "cuDNN", "ranks": "world size"}


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def identity_fields(machine_info: dict, device: str) -> dict:
    """The identity columns of one run (None where the file does not say)."""
    ours = _dict(machine_info.get("identity"))
    gpu, torch = _dict(machine_info.get("gpu")), _dict(machine_info.get("torch"))
    fallback = {"machine": f"{device} @ {machine_info.get('node') or 'unknown node'}", "torch": torch.get("version"),
                "driver": gpu.get("driver"), "cuda": gpu.get("cuda"), "cudnn": gpu.get("cudnn"), "world_size": 1}
    out = {}
    for key, column in COLUMNS.items():
        value = ours.get(key, fallback[key])
        out[column] = None if value is None else str(value)
    return out


def differences(base: pd.DataFrame, cand: pd.DataFrame) -> list[str]:
    """`torch 2.5.1 -> 2.6.0` for each identity field whose values differ between the baseline's runs and the
    candidate's; a baseline of several runs lists each value it holds."""
    out = []
    for column, label in LABELS.items():
        if column not in base or column not in cand:
            continue
        before = sorted({str(v) for v in base[column].dropna()})
        after = sorted({str(v) for v in cand[column].dropna()})
        if before != after:
            out.append(f"{label} {', '.join(before) or 'unknown'} -> {', '.join(after) or 'unknown'}")
    return out
