"""How device tasks wait on the host calls that launch them: the one rule the idle-time
breakdown and the critical path share, so both tell host wait from other waits alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

KERNEL_WAIT_US = 30.0
"""HTA's default `consecutive_kernel_delay` of get_idle_time_breakdown (trace time, µs): an idle
interval shorter than this between a task and the one before it is launch overhead."""


def queued_after_launch(task_start: np.ndarray, launch_end: np.ndarray) -> np.ndarray:
    """How long each task waited on the device after its launching call returned, where that
    is over KERNEL_WAIT_US; 0 elsewhere and where the call is unknown (NaN). A task launched
    late and then held back (behind a stream's event wait: an inference server's decode step
    launched at once and run 463 ms later) waited that long for something other than the host."""
    with np.errstate(invalid="ignore"):
        wait = task_start - launch_end
        return np.where(wait > KERNEL_WAIT_US, wait, 0.0)
