"""communication.json and communication_matrix.json: collectives with their transit, wait and
bandwidth, and the rank-to-rank links of each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from advisor.formats.cann_comm import TASK_COLUMNS
from advisor.formats.cann_tasks import collective
from advisor.formats.decimal_clock import Clock
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MB = 1e6  # communication sizes: decimal MB (MB/ms is the GB/s written beside them)


def _op_and_group(key: str) -> tuple[str, str | None]:
    name, _, group = str(key).partition("@")
    return name, group or None


def _blocks(data: Any) -> Iterable[tuple[str, dict[str, Any]]]:
    """(`op@group` key, value) of `{step: {collective|p2p: {key: value}}}`."""
    if not isinstance(data, dict):
        return
    for per_step in data.values():
        if not isinstance(per_step, dict):
            continue
        for per_kind in per_step.values():
            if not isinstance(per_kind, dict):
                continue
            for key, value in per_kind.items():
                if isinstance(value, dict):
                    yield str(key), value


def _number(mapping: dict[str, Any], key: str) -> float:
    try:
        value = float(mapping.get(key))
    except (TypeError, ValueError):
        return float("nan")
    return value if np.isfinite(value) else float("nan")


SDMA_PARTS = ("HCCS", "PCIE", "SIO")
"""communication.json's SDMA entry is the sum of these intra-node transports (HCCS 0.0639 MB
+ PCIE 0.0214 MB = SDMA 0.0853 MB in msprof-analyze's sample): adding all would count the
bytes twice. LOCAL copies stay on one device and move nothing between ranks."""


def _moved(transports: dict[str, dict[str, Any]]) -> dict[str, float]:
    """MB each transport moved between ranks, every byte once: RDMA and the SDMA parts
    (HCCS, PCIE, SIO); SDMA itself only where the file gives no parts."""
    sizes = {
        t: _number(v, "Transit Size(MB)") for t, v in transports.items() if t.upper() != "LOCAL"
    }
    if any(t in sizes for t in SDMA_PARTS):
        sizes.pop("SDMA", None)
    return {t: size for t, size in sizes.items() if size > 0}


def _per_transport(transports: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Bytes, transit time and bandwidth of the op's SDMA (within the node: the SDMA entry,
    else its parts HCCS, PCIE and SIO added) and RDMA (between nodes) transfers."""
    upper = {t.upper(): v for t, v in transports.items()}
    parts = {
        "sdma": [upper["SDMA"]]
        if "SDMA" in upper
        else [upper[t] for t in SDMA_PARTS if t in upper],
        "rdma": [upper["RDMA"]] if "RDMA" in upper else [],
    }
    out = {}
    for kind, infos in parts.items():
        if not infos:
            continue
        size = sum(np.nan_to_num(_number(i, "Transit Size(MB)")) for i in infos)
        transit = sum(np.nan_to_num(_number(i, "Transit Time(ms)")) for i in infos)
        out[f"{kind}_bytes"] = size * MB
        out[f"{kind}_transit_us"] = transit * 1e3
        out[f"{kind}_bandwidth_gbps"] = (
            _number(infos[0], "Bandwidth(GB/s)")
            if len(infos) == 1
            else (size / transit if transit > 0 else float("nan"))
        )
    return out


def parse_communication(
    data: Any, clock: Clock
) -> tuple[pd.DataFrame | None, dict[str, dict[str, float]]]:
    """comm_ops from communication.json, and bandwidth per transport from its totals."""
    rows, starts = [], []
    totals: dict[str, dict[str, float]] = {}
    for key, block in _blocks(data):
        time_info = block.get("Communication Time Info")
        bandwidth = block.get("Communication Bandwidth Info")
        bandwidth = bandwidth if isinstance(bandwidth, dict) else {}
        transports = {t: v for t, v in bandwidth.items() if isinstance(v, dict)}
        if key.startswith("Total Op Info"):
            for transport, info in transports.items():
                total = totals.setdefault(transport, {"bytes": 0.0, "transit_us": 0.0})
                # plain floats: the totals go into the report's profile.extra as they are
                total["bytes"] += float(np.nan_to_num(_number(info, "Transit Size(MB)"))) * MB
                total["transit_us"] += float(np.nan_to_num(_number(info, "Transit Time(ms)"))) * 1e3
            continue
        if not isinstance(time_info, dict):
            continue
        name, group = _op_and_group(key)
        moved = _moved(transports)
        main = max(moved, key=moved.__getitem__) if moved else None
        starts.append(time_info.get("Start Timestamp(us)"))
        rows.append(
            {
                **_per_transport(transports),
                "name": name,
                "kind": "op",
                "op": collective(name),
                "group": group,
                "duration_us": _number(time_info, "Elapse Time(ms)") * 1e3,
                "wait_us": _number(time_info, "Wait Time(ms)") * 1e3,
                "transit_us": _number(time_info, "Transit Time(ms)") * 1e3,
                "bytes": sum(moved.values()) * MB if moved else np.nan,
                "transport": main,
                "bandwidth_gbps": _number(transports[main], "Bandwidth(GB/s)") if main else np.nan,
            }
        )
    for total in totals.values():
        total["bandwidth_gbps"] = (
            total["bytes"] / total["transit_us"] / 1e3 if total["transit_us"] else float("nan")
        )
    if not rows:
        return None, totals
    return pd.DataFrame(rows).assign(start_us=clock.us(starts)), totals


def parse_communication_matrix(data: Any) -> pd.DataFrame | None:
    """comm_ops rows per link (`src->dst`) from communication_matrix.json."""
    rows = []
    for key, links in _blocks(data):
        if key.startswith("Total Op Info"):
            continue
        name, group = _op_and_group(key)
        for link, info in links.items():
            src, _, dst = str(link).partition("-")
            if not isinstance(info, dict) or not (src.isdigit() and dst.isdigit()):
                continue  # "0-top1", "0-total", ...: summaries of a rank's links, not links
            transit_us = _number(info, "Transit Time(ms)") * 1e3
            rows.append(
                {
                    "name": f"{src}->{dst}",
                    "kind": "link",
                    "op": collective(str(info.get("Op Name") or name)),
                    "group": group,
                    "duration_us": transit_us,
                    "transit_us": transit_us,
                    "bytes": _number(info, "Transit Size(MB)") * MB,
                    "transport": info.get("Transport Type"),
                    "bandwidth_gbps": _number(info, "Bandwidth(GB/s)"),
                }
            )
    return pd.DataFrame(rows) if rows else None


def with_trace_tasks(comm: pd.DataFrame, trace_ops: pd.DataFrame | None) -> pd.DataFrame:
    """communication.json's ops with the figures of the trace's HCCL tasks (TASK_COLUMNS: byte
    alignment, the peer waited for), matched by op name (both name an op
    `hcom_allReduce__586_0_1`, the file without its `@group`); an op the trace lacks keeps
    them empty."""
    columns = [c for c in TASK_COLUMNS if trace_ops is not None and c in trace_ops]
    if trace_ops is None or not columns:
        return comm
    return comm.join(trace_ops.drop_duplicates("name").set_index("name")[columns], on="name")
