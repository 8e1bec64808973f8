"""Whether a profile records training or inference: advice for one is wrong for the other
(activation checkpointing and gradient accumulation mean nothing to a model that runs no
backward pass, and an inference server has no "training loop")."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from advisor.lazy import lazy_module
from advisor.text_codes import coded

if TYPE_CHECKING:
    import pandas as pd

    from advisor.model import Profile
else:
    pd = lazy_module("pandas")

TRAINING_NAMES = re.compile(
    r"[Bb]ackward"  # autograd's MmBackward0, aten::*_backward, aclnn*Backward, *_backward kernels
    r"|Backprop"  # CANN's Conv2DBackpropFilter
    r"|Grad(?![a-z])"  # CANN's ReluGrad, SoftmaxGrad; AccumulateGrad
    r"|^[Gg]radients/"  # the gradient scope of MindSpore and TensorFlow graphs
    r"|_[dw]grad_|[dw]grad_nchw"  # cuDNN's data and weight gradient kernels
    r"|^Optimizer\.(?:step|zero_grad)#"  # torch.optim's annotations
    r"|Apply(?:Adam|Momentum|GradientDescent|RMSProp)"  # CANN's and MindSpore's optimizer kernels
)
"""Operator and kernel names only a training step runs: a backward pass or an optimizer."""
WORKLOADS: dict[bool | None, str | None] = {True: "training", False: "inference", None: None}
"""What the reports call each answer of `training` (a profile's `workload`)."""
FRAMEWORK_KINDS = ("aten",)
"""host_ops kinds of framework operators: a profile that records them would record the
backward pass's too."""


def training(profile: Profile) -> bool | None:
    """True where an operator or kernel name shows a backward pass or an optimizer step
    (TRAINING_NAMES); False where the profile records framework operators (FRAMEWORK_KINDS)
    and none shows either: an inference run; None where it records too little to tell (a
    CANN export whose kernels name no gradient, a trace of runtime calls alone)."""
    host = profile.tables.get("host_ops")
    device = profile.tables.get("device_ops")
    for table in (host, device):
        if table is not None and "name" in table and _names_match(table["name"]):
            return True
    if host is None or "kind" not in host:
        return None
    _, kinds = coded(host["kind"])
    return False if pd.Series(kinds).isin(FRAMEWORK_KINDS).any() else None


def _names_match(names: pd.Series) -> bool:
    """Whether any of the distinct names matches TRAINING_NAMES (a name is tested once,
    however many rows carry it)."""
    _, distinct = coded(names)
    return any(TRAINING_NAMES.search(name) for name in distinct.dropna())
