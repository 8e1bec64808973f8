"""Whether a profile records training or inference: advice for one is wrong for the other
(activation checkpointing and gradient accumulation mean nothing to a model that runs no
backward pass, and an inference server has no "training loop")."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from advisor.text_codes import coded

if TYPE_CHECKING:
    import pandas as pd

    from advisor.model import Profile

TRAINING_NAMES = re.compile(
    r"[Bb]ackward"  # autograd's MmBackward0, aten::*_backward, aclnn*Backward, *_backward kernels
    r"|Backprop"  # CANN's Conv2DBackpropFilter
    r"|Grad(?![a-z])"  # CANN's ReluGrad, SoftmaxGrad; AccumulateGrad
    r"|^[Gg]radients/"  # the gradient scope of MindSpore and TensorFlow graphs
    r"|_[dw]grad_|[dw]grad_nchw"  # cuDNN's data and weight gradient kernels
    r"|^Optimizer\.(?:step|zero_grad)#"  # torch.optim's annotations
    r"|Apply(?:Adam|Momentum|GradientDescent|RMSProp)"  # CANN's and MindSpore's optimizer kernels
    r"|MomentumUpdateVariable|AdamWeightDecay"  # MindSpore's GPU optimizer kernels
    r"|(?:Adam|AdamW|SGD|Lamb|Adagrad)[A-Za-z]*Functor"  # PyTorch's fused and foreach optimizers
)
"""Operator and kernel names only a training step runs: a backward pass or an optimizer."""
WORKLOADS: dict[bool | None, str | None] = {True: "training", False: "inference", None: None}
"""What the reports call each answer of `training` (a profile's `workload`)."""
WORKLOAD_WORDS = {
    "training": {"en": "training", "zh": "训练"},
    "inference": {"en": "inference", "zh": "推理"},
}
"""Each workload's word in each report language: the reports' heading says it, and the rules'
template word `run_kind` (advisor.engine.wording)."""
FRAMEWORK_KINDS = ("aten",)
"""host_ops kinds of framework operators: a profile that records them would record the
backward pass's too."""
MIN_FRAMEWORK_NAMES = 10
"""Distinct framework operators a profile must record before their names, none of them a
backward pass's, say it infers: a model's forward pass runs more than a few kinds of operator,
and a profile of fewer (MindSpore's data-queue operator alone, one Add over nine steps) shows
too little of it."""


def training(profile: Profile) -> bool | None:
    """True where an operator or kernel name shows a backward pass or an optimizer step
    (TRAINING_NAMES); False where the profile records framework operators (FRAMEWORK_KINDS,
    MIN_FRAMEWORK_NAMES of them) and none shows either: an inference run; None where it
    records too little to tell (a CANN export whose kernels name no gradient, a trace of
    runtime calls alone)."""
    host = profile.tables.get("host_ops")
    device = profile.tables.get("device_ops")
    for table in (host, device):
        if table is not None and "name" in table and _names_match(table["name"]):
            return True
    if host is None or "kind" not in host or "name" not in host:
        return None
    framework = host["kind"].isin(FRAMEWORK_KINDS).to_numpy(dtype=bool, na_value=False)
    distinct = host["name"][framework].nunique()
    return False if distinct >= MIN_FRAMEWORK_NAMES else None


def _names_match(names: pd.Series) -> bool:
    """Whether any of the distinct names matches TRAINING_NAMES (a name is tested once,
    however many rows carry it)."""
    _, distinct = coded(names)
    return any(TRAINING_NAMES.search(name) for name in distinct.dropna())
