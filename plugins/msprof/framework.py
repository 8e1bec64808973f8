"""Which framework ran on the device of a CANN export: msprof writes no framework, but
MindSpore names every task after its node's full scope name.

A MindSpore graph node is named `Default/network-WithLossCell/_backbone-AlexNet/conv1-Conv2d/
Conv2D-op8` (forward) or `Gradients/Default/...-op123` (backward): a scope path starting at
`Default` or `Gradients` and a `-op<number>` suffix. PyTorch (torch_npu) and TensorFlow tasks
carry no such names, so when most of the named tasks do, the export is MindSpore's and its
advice can drop what is for PyTorch (DDP buckets, torch_npu calls); otherwise the framework
stays unknown ("CANN") and advice for every framework is kept.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

UNKNOWN = "CANN"
_MINDSPORE_NAME = re.compile(r"(?:^|/)(?:Default|Gradients)/.*-op\d+(?:_\d+)?$")
MINDSPORE_SHARE = 0.5
"""Share of the distinct task names that must be MindSpore full names (our choice: a graph's
memsets, event records and fused kernels may carry other names)."""


def framework_of(device_ops: pd.DataFrame | None) -> str:
    """ "MindSpore" when most distinct device task names are MindSpore scope names, else
    UNKNOWN."""
    if device_ops is None or "name" not in device_ops:
        return UNKNOWN
    names = device_ops["name"].dropna().astype(str).unique()
    if not len(names):
        return UNKNOWN
    scoped = sum(1 for name in names if _MINDSPORE_NAME.search(name))
    return "MindSpore" if scoped >= MINDSPORE_SHARE * len(names) else UNKNOWN
