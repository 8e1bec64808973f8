"""Every fixed text a report shows, in English and Chinese side by side, one key per message.

The terminal summary, the HTML report and the compare page all take their words from here, so
a heading is translated once and reads the same wherever it appears, and a test can check that
each message has both languages and is still used. Keys name the message, not the English
words, so two messages that happen to share English words ("Findings" of a report and of a
comparison, translated differently) stay apart. Families filled in at run time:

- `severity.<value>`: one per `advisor.engine.outcome.SEVERITIES`;
- `metric.<name>`: one per compare breakdown metric (`advisor.compare.breakdown.METRICS`);
- `column.<name>`: the heading of a data column called <name>, in any table (evidence too).

English plurals: a message with `{s}` gets "s" unless the count given is 1. A message written
after another on the same line starts with what joins them (a space in English, nothing or a
Chinese mark in Chinese), so no renderer has to ask which language it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from advisor.render.headings import HEADINGS_ZH, readable
from advisor.workload import WORKLOAD_WORDS

LANGS = ("en", "zh")


class Text(NamedTuple):
    """One message in each language of LANGS."""

    en: str
    zh: str


CATALOG: dict[str, Text] = {
    # --- shared ---------------------------------------------------------------------------
    "no_problems": Text("No problems found", "未发现性能问题"),
    "severity.high": Text("high", "高"),
    "severity.medium": Text("medium", "中"),
    "severity.low": Text("low", "低"),
    "generated": Text("generated", "生成于"),
    "format": Text("Format", "格式"),
    "framework": Text("Framework", "框架"),
    "device": Text("Device", "设备"),
    "path": Text("Path", "路径"),
    "showing_rows": Text("showing {shown} of {n} rows from", "显示 {n} 行中的 {shown} 行，来自"),
    "column.comparison": Text("Comparison", "对比"),
    "column.diff": Text("Diff", "差值"),
    "column.metric": Text("Metric", "指标"),
    "column.mode": Text("Mode", "模式"),
    "column.ratio": Text("Ratio", "比值"),
    "column.status": Text("Status", "状态"),
    "column.steps": Text("Steps", "迭代数"),
    "column.task": Text("Task", "任务"),
    # --- terminal summary -----------------------------------------------------------------
    "config_line": Text("Config: {path}", "配置文件：{path}"),
    "more_findings": Text("{n} more finding{s}", "另有 {n} 项发现未列出"),
    "skipped_missing": Text(
        "{n} rule{s} skipped: data missing from this profile",
        "{n} 条规则未执行：本次性能数据缺少所需数据",
    ),
    "skipped_never_recorded": Text(
        "{n} rule{s} skipped: data this format never records",
        "{n} 条规则未执行：该格式不记录所需数据",
    ),
    "to_collect": Text("to collect it: {hint}", "采集方法：{hint}"),
    "impact_legend": Text(
        "At right: time at stake in the {total} profiled{steps}, and its share of the time "
        "measured",
        "右侧：涉及的时间（所采集的共 {total}{steps}），及其占所度量时间的比例",
    ),
    "impact_legend_steps": Text(" ({n} step{s})", "，{n} 个 step"),
    "impact_capped_line": Text(
        "(impact capped at the {measured} measured; the rule computed {raw})",
        "（影响已按所度量的 {measured} 封顶；规则计算得到 {raw}）",
    ),
    "no_estimate_line": Text("(no time estimate: {note})", "（未估算时间：{note}）"),
    # --- CI outputs (SARIF, JUnit) -----------------------------------------------------------
    "at_stake_line": Text("Time at stake: {impact}.", "影响：{impact}。"),
    "at_stake_share_line": Text(
        "Time at stake: {impact} ({share} of {measured}).",
        "影响：{impact}（占 {measured} 的 {share}）。",
    ),
    "skip_missing": Text(
        "data missing from this profile: {needs}", "本次性能数据缺少所需数据：{needs}"
    ),
    "skip_not_recorded": Text(
        "data this format never records: {needs}", "该格式不记录所需数据：{needs}"
    ),
    "fired_below": Text(
        "fired at {severity}, below --fail-on {fail_on}: {message}",
        "已触发（{severity}），低于 --fail-on {fail_on}：{message}",
    ),
    "together_line": Text(
        "Together at most {combined}{share}: findings that measure the same time (e.g. idle "
        "device) are counted once, not {added}",
        "合计至多 {combined}{share}：度量同一段时间（如设备空闲）的发现只计一次，"
        "而不是相加得到的 {added}",
    ),
    "if_fixed_line": Text(
        "if fixed: step time {before} → {after} ({saving})",
        "修复后：迭代时间 {before} → {after}（{saving}）",
    ),
    "if_fixed_bounded_line": Text(
        "if fixed: step time {before} → {after} ({saving}; at most the time of {bounds} on the "
        "critical path)",
        "修复后：迭代时间 {before} → {after}（{saving}；不超过{bounds}在关键路径上的时间）",
    ),
    "bound.compute": Text("device compute", "设备计算"),
    "bound.communication": Text("exposed communication", "未被掩盖的通信"),
    "bound.host": Text("waiting for the host", "等待 Host"),
    "bound.data": Text("data loading", "数据加载"),
    "bound.idle": Text("unexplained idle time", "原因未记录的空闲"),
    "source_line": Text("at {location} {share}", "位于 {location} {share}"),
    "sources_heading": Text("Where in your code", "对应代码位置"),
    "fix_first_line": Text(
        "Fix these first: {rules} → {saving} step time ({before} → {after}; time they share "
        "counted once, each at most its kind's time on the critical path)",
        "优先修复：{rules} → 迭代时间 {saving}（{before} → {after}；共同占用的时间只计一次，"
        "每项不超过同类工作在关键路径上的时间）",
    ),
    "fix_first_one": Text(
        "Fix this first: {rules} → {saving} step time ({before} → {after}; at most its kind's "
        "time on the critical path)",
        "优先修复：{rules} → 迭代时间 {saving}（{before} → {after}；"
        "不超过同类工作在关键路径上的时间）",
    ),
    "fix_first_line_all": Text(
        "Fix these first: {rules} (together all of the step time, {before}: the profile "
        "records no other work in the steps, so no step time if fixed is given)",
        "优先修复：{rules}（合计占满迭代时间 {before}：性能数据中迭代内没有记录到其他工作，"
        "因此不给出修复后的迭代时间）",
    ),
    "fix_first_one_all": Text(
        "Fix this first: {rules} (all of the step time, {before}: the profile records no "
        "other work in the steps, so no step time if fixed is given)",
        "优先修复：{rules}（占满迭代时间 {before}：性能数据中迭代内没有记录到其他工作，"
        "因此不给出修复后的迭代时间）",
    ),
    "reader_warnings_count": Text("{n} reader warning{s}", "读取数据时有 {n} 条告警"),
    "rule_errors_count": Text("{n} rule error{s}", "{n} 条规则执行出错"),
    "details_hint": Text(
        " (use --format html or json for details)", "（详见 --format html 或 json 输出）"
    ),
    "details_in": Text(" (details in {files})", "（详见 {files}）"),
    "list_sep": Text(", ", "，"),
    "more_suggestions": Text("+{n} more suggestion{s}", "另有 {n} 条建议"),
    "aoe_line": Text(
        "AOE: {tuned} of {advised} advised operator{s} tuned",
        "AOE：建议调优的 {advised} 个算子中已调优 {tuned} 个",
    ),
    "aoe_results": Text(" ({results})", "（{results}）"),
    "aoe_improved": Text("{n} improved", "{n} 个性能提升"),
    "aoe_regressed": Text("{n} regressed", "{n} 个性能劣化"),
    "aoe_failed": Text("{n} failed", "{n} 个失败"),
    "aoe_incomplete": Text("{n} incomplete", "{n} 个未完成"),
    "aoe_not_tuned": Text(", {n} not tuned", "，{n} 个未调优"),
    "cluster_of": Text("cluster of {n} rank{s}", "集群，{n} 个 rank"),
    **{f"workload.{kind}": Text(w["en"], w["zh"]) for kind, w in WORKLOAD_WORDS.items()},
    "ranks_in_order": Text("{n} rank{s}, in rank order", "{n} 个 rank（按 rank 编号排序）"),
    "rank_heading": Text("RANK", "rank"),
    "step_time_heading": Text("STEP TIME", "平均迭代耗时"),
    "top_finding_heading": Text("TOP FINDING", "首要问题"),
    "own_steps_note": Text(
        "The ranks' step times here are the cluster's, over the steps no rank spent warming up."
        " Each rank's own findings count its own steady steps: those of rank{s} {ranks} also"
        " count steps the cluster leaves out as other ranks' warm-up.",
        "这里各 rank 的迭代耗时取集群的统计，只含所有 rank 都不在预热的迭代。"
        "各 rank 自身的结论按其自身的稳定迭代计算："
        "rank {ranks} 的结论还包含集群作为其他 rank 的预热而排除的迭代。",
    ),
    "worst_ranks": Text(
        "Ranks with findings at or above medium, worst first ({shown} of {n}):",
        "存在中级及以上问题的 rank，最严重的在前（列出 {shown} 个，共 {n} 个）：",
    ),
    "more_ranks": Text(
        "{n} more rank{s} with findings at or above medium", "另有 {n} 个 rank 存在中级及以上问题"
    ),
    "wrote": Text("Wrote {files} in {folder}", "已写入 {folder}：{files}"),
    "names_and_more": Text("{names} and {n} more", "{names} 等 {total} 个文件"),
    # --- HTML report ----------------------------------------------------------------------
    "advisor_report": Text("advisor report", "advisor 性能调优报告"),
    "profiles_count": Text("{n} profile{s}", "{n} 份性能数据"),
    "config": Text("Config", "配置文件"),
    "no_config": Text("no config file (built-in defaults)", "无配置文件（使用内置默认值）"),
    "ranks_collapsed": Text(
        "{n} rank section{s} below start collapsed; sort the table by any column.",
        "下方 {n} 个 rank 的详情默认折叠；点击表头可按任一列排序。",
    ),
    "ranks_table_only": Text(
        "{n} rank{s} only in the table: the {shown} ranks with the most severe findings have a"
        " section below; every rank's full report is its prof_rule JSON file.",
        "{n} 个 rank 仅列于上表：发现最严重的 {shown} 个 rank 在下方有详情；"
        "每个 rank 的完整报告见其 prof_rule JSON 文件。",
    ),
    "profile": Text("Profile", "性能数据"),
    "rank": Text("Rank", "Rank"),
    "findings": Text("Findings", "发现"),
    "total_time": Text("Total time", "总耗时"),
    "top_issue": Text("Top issue", "首要问题"),
    "no_profiles": Text("No profiles.", "没有性能数据。"),
    "files_read": Text("Files read", "已读取文件"),
    "files_count": Text("{n} file{s}", "{n} 个文件"),
    "findings_label": Text("finding{s}", "项发现"),
    "total_time_label": Text("total time", "总耗时"),
    "none": Text("none", "无"),
    "time_per_rank": Text("Time per rank", "各 rank 耗时"),
    "ranks_count": Text("{n} rank{s}", "{n} 个 rank"),
    "mean_step_time_per_rank": Text("Mean step time per rank", "每个 rank 的平均迭代耗时"),
    "rank_n": Text("Rank {n}", "rank {n}"),
    "rank_of_world": Text("{rank} of {world}", "{rank} / {world}"),
    "step_breakdown": Text("Step breakdown", "迭代耗时拆解"),
    "steps_count": Text("{n} step{s}", "{n} 个迭代"),
    "step_n": Text("Step {n}", "迭代 {n}"),
    "mean": Text("mean", "平均"),
    "steady_mean": Text("mean of the steady steps", "稳定阶段平均"),
    "warmup_left_out": Text(
        "{n} warm-up step{s} left out of the means", "{n} 个预热迭代不计入平均值"
    ),
    "warmup_step": Text("warm-up, left out of the means", "预热，不计入平均值"),
    "min": Text("min", "最短"),
    "max": Text("max", "最长"),
    "first_steps": Text(
        "Showing the first {shown} of {n} steps.", "仅显示 {n} 个迭代中的前 {shown} 个。"
    ),
    "no_step_data": Text("no step data", "无迭代数据"),
    "step_chart": Text("Step time breakdown per step", "每个迭代的耗时拆解"),
    "step_axis": Text("step", "迭代"),
    "time_by_core_type": Text("Time by core type", "各核类型耗时"),
    "core_chart": Text("Device time by core type", "各核类型的设备耗时"),
    "class_chart": Text("Device time by compute class", "各计算类别的设备耗时"),
    "memory_by_kind": Text("Memory at the peak by kind of tensor", "峰值时各类张量占用的内存"),
    "memory_peak_total": Text("peak {total}", "峰值 {total}"),
    "memory_kind_highest": Text("highest {value}", "最高 {value}"),
    "memory_peak_line": Text("Memory at the peak {total}: {kinds}", "峰值内存 {total}：{kinds}"),
    "memory_kind.parameter": Text("parameters", "参数"),
    "memory_kind.optimizer_state": Text("optimizer state", "优化器状态"),
    "memory_kind.input": Text("inputs", "输入"),
    "memory_kind.temporary": Text("temporary tensors", "临时张量"),
    "memory_kind.activation": Text("activations", "激活值"),
    "memory_kind.gradient": Text("gradients", "梯度"),
    "memory_kind.autograd_detail": Text("autograd's own tensors", "autograd 内部张量"),
    "memory_kind.unknown": Text("unknown kind", "类型未知的张量"),
    "no_core_type_data": Text("no core type data", "无核类型数据"),
    "time_by_compute_class": Text("Time by compute class", "各计算类别耗时"),
    "tasks_count": Text("{n} tasks", "{n} 个任务"),
    "chart.computing": Text("Computing", "计算"),
    "chart.comm_not_overlapped": Text("Communication (not overlapped)", "未被掩盖的通信"),
    "chart.communication": Text("Communication", "通信"),
    "chart.free": Text("Free (device idle)", "空闲（设备无任务）"),
    "chart.fp_bp": Text("Forward + backward", "前向 + 反向"),
    "chart.grad_refresh": Text("Gradient refresh", "梯度刷新"),
    "chart.data_aug_bound": Text("Data augmentation bound", "数据增强拖尾"),
    "chart.other": Text("Other / unattributed", "其他 / 未归类"),
    "chart.step_time": Text("Step time", "迭代时间"),
    "timeline": Text("Timeline", "时间线"),
    "timeline_chart": Text(
        "What the device did, instant by instant, over the steps shown",
        "所示迭代中设备每一时刻的状态",
    ),
    "timeline_shown": Text(
        "{shown} of {n} steps, around the slowest (step {slowest})",
        "共 {n} 个迭代，显示最慢的迭代 {slowest} 及其前后共 {shown} 个",
    ),
    "timeline_markers": Text(
        "Numbered markers: the windows of the findings with those numbers.",
        "编号标记：对应编号问题的时间窗口。",
    ),
    "timeline_outside": Text(
        "Windows outside the steps shown: {findings}", "不在所示迭代内的时间窗口：{findings}"
    ),
    "lane.compute": Text("Device compute", "设备计算"),
    "lane.communication": Text("Communication (exposed)", "通信（未被掩盖）"),
    "lane.data": Text("Data loading", "数据加载"),
    "lane.host": Text("Waiting for the host", "等待 Host"),
    "lane.idle": Text("Idle (unexplained)", "空闲（原因未记录）"),
    "window_line": Text("Window: {where}", "时间窗口：{where}"),
    "window_span": Text(
        "{duration} from {start} into the profile", "性能数据开始后 {start} 起的 {duration}"
    ),
    "trace_snippet": Text("Trace snippet", "Trace 片段"),
    "trace_snippet_hint": Text(
        "the events of this window from the profile, for Perfetto or chrome://tracing",
        "该时间窗口内的原始事件，可用 Perfetto 或 chrome://tracing 打开",
    ),
    "findings_ranked": Text(
        "Findings ranked by severity and time at stake", "按严重程度和涉及时间排序的发现"
    ),
    "together": Text(
        "Together these findings stand for at most {combined}{share}: findings that measure "
        "the same time (an idle device, communication ...) are counted once, not added up to "
        "{added}.",
        "这些发现合计至多 {combined}{share}：度量同一段时间（设备空闲、通信等）的发现只计一次，"
        "而不是相加得到的 {added}。",
    ),
    "severity": Text("Severity", "优先级"),
    "finding": Text("Finding", "发现"),
    "impact_in": Text("Impact ({unit})", "影响（{unit}）"),
    "share_of_measured": Text("Share of measured time", "占所度量时间"),
    "no_problems_sentence": Text("No problems found.", "未发现性能问题。"),
    "estimated_saving": Text("estimated time that could be saved", "预计可节省的时间"),
    "of_measured_time": Text("of measured time", "占所度量时间"),
    "no_estimate": Text("No time estimate:", "未估算时间："),
    "impact_capped": Text(
        "The rule computed {raw}; shown capped at the {measured} it was measured over.",
        "规则计算得到 {raw}；已按其度量范围 {measured} 封顶显示。",
    ),
    "shares_time_with": Text("Shares time with", "与以下发现度量同一段时间"),
    "what_to_try": Text("What to try", "调优建议"),
    "measured_vs_thresholds": Text("Measured values vs thresholds", "实测值与阈值"),
    "measured": Text("Measured", "实测值"),
    "thresholds": Text("Thresholds", "阈值"),
    "evidence": Text("Evidence", "证据"),
    "rule_footer": Text("rule", "规则"),
    "aoe_heading": Text("AOE tuning of the advised operators", "建议算子的 AOE 调优结果"),
    "aoe_summary": Text(
        "{advised} operator{s} advised (operator_tuning_file.cfg) · {tuned} tuned: {improved} "
        "improved, {regressed} regressed, {failed} failed, {incomplete} incomplete · "
        "{not_tuned} not tuned. AOE results:",
        "建议调优 {advised} 个算子（operator_tuning_file.cfg）· 已调优 {tuned} 个：性能提升 "
        "{improved} 个，劣化 {regressed} 个，失败 {failed} 个，未完成 {incomplete} 个 · "
        "未调优 {not_tuned} 个。AOE 结果文件：",
    ),
    "operator": Text("Operator", "算子"),
    "op_type": Text("Type", "类型"),
    "before": Text("Before", "调优前"),
    "after": Text("After", "调优后"),
    "improvement": Text("Improvement", "提升"),
    "advised_not_tuned": Text("Advised but not tuned:", "已建议但未调优："),
    "rules_replaced": Text("Rules replaced", "被替换的规则"),
    "no_cluster_repeated_rank": Text(
        "no cross-rank analysis: rank {rank} is in {n} profiles ({paths}), so they are not "
        "the ranks of one run, and comparing them would blame a rank for another run's time; "
        "give advisor one run's folder to compare its ranks",
        "未做跨 rank 分析：rank {rank} 出现在 {n} 份性能数据中（{paths}），它们不是同一次运行的"
        "各个 rank，互相比较会把另一次运行的耗时归咎于某个 rank；"
        "请只传入一次运行的目录以比较其各 rank",
    ),
    "no_cluster_world_sizes": Text(
        "no cross-rank analysis: the profiles come from runs of {sizes} ranks, not from one "
        "run; give advisor one run's folder to compare its ranks",
        "未做跨 rank 分析：这些性能数据来自 rank 数分别为 {sizes} 的不同运行，而非同一次运行；"
        "请只传入一次运行的目录以比较其各 rank",
    ),
    "rule_errors": Text("Rule errors", "规则执行错误"),
    "rule_errors_note": Text(
        "These rules failed while evaluating; their problems may be missing from the findings "
        "above.",
        "以下规则执行失败，上面的发现中可能缺少它们检查的问题。",
    ),
    "rule": Text("Rule", "规则"),
    "problem": Text("Problem", "问题"),
    "data_missing": Text("Data missing from this profile", "本次性能数据缺少的数据"),
    "lacking_rules": Text(
        "{n} rule{s} could not run because this profile lacks data the profiler can record.",
        "性能数据缺少采集工具可以记录的数据，{n} 条规则未能执行。",
    ),
    "title": Text("Title", "标题"),
    "missing_inputs": Text("Missing inputs", "缺少的数据"),
    "how_to_collect": Text("How to collect it", "采集方法"),
    "every_rule_evaluated": Text("Every rule could be evaluated.", "所有规则均已执行。"),
    "all_format_rules_evaluated": Text(
        "None: every rule this format can feed was evaluated.",
        "无：该格式能提供数据的规则均已执行。",
    ),
    "never_recorded_rules": Text(
        "{n} rule{s} need data this format never records", "{n} 条规则所需的数据该格式不记录"
    ),
    "reader_warnings": Text("Reader warnings", "读取告警"),
    "file": Text("File", "文件"),
    "column": Text("Column", "列"),
    "reader": Text("Reader", "读取插件"),
    "no_warnings": Text("No warnings while reading.", "读取数据时没有告警。"),
    # --- compare page ---------------------------------------------------------------------
    "advisor_compare": Text("advisor compare", "advisor 性能比对"),
    "baseline": Text("Baseline", "基线"),
    "options": Text("Options", "比对选项"),
    "overall_breakdown": Text("Overall breakdown per step", "每个迭代的总体耗时拆解"),
    "kernels_per_step": Text("Kernels per step", "每个迭代的 kernel 数"),
    "compare_findings": Text("Findings", "结论"),
    "no_regression": Text("No regression found", "未发现劣化"),
    "changed_operators": Text(
        "Operators that changed most (per step)", "变化最大的算子（每个迭代）"
    ),
    "comm_per_collective": Text(
        "Communication per collective type (per step)", "各类集合通信（每个迭代）"
    ),
    "memory_per_operator": Text(
        "Memory allocated per operator (per step)", "各算子申请的内存（每个迭代）"
    ),
    "memory_per_site": Text(
        "Memory held per place in the code at the peak (the device with the largest)",
        "各代码位置在峰值时占用的内存（峰值最大的设备）",
    ),
    "memory_per_kind": Text(
        "Memory held per kind of tensor (at the peak)",
        "各类张量占用的内存（峰值时）",
    ),
    "modules_per_step": Text("Modules (per step)", "各模块（每个迭代）"),
    "apis_per_name": Text(
        "Framework APIs that changed most (per step)", "变化最大的框架 API（每个迭代）"
    ),
    "kernels_per_shape": Text(
        "Kernels by type and input shape (per step)", "按类型和输入 shape 汇总的 kernel（每个迭代）"
    ),
    "profiling_options": Text("Profiler options that inflate times", "会使耗时膨胀的采集选项"),
    "not_minimal_profiling": Text(" (not minimal profiling)", "（非最简采集）"),
    "rank_slowest": Text(
        "{side} holds {ranks} ranks: compared the slowest, {label} (mean step {mean}); "
        "others: {others}",
        "{side}包含 {ranks} 个 rank：比对最慢的 {label}（平均迭代 {mean}）；其余：{others}",
    ),
    "rank_fastest": Text(
        "{side} holds {ranks} ranks: compared the fastest, {label} (mean step {mean}); "
        "others: {others}",
        "{side}包含 {ranks} 个 rank：比对最快的 {label}（平均迭代 {mean}）；其余：{others}",
    ),
    "step_chosen": Text("{side}: step {step} only", "{side}：仅比对迭代 {step}"),
    "not_minimal_note": Text(
        "{side} was not profiled minimally ({options}): its E2E, free and uncovered "
        "communication times are inflated",
        "{side}未使用最简采集（{options}）：其 E2E、空闲和未被掩盖的通信耗时存在膨胀",
    ),
    "metric.cube": Text("Cube (matrix multiply)", "Cube（矩阵乘）"),
    "metric.vector": Text("Vector", "Vector"),
    "metric.conv_forward": Text("Conv forward", "Conv 前向"),
    "metric.conv_backward": Text("Conv backward", "Conv 反向"),
    "metric.flash_attention_forward": Text("Flash attention forward", "Flash Attention 前向"),
    "metric.flash_attention_backward": Text("Flash attention backward", "Flash Attention 反向"),
    "metric.paged_attention": Text("Paged attention", "Paged Attention"),
    "metric.other_compute": Text("Other compute", "其他计算"),
    "metric.lccl": Text("Lccl", "Lccl"),
    "metric.computing": Text("Computing time", "计算流耗时"),
    "metric.comm_not_overlapped": Text("Uncovered communication", "未被掩盖的通信"),
    "metric.wait": Text("Communication wait", "通信等待"),
    "metric.sdma": Text("SDMA / copies", "SDMA / 拷贝"),
    "metric.free": Text("Free time", "空闲"),
    "metric.e2e": Text("E2E step time", "E2E 迭代耗时"),
    "metric.operators": Text("Framework operators", "框架算子"),
    "metric.dataloader": Text("Data loading", "数据加载"),
    "metric.memory_peak": Text("Memory peak", "内存峰值"),
    # --- advisor inspect (terminal) -------------------------------------------------------
    "inspect.profile": Text(
        "{label}: {format} ({framework}, {device}) at {path}",
        "{label}：{format}（{framework}，{device}），位于 {path}",
    ),
    "inspect.rows": Text("{n} rows", "{n} 行"),
    "inspect.files": Text("files read: {n}", "已读取文件：{n} 个"),
    "inspect.source": Text(" (source: {source})", "（来源：{source}）"),
    "inspect.file_list": Text(": {files}", "：{files}"),
    "inspect.warning": Text("warning: {warning}", "警告：{warning}"),
    # --- advisor top (terminal) -----------------------------------------------------------
    "top.profile": Text(
        "{label} ({format}, {table}, {path}): {n} row{s}",
        "{label}（{format}，{table}，{path}）：{n} 行",
    ),
    "top.totals": Text(
        "total device time {device}, total host time {host}",
        "设备总耗时 {device}，Host 总耗时 {host}",
    ),
    "top.copies": Text(
        "copy time ({n} copy operator{s}): total {total}, mean {mean}; copy wait time: total "
        "{wait}, mean {wait_mean}",
        "拷贝耗时（{n} 个拷贝算子）：总计 {total}，平均 {mean}；"
        "拷贝等待耗时：总计 {wait}，平均 {wait_mean}",
    ),
    "top.kern": Text(
        "time: each operator's wait before its kernel started (kern - start)",
        "耗时：各算子从开始到其 kernel 启动之间的等待（kern - start）",
    ),
    "top.host": Text("host (host_ops): {n} row{s}", "Host 侧（host_ops）：{n} 行"),
    "top.column.name": Text("name", "名称"),
    "top.column.op_type": Text("op_type", "算子类型"),
    "top.column.core_type": Text("core_type", "核类型"),
    "top.column.count": Text("count", "次数"),
    "top.column.time": Text("time", "耗时"),
    "top.column.total": Text("total", "总耗时"),
    "top.column.share": Text("share", "占比"),
    "top.column.cumulative": Text("cumulative", "累计"),
    "top.column.flops": Text("FLO", "浮点运算数"),
    "top.column.gflops": Text("GFLOPS", "GFLOPS"),
    "top.column.bytes": Text("memory", "内存"),
    "top.column.gbps": Text("GB/s", "GB/s"),
    "top.column.start": Text("start", "开始"),
    "top.column.input_shapes": Text("input_shapes", "输入 shape"),
    "top.column.input_dtypes": Text("input_dtypes", "输入数据类型"),
    "top.column.output_shapes": Text("output_shapes", "输出 shape"),
}
CATALOG.update(
    {  # evidence column headings: English as the name reads, Chinese from headings.py
        f"column.{stem}": Text(readable(stem), zh)
        for stem, zh in HEADINGS_ZH.items()
        if f"column.{stem}" not in CATALOG
    }
)
"""Every message by key, in the order the pages show them."""

Translate = Callable[..., str]
"""`tr(key, count=1, **values)`: one message in a fixed language, filled in."""


def message(lang: str, key: str, count: int = 1, **values: Any) -> str:
    """Message `key` in `lang` (English for a language the catalog lacks), filled in with
    `values`; `count` picks English's plural {s}. An unknown key raises KeyError, so a typo
    fails in tests instead of showing the key to a reader."""
    text = CATALOG[key]
    template = getattr(text, lang) if lang in LANGS else text.en
    return template.format(s="" if count == 1 else "s", **values)


def translator(lang: str) -> Translate:
    """`message` with its language fixed, as the renderers and templates call it (`tr`)."""
    return partial(message, lang)


def kind_words(tr: Translate, kind: str) -> str:
    """A memory timeline's kind of tensor in words ('optimizer state'); a kind the catalog
    lacks as written."""
    return tr(f"memory_kind.{kind}") if f"memory_kind.{kind}" in CATALOG else kind
