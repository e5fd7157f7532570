"""Writes NAME.DERIVED_cuda_event.json beside each real run named: the same file with every entry's
`extra_info.timer` (and pytest-benchmark's `options.timer`) set to `cuda_event`, nothing else changed. There is
no GPU here: these stand for runs whose timer holds the host out of its window, where host contention (which
the real runs recorded) says nothing about the figures. README.md here says which files are derived.

    python tests/data/busy_gate/derive_cuda_event.py tests/data/busy_gate/nice-5_cand_1.5x.json ...
"""

import json
import sys
from pathlib import Path


def derive(path: Path) -> Path:
    data = json.loads(path.read_text())
    for entry in data["benchmarks"]:
        entry["extra_info"]["timer"] = "cuda_event"
        entry.setdefault("options", {})["timer"] = "cuda_event"
    out = path.with_name(path.name.removesuffix(".json") + ".DERIVED_cuda_event.json")
    out.write_text(json.dumps(data, indent=4) + "\n")
    return out


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(derive(Path(name)))
