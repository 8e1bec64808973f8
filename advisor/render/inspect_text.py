"""`advisor inspect`'s lines in English or Chinese: what each profile is, the rows of each
table it holds, the files read. Table and column names stay as the contract names them."""

from __future__ import annotations

from advisor.model import Profile
from advisor.render.messages import message

FILES_SHOWN = 8


def profile_lines(profile: Profile, lang: str = "en") -> list[str]:
    """A profile as inspect shows it: its format, framework and device, one line per table
    (rows and columns), the files read, its warnings."""
    meta = profile.meta
    lines = [
        message(
            lang,
            "inspect.profile",
            label=profile.label,
            format=meta.source_format,
            framework=meta.framework,
            device=meta.device_kind,
            path=meta.path,
        )
    ]
    for name, df in profile.tables.items():
        rows = message(lang, "inspect.rows", n=f"{len(df):>9}")
        lines.append(f"    {name:<13} {rows}  {', '.join(df.columns)}")
    lines.append(_files_line(meta.files_read, meta.extra.get("source"), lang))
    lines += [
        "    " + message(lang, "inspect.warning", warning=w.line_in(lang)) for w in profile.warnings
    ]
    return lines


def _files_line(files: list[str], source: object, lang: str) -> str:
    """How many files were read, the first ones, and the source a reader chose when a
    profile holds the same data twice (`db`: the profiler database, not the text files)."""
    shown = ", ".join(files[:FILES_SHOWN]) + (", ..." if len(files) > FILES_SHOWN else "")
    origin = message(lang, "inspect.source", source=source) if source else ""
    line = "    " + message(lang, "inspect.files", len(files), n=len(files)) + origin
    return line + (message(lang, "inspect.file_list", files=shown) if files else "")
