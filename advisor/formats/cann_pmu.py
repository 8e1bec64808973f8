"""The AI Core PMU counters CANN records when profiling with aic_metrics PipeUtilization: the
device_ops ratios they give and the columns only such a collection fills.

Apart from the summary layouts (cann_summaries) so that the msprof and torch_npu readers'
entry modules can name these columns in their collect hints without importing the CSV
machinery: every command that loads plugins imports those entry modules.
"""

from __future__ import annotations

PMU_RATIOS = {
    "vec_ratio": ("aic_vec_ratio", "aiv_vec_ratio", "vec_ratio"),
    "mac_ratio": ("aic_mac_ratio", "mac_ratio"),
    "scalar_ratio": ("aic_scalar_ratio", "aiv_scalar_ratio", "scalar_ratio"),
    "mte2_ratio": ("aic_mte2_ratio", "aiv_mte2_ratio", "mte2_ratio"),
    "mte1_ratio": ("aic_mte1_ratio", "mte1_ratio"),
    "mte3_ratio": ("aiv_mte3_ratio", "aic_mte3_ratio", "mte3_ratio"),
    "fixpipe_ratio": ("aic_fixpipe_ratio", "fixpipe_ratio"),
}
"""Each PMU ratio of device_ops and the counters that give it, first present wins."""
PMU_COLUMNS = ("aicore_time_us", *PMU_RATIOS)
"""The device_ops columns only a PipeUtilization collection records (readers' collect hints)."""
