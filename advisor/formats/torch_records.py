"""Names of the host records PyTorch writes around code it did not run operator by operator.

Two plugins need them (the Kineto reader tells how a trace's steps ran, the fusion metrics
leave code torch.compile fused already out of their candidates), and plugins share helpers
through the core only.
"""

from __future__ import annotations

import re

TORCH_COMPILED = re.compile(
    r"^(?:Torch-Compiled Region|CompiledFunction(?:Backward)?$|## Call CompiledFxGraph)"
)
"""Host records of code torch.compile made: Dynamo's region (`Torch-Compiled Region: 0/0`),
AOTAutograd's autograd function (`CompiledFunction`, `CompiledFunctionBackward`) and
Inductor's graph call (`## Call CompiledFxGraph f... ##`)."""
