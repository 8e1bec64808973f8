"""The compare HTML page: both runs, the breakdown side by side, findings and the top diffs.

Built on the report page's environment, stylesheet and finding macro, so a compare finding
looks like any other; only the tables of two runs are new.
"""

from __future__ import annotations

from typing import Any

from advisor.render.format import fmt_bytes, fmt_num, fmt_pct, fmt_us, fmt_value, report_lang
from advisor.render.html import _environment, _profile_view, translator

TOP_ROWS = 20
LABELS: dict[str, dict[str, str]] = {
    "zh": {
        "advisor compare": "advisor 性能比对",
        "Baseline": "基线", "Comparison": "对比", "Steps": "迭代数", "Options": "比对选项",
        "Overall breakdown per step": "每个迭代的总体耗时拆解", "Metric": "指标",
        "Diff": "差值", "Ratio": "比值", "Kernels per step": "每个迭代的 kernel 数",
        "Findings": "结论", "No regression found": "未发现劣化",
        "Operators that changed most (per step)": "变化最大的算子（每个迭代）",
        "Communication per collective type (per step)": "各类集合通信（每个迭代）",
        "Memory allocated per operator (per step)": "各算子申请的内存（每个迭代）",
        "Modules (per step)": "各模块（每个迭代）",
        "cube": "Cube", "vector": "Vector", "conv_forward": "Conv 前向",
        "conv_backward": "Conv 反向", "flash_attention_forward": "Flash Attention 前向",
        "flash_attention_backward": "Flash Attention 反向",
        "paged_attention": "Paged Attention", "other_compute": "其他计算",
        "computing": "计算流耗时", "comm_not_overlapped": "未被掩盖的通信", "wait": "通信等待",
        "sdma": "SDMA / 拷贝", "free": "空闲", "e2e": "E2E 迭代耗时",
        "operators": "框架算子", "dataloader": "数据加载", "memory_peak": "内存峰值",
    },
    "en": {
        "cube": "Cube", "vector": "Vector", "conv_forward": "Conv forward",
        "conv_backward": "Conv backward", "flash_attention_forward": "Flash attention forward",
        "flash_attention_backward": "Flash attention backward",
        "paged_attention": "Paged attention", "other_compute": "Other compute",
        "computing": "Computing time", "comm_not_overlapped": "Uncovered communication",
        "wait": "Communication wait", "sdma": "SDMA / copies", "free": "Free time",
        "e2e": "E2E step time", "operators": "Framework operators",
        "dataloader": "Data loading", "memory_peak": "Memory peak",
    },
}
SECTIONS = (
    ("compare_op_stats", "ops", "Operators that changed most (per step)", "diff_us"),
    ("compare_comm", "comm", "Communication per collective type (per step)", "diff_us"),
    ("compare_memory", "memory", "Memory allocated per operator (per step)", "diff_bytes"),
    ("compare_modules", "modules", "Modules (per step)", "diff_us"),
)


def _cell(unit: str, value: Any) -> str:
    """A breakdown value: a size for the memory peak, else a duration."""
    return fmt_bytes(value) if unit == "bytes" else fmt_us(value)


def _overall_rows(rows: list[dict[str, Any]], tr: Any) -> list[dict[str, Any]]:
    times = [v for r in rows if r["unit"] == "µs" for v in (r["base"], r["comparison"])
             if v is not None]
    top = max(times, default=0.0) or 1.0

    def width(r: dict[str, Any], key: str) -> float:
        value = r[key]
        if r["unit"] != "µs" or value is None:
            return 0.0
        return round(100.0 * max(value, 0.0) / top, 1)

    out = []
    for r in rows:
        diff = r["diff"]
        trend = "" if diff is None or diff == 0 else ("worse" if diff > 0 else "better")
        counts = " → ".join(fmt_num(r[k]) for k in ("base_count", "comp_count")
                            if r.get(k) is not None)
        out.append({
            "metric": r["metric"], "label": tr(r["metric"]),
            "base": _cell(r["unit"], r["base"]), "comparison": _cell(r["unit"], r["comparison"]),
            "diff": ("+" if trend == "worse" else "") + _cell(r["unit"], diff),
            "ratio": fmt_pct(r["ratio"]), "trend": trend,
            "counts": counts, "base_width": width(r, "base"), "comp_width": width(r, "comparison"),
        })
    return out


def _table_view(rows: list[dict[str, Any]], table: str, anchor: str, title: str,
                diff: str) -> dict[str, Any]:
    """The rows that changed most, worse first then better, with the diff column marked."""
    ordered = sorted(rows, key=lambda r: -abs(r.get(diff) or 0.0))[:TOP_ROWS]
    columns = list(ordered[0]) if ordered else []
    body = [[(fmt_value(c, r[c]), ("worse" if (r[c] or 0) > 0 else "better" if (r[c] or 0) < 0
                                   else "") if c == diff else "") for c in columns]
            for r in ordered]
    return {"anchor": anchor, "title": title, "table": table, "columns": columns,
            "rows": body, "total": len(rows)}


def render_compare_html(report: dict[str, Any], document: dict[str, Any]) -> str:
    """The compare page from the compare profile's report and the compare.json document."""
    lang = report_lang(report)
    base_tr = translator(lang)
    mine = {**LABELS["en"], **LABELS.get(lang, {})}

    def tr(text: str, count: int = 1, **values: Any) -> str:
        return mine[text].format(**values) if text in mine else base_tr(text, count, **values)

    tables = document["tables"]
    options = document["options"]
    return _environment().get_template("compare.html.j2").render(
        lang=lang, tr=tr, title=tr("advisor compare"),
        version=document["advisor"].get("version", ""),
        generated_at=document["advisor"].get("generated_at", ""),
        runs=[(tr("Baseline"), document["baseline"]),
              (tr("Comparison"), document["comparison"])],
        options=[("use_input_shape", options["use_input_shape"]),
                 ("max_kernel_num", options["max_kernel_num"]),
                 ("op_name_map", len(options["op_name_map"]))],
        overall=_overall_rows(tables["compare_overall"], tr),
        profile=_profile_view(1, report, tr),
        tables=[_table_view(tables[name], name, anchor, tr(title), diff)
                for name, anchor, title, diff in SECTIONS if tables.get(name)],
    )
