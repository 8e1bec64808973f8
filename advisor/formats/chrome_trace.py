"""Chrome trace events: one typed decoder for every reader, the keys each one reads.

PyTorch (Kineto), torch_npu's trace_view.json, msprof timelines and MegEngine all write the
Chrome trace event format (`ph`, `name`, `cat`, `pid`, `tid`, `ts`, `dur`, `args`, `id`).
`EventDecoder` decodes a batch of them (an `advisor.formats.stream.EventStream` slice) into
`TraceEvent` structs whose `args` is the reader's own struct of the keys it reads: msgspec
skips every other key, which is several times faster than building dicts of everything. The
batches the stream gives as dicts (the last one, NaN/Infinity, an odd shape) are converted to
the same structs, so both paths give the same tables.
"""

from __future__ import annotations

import json
import math
from typing import Any, Generic, Optional, TypeVar

import msgspec
import orjson

from advisor.compat import zip_strict

A = TypeVar("A", bound=msgspec.Struct)

NO_RAW = msgspec.Raw()
"""A missing raw field (msgspec takes no union of Raw): the default of `msgspec.Raw` fields."""


class TraceEvent(msgspec.Struct, Generic[A], gc=False):
    """The event keys readers use. `Any`: a value of any JSON type is taken as it is and
    checked where it is used; `args` is the reader's struct, None when missing."""

    ph: Any = None
    name: Any = ""
    cat: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Optional[A] = None  # noqa: UP045 - msgspec evaluates it at run time (3.9)
    id: Any = None  # of flow (s/f) events


class EventDecoder(Generic[A]):
    """Trace events as `TraceEvent`s whose args are `args` structs.

    `decode` is an EventStream `decode`. A batch the structs cannot hold (an event or its args
    that is no object, a number out of range) is decoded as dicts instead, and invalid JSON
    raises ValueError, as EventStream expects; `events` turns such dicts into structs.
    """

    def __init__(self, args: type[A]) -> None:
        self.no_args: A = args()
        self._args = args
        self._keys = struct_keys(args)
        self._raw = tuple(f.name for f in msgspec.structs.fields(args) if f.type is msgspec.Raw)
        self._decoder = msgspec.json.Decoder(list[TraceEvent[args]])  # type: ignore[valid-type]

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from its args struct in a worker process (a msgspec decoder is not
        picklable), so that `decode` can be handed to one."""
        return (EventDecoder, (self._args,))

    def decode(self, data: bytes) -> list[Any]:
        try:
            return self._decoder.decode(data)
        except msgspec.ValidationError:
            return orjson.loads(data)
        except msgspec.DecodeError as exc:  # not a ValueError in every msgspec version
            raise ValueError(str(exc)) from None

    def events(self, batch: list[Any]) -> list[Any]:
        """A batch as `TraceEvent`s: a typed batch as it is; decoded dicts converted, their
        non-finite `ts` and `dur` (only the standard parser lets NaN in) missing and their raw
        args re-encoded; entries that are no object kept as they are, to be counted."""
        if not batch or batch[0].__class__ is TraceEvent:
            return batch
        converted: list[Any] = []
        append, keys, make, raw = converted.append, self._keys, self._args, self._raw
        for e in batch:
            if e.__class__ is not dict:
                append(e)
                continue
            args = e.get("args")
            if args.__class__ is dict:
                args = make(**{keys[k]: v for k, v in args.items() if k in keys})
                for attr in raw:
                    value = getattr(args, attr)
                    if value.__class__ is not msgspec.Raw:
                        setattr(args, attr, as_raw(value))
            else:
                args = None
            ts, dur = e.get("ts"), e.get("dur")
            if ts.__class__ is float and not math.isfinite(ts):
                ts = None
            if dur.__class__ is float and not math.isfinite(dur):
                dur = None
            append(
                TraceEvent(
                    ph=e.get("ph"),
                    name=e.get("name", ""),
                    cat=e.get("cat", ""),
                    pid=e.get("pid"),
                    tid=e.get("tid"),
                    ts=ts,
                    dur=dur,
                    args=args,
                    id=e.get("id"),
                )
            )
        return converted


def struct_keys(struct: type[msgspec.Struct]) -> dict[str, str]:
    """JSON key -> attribute name of a struct's fields (to build it from a decoded dict)."""
    return dict(zip_strict(struct.__struct_encode_fields__, struct.__struct_fields__))


def as_raw(value: Any) -> msgspec.Raw:
    """A decoded JSON value as raw JSON, as a typed batch holds it; missing when None."""
    if value is None:
        return NO_RAW
    try:
        return msgspec.Raw(msgspec.json.encode(value))
    except (TypeError, ValueError, OverflowError):
        return NO_RAW


def raw_value(value: Any) -> Any:
    """The JSON value of a raw field (None when missing); other values as they are."""
    if value.__class__ is not msgspec.Raw:
        return value
    return msgspec.json.decode(value) if value else None


def shape_text(raw: bytes) -> str | None:
    """Raw `Input Dims` JSON as compact text (`[[8, 64], []]`), whatever the file's spacing; a
    JSON string as it is; None when it is not JSON or empty."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if value is None or isinstance(value, str):
        return value or None
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
