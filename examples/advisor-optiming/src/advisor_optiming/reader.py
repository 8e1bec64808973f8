"""Reads `*.optiming.csv`: one row per operator execution, one Profile per device."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from advisor.errors import UnreadableInput
from advisor.formats.csv_text import read_csv_strings
from advisor.formats.numbers import to_numbers
from advisor.model import Profile, ProfileMeta, conform

SUFFIX = ".optiming.csv"
COLUMNS = ("step", "op_name", "op_type", "core_type", "device", "start_us", "duration_us")
NUMBERS = ("step", "start_us", "duration_us")
MAX_ROW_WARNINGS = 20
"""Rows skipped beyond this many are counted in one warning, so a broken file stays readable."""


class OpTimingReader:
    """One op-timing CSV file: a Profile for each device it names."""

    name = "optiming"
    formats = ("op-timing CSV (*.optiming.csv: " + ",".join(COLUMNS) + ")",)

    def detect(self, path: Path) -> bool:
        # Cheap: the name and the header line, never the rows.
        if not path.name.endswith(SUFFIX) or not path.is_file():
            return False
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            header = fh.readline(1024)
        return set(COLUMNS) <= {cell.strip() for cell in header.split(",")}

    def read(self, path: Path) -> list[Profile]:
        path = Path(path).resolve()
        names, rows = read_csv_strings(path)  # raises UnreadableInput for an unreadable file
        missing = [c for c in COLUMNS if c not in names]
        if missing:
            raise UnreadableInput(path, f"missing column(s): {', '.join(missing)}")
        warnings: list[tuple[str, int | None, str | None]] = []

        def warn(
            file: str | Path, problem: str, *, line: int | None = None, column: str | None = None
        ) -> None:
            warnings.append((problem, line, column))

        ops = pd.DataFrame(
            {
                "name": rows["op_name"],
                "op_type": rows["op_type"].mask(rows["op_type"] == ""),
                "core_type": rows["core_type"].str.upper(),
                "device": rows["device"],
                **{c: to_numbers(rows[c], file=path, column=c, warn=warn) for c in NUMBERS},
            }
        )
        good = ops[~self._skipped_rows(ops, warn, path)]
        if good.empty:
            raise UnreadableInput(
                path, "no row has an op_name, core_type, device, step, start_us and duration_us"
            )
        profiles = []
        for device, device_ops in good.groupby("device", sort=True):
            profile = self._profile(path, str(device), device_ops)
            for problem, line, column in warnings:
                profile.warn(path, problem, line=line, column=column, reader=self.name)
            profiles.append(profile)
        return profiles

    @staticmethod
    def _skipped_rows(ops: pd.DataFrame, warn: Callable[..., None], path: Path) -> pd.Series:
        """Rows lacking a required value: one warning per row (line numbers count the header)."""
        reasons = pd.DataFrame(
            {
                "empty op_name": ops["name"] == "",
                "empty core_type": ops["core_type"] == "",
                "empty device": ops["device"] == "",
                **{f"no {c}": ops[c].isna() for c in NUMBERS},
                "negative duration_us": ops["duration_us"] < 0,
            }
        )
        skipped = reasons.any(axis=1)
        for index in skipped[skipped].index[:MAX_ROW_WARNINGS]:
            why = ", ".join(reasons.columns[reasons.loc[index]])
            warn(path, f"row skipped: {why}", line=int(index) + 2)
        if skipped.sum() > MAX_ROW_WARNINGS:
            warn(path, f"{skipped.sum() - MAX_ROW_WARNINGS} more rows skipped")
        return skipped

    @staticmethod
    def _profile(path: Path, device: str, ops: pd.DataFrame) -> Profile:
        origin = float(ops["start_us"].min())
        profile = Profile(
            ProfileMeta(
                source_format="optiming-csv",
                path=str(path),
                device_kind="NPU",
                device_id=device,
                files_read=[path.name],
                extra={"time_origin_us": origin},
            )
        )
        is_comm = ops["core_type"] == "COMMUNICATION"
        ops = ops.assign(
            start_us=ops["start_us"] - origin,
            category=is_comm.map({True: "communication", False: "compute"}),
        )
        profile.tables["device_ops"] = conform("device_ops", ops.reset_index(drop=True))
        return profile
