"""What consecutive cases share instead of making it again: their seeded random inputs and their float64 reference.

The op suites' cases draw their inputs from a CPU generator seeded 0, so that every device sees the same values,
and check their result against a float64 computation on those inputs. Drawn once per case, the inputs of the full
attention sweep (four 16k-token x 2048 tensors per case) cost 0.4-0.75 s of CPU `randn` each, 5-7 minutes over its
cases, although they have 12 input shapes; and the five attention implementations of one point and dtype see
identical inputs, so their float64 references are the same tensors, computed five times.

- `standard_normals`: the first draws of a generator seeded `seed`, as float32 CPU tensors, kept for the next case
  that asks for the same shapes (or fewer or more of them: the draws are in order, so a forward case's three are
  the first three of a backward case's four). Host memory only: the device's memory is the case's own.
- `Shelf`: what a group of cases computes once on the device (a float64 reference), keyed by the group
  (`Case.reuse_group`). It is held only while cases of its group follow each other: the runner drops it before
  a case of another group (or of none) builds, so no other case runs beside it. The suites order their cases so
  that a group's cases follow each other; in another order (`--bench-rounds` shuffles its rounds, `-k`) a group
  computes its value again, as before.

Precision is unchanged: the values are the same bits a fresh draw and a fresh reference would give (the same
generator, seed and order; the same float64 computation on the same inputs), and both are made outside the timed
window.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import torch

Shape = tuple[int, ...]


@dataclass
class _Draws:
    seed: int | None = None
    shapes: list[Shape] = field(default_factory=list)
    tensors: list[torch.Tensor] = field(default_factory=list)
    generator: torch.Generator | None = None


_DRAWS = _Draws()


def standard_normals(shapes: Sequence[Sequence[int]], seed: int) -> list[torch.Tensor]:
    """Standard-normal float32 CPU tensors: the first `len(shapes)` draws of `torch.Generator().manual_seed(seed)`,
    one per shape in order. Callers copy them (`torch.Tensor.to(..., copy=True)`): the kept tensors are shared."""
    wanted = [tuple(s) for s in shapes]
    kept = _DRAWS
    if kept.seed != seed or wanted[:len(kept.shapes)] != kept.shapes[:len(wanted)]:
        kept.seed, kept.shapes, kept.tensors = seed, [], []
        kept.generator = torch.Generator().manual_seed(seed)
    for shape in wanted[len(kept.shapes):]:
        kept.tensors.append(torch.randn(shape, generator=kept.generator))
        kept.shapes.append(shape)
    return kept.tensors[:len(wanted)]


def forget_draws() -> None:
    """Drop the kept draws (their host memory)."""
    _DRAWS.seed, _DRAWS.shapes, _DRAWS.tensors, _DRAWS.generator = None, [], [], None


class Shelf:
    """One group's value computed once (a float64 reference on the device), for the cases of that group only."""

    def __init__(self) -> None:
        self.group: Hashable | None = None
        self.value: object | None = None

    def enter(self, group: Hashable | None) -> bool:
        """A case of `group` (None: of no group) starts: what another group left is dropped before the case
        allocates anything; True when something was dropped."""
        if group == self.group:
            return False
        dropped = self.value is not None
        self.group, self.value = group, None
        return dropped

    def get(self, group: Hashable, compute: Callable[[], object]) -> object:
        """The group's value, computed by the first case of the group that asks."""
        self.enter(group)
        if self.value is None:
            self.value = compute()
        return self.value

    def clear(self) -> None:
        self.group, self.value = None, None


SHELF = Shelf()  # the runner enters each case's group before building it (suites/core/runner.py)
