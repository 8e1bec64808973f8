"""Python stack frames as profilers write them, and which of them are the user's own code.

Two writers, one frame text, `path(line): function`:

- Kineto (`with_stack=True`): a `python_function` event per Python call, named
  `make_traces.py(93): forward`. The line is where the frame was when the profiler first saw
  it: the function's first line for a call made while profiling, the line being run for a
  function already running when profiling began (the training loop at its `prof.step()`).
  The path is cut to what follows the longest `sys.path`
  entry holding it: a script run from its folder is `train.py`, an installed package
  `torch/nn/modules/module.py`, the standard library `typing.py`; a file outside `sys.path`
  keeps its absolute path. Calls into C show as `<built-in method ...>`, module calls as
  `nn.Module: Linear_0`: neither is a file.
- torch's `Call stack` (torch_npu's trace_view.json `args["Call stack"]`, its database's
  PYTORCH_CALLCHAINS): the whole stack of one operator, innermost frame first, frames separated
  by `;` (torch_npu writes `;\\r\\n`), each at the line being run (the call), with absolute
  paths.

A frame is the user's when its file is none of: a pseudo-file (`<frozen os>`, `<string>`),
an installed package (`site-packages`, `dist-packages`), the standard library (an absolute path
under `lib/pythonX.Y`, or a relative one whose top-level name is a standard module), or the
deep-learning framework itself (torch and its family, torch_npu, MindSpore, MegEngine, Triton).
A trace cut to `sys.path` cannot tell another installed library (transformers, say) from the
user's own package, so such frames count as the user's.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_FRAME = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\)(?::\s*(?P<function>.*))?$")
_STACK_SEPARATOR = re.compile(r"[;\r\n]+")
_STDLIB_PATH = re.compile(r"(?:^|/)lib(?:64)?/python\d+(?:\.\d+)?t?/|(?:^|/)lib/python\d+\.zip/")
_WINDOWS_STDLIB = re.compile(r"(?:^|/)python\d*/lib/", re.IGNORECASE)
_INSTALLED = ("site-packages", "dist-packages")
FRAMEWORK_PACKAGES = frozenset(
    {
        "torch",
        "torch_npu",
        "torchvision",
        "torchaudio",
        "torchtext",
        "torchrec",
        "functorch",
        "triton",
        "mindspore",
        "megengine",
    }
)
"""Top-level packages of the frameworks whose frames lie between the user's code and an
operator: never the line a user would change."""
_SCRIPT_NAMES = frozenset({"test", "profile", "code", "trace", "this"})
"""Standard module names users often give their own scripts: such a relative file counts as
theirs (the standard modules of these names do not launch operators)."""


@dataclass(frozen=True)
class Frame:
    """One parsed frame: file as written, line (None when not written), function name."""

    file: str
    line: int | None
    function: str


def parse_frame(text: str) -> Frame | None:
    """A frame from `path(line): function` (also `path(line)` and a bare `path.py`); None
    for what names no file (`<built-in ...>`, `nn.Module: Linear_0`, empty text)."""
    text = text.strip()
    if not text or text.startswith("<built-in") or text.startswith("nn.Module:"):
        return None
    match = _FRAME.match(text)
    if match is None:
        return Frame(text, None, "") if text.endswith(".py") else None
    return Frame(match["file"].strip(), int(match["line"]), (match["function"] or "").strip())


def split_stack(text: str) -> list[str]:
    """The frames of a `Call stack` text, innermost first (`;`, `;\\r\\n` or newlines)."""
    return [part for part in (p.strip() for p in _STACK_SEPARATOR.split(text)) if part]


def user_frame(text: str) -> Frame | None:
    """The innermost frame of a `Call stack` text that is the user's code, or None."""
    for part in split_stack(text):
        frame = parse_frame(part)
        if frame is not None and is_user_file(frame.file):
            return frame
    return None


def is_user_file(file: str) -> bool:
    """Whether a frame's file is the user's code (see the module docstring)."""
    if not file or file.startswith("<"):
        return False
    path = file.replace("\\", "/")
    parts = [p for p in path.split("/") if p]
    if not parts or any(p in _INSTALLED for p in parts[:-1]):
        return False
    if _STDLIB_PATH.search(path) or _WINDOWS_STDLIB.search(path):
        return False
    if any(p in FRAMEWORK_PACKAGES for p in parts[:-1]):
        return False
    if path.startswith("/") or re.match(r"^[A-Za-z]:/", path):
        return True
    top = parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else parts[0]
    return top not in FRAMEWORK_PACKAGES and top not in _stdlib_names()


@lru_cache(maxsize=1)
def _stdlib_names() -> frozenset[str]:
    """Top-level names of the standard library (a trace cut to sys.path writes `typing.py`)."""
    names = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return frozenset(names) - _SCRIPT_NAMES
    stdlib = Path(sysconfig.get_paths()["stdlib"])  # pragma: no cover - Python 3.9
    try:  # pragma: no cover - Python 3.9
        found = {p.name[:-3] if p.suffix == ".py" else p.name for p in stdlib.iterdir()}
    except OSError:  # pragma: no cover - Python 3.9
        found = set()
    return frozenset(found) - _SCRIPT_NAMES  # pragma: no cover - Python 3.9
