"""What the first bytes of a file say: whether a `*.json` is a PyTorch trace at all."""

from __future__ import annotations

from pathlib import Path

HEAD_BYTES = 64 * 1024


# What a `*.json` file that starts with `{"traceEvents"` must also show in its first bytes to
# be taken for a PyTorch trace rather than another Chrome-trace writer's.
KINETO_MARKERS = (
    b'"schemaVersion"',
    b'"deviceProperties"',
    b'"distributedInfo"',
    b'"baseTimeNanoseconds"',
    b"ProfilerStep#",
    b'"cpu_op"',
    b'"Operator"',
    b'"cuda_runtime"',
    b'"Runtime"',
    b'"kernel"',
    b'"Kernel"',
    b'"user_annotation"',
    b'"python_function"',
    b'"gpu_memcpy"',
    b'"PyTorch Profiler',
)
BLANK = b" \t\r\n\xef\xbb\xbf"  # whitespace and a UTF-8 byte order mark


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of the (decompressed) file (advisor.formats.files.read_head)."""
    from advisor.formats import files  # with gzip and orjson: not for `rules list`

    return files.read_head(path, size)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
