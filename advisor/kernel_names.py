"""Kernel names as short operator types: the function name without return type, namespaces,
template arguments or parameters, also of Itanium-mangled names; PyTorch's generic launchers
keep the functor that says what they compute. The Kineto reader's operator types and the
fusion search's kernel sequences (plugins/fusion_patterns.py) name kernels alike."""

from __future__ import annotations

import re

MAX_OP_TYPE = 64


_GENERIC_KERNELS = {"kernel", "kernel2", "device_kernel", "global_kernel"}
_TEMPLATED_KERNELS = {
    "elementwise_kernel",
    "elementwise_kernel_manual_unroll",
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "index_elementwise_kernel",
    "elementwise_kernel_with_index",
    "reduce_kernel",
}
"""PyTorch's kernel templates: one of them runs every element-wise op or reduction, so the
template's name says how, and only its functor argument says what it computes."""
_COMPUTES = re.compile(
    r"\b(\w*Functor\w*|\w+Ops|\w+_functor|\w+_kernel_cuda|"
    r"\w+_cuda_kernel|\w+_kernel_impl|launch_\w+)\b"
)
_WRAPPERS = {
    "AUnaryFunctor",
    "BUnaryFunctor",
    "BinaryFunctor",
    "UnaryFunctor",
    "gpu_kernel_impl",
    "gpu_kernel_impl_nocast",
}


def kernel_op_type(name: str) -> str:
    """A short operator type for a kernel: its function name without return type, namespaces,
    template arguments or parameters (`void at::native::vectorized_elementwise_kernel<4, ...>
    (...)` -> `vectorized_elementwise_kernel`). Generic wrappers (`cutlass::Kernel<Op>`) take
    the name of their first template argument. Itanium-mangled names are read the same way."""
    text = name.strip()
    if text.startswith("_Z"):
        short = _mangled_op_type(text)
        if short:
            return short
    for prefix in ("__global__ ", "static ", "void "):
        text = text.removeprefix(prefix)
    text = text.replace("(anonymous namespace)::", "").replace("(anonymous namespace)", "")
    text = _drop_template_return_type(text)
    cut = min((i for i in (text.find("("), text.find("<")) if i >= 0), default=len(text))
    qualified = text[:cut].strip().rsplit(" ", 1)[-1]
    parts = [p for p in qualified.split("::") if p]
    short = parts[-1] if parts else ""
    if short.lower() in _GENERIC_KERNELS:
        if cut < len(text) and text[cut] == "<":
            argument = re.split(r"[<>,(]", text[cut + 1 :], maxsplit=1)[0].strip()
            argument = argument.rsplit(" ", 1)[-1].split("::")[-1]
            if argument and not argument[0].isdigit():
                short = argument
        if short.lower() in _GENERIC_KERNELS and len(parts) > 1:
            short = "::".join(parts[-2:])
    if short in _TEMPLATED_KERNELS:
        return _clip(_with_functor(short, text[cut:]))
    return _clip(short or name.strip())


def _drop_template_return_type(text: str) -> str:
    """Drop a templated (SFINAE) return type ahead of the function name, whose `<` would be
    taken for the function's own template arguments: `std::enable_if<(8>0), void>::type
    vllm::norm_kernel<8>(...)` -> `vllm::norm_kernel<8>(...)`."""
    head = re.match(r"[\w:]+<", text)
    if not head:
        return text
    angles = parens = 0
    for pos in range(head.end() - 1, len(text)):
        char = text[pos]
        parens += {"(": 1, ")": -1}.get(char, 0)
        if parens == 0:
            angles += {"<": 1, ">": -1}.get(char, 0)
            if angles == 0:
                break
    else:
        return text
    rest = re.match(r">(?:::\w+)*\s+(?=[\w:~]+[<(])", text[pos:])
    return text[pos + rest.end() :] if rest else text


def _with_functor(short: str, arguments: str) -> str:
    """`vectorized_elementwise_kernel<MulFunctor>`: the template named after what it computes
    (its functor, or the kernel function whose lambda it runs), so an add and a multiply are
    two operator types, not one; the template alone when no functor is named."""
    found = [(m.start(), m.group(1)) for m in _COMPUTES.finditer(arguments)]
    found += _lambda_owners(arguments)
    named = sorted((at, what) for at, what in found if what not in _WRAPPERS)
    return f"{short}<{named[0][1]}>" if named else short


def _lambda_owners(text: str) -> list[tuple[int, str]]:
    """(position, name) of each function whose lambda a template runs:
    `masked_fill_kernel(at::TensorIterator&, ...)::{lambda()#1}` -> masked_fill_kernel."""
    owners = []
    for match in re.finditer(r"\)::\{lambda", text):
        depth, pos = 0, match.start()
        while pos >= 0:  # back to the "(" that opens this parameter list
            depth += {")": 1, "(": -1}.get(text[pos], 0)
            if depth == 0:
                break
            pos -= 1
        head = text[: max(pos, 0)]
        if head.endswith(">"):  # a function template: compare_scalar_kernel<float>(...)
            depth, cut = 0, len(head) - 1
            while cut >= 0:
                depth += {">": 1, "<": -1}.get(head[cut], 0)
                if depth == 0:
                    break
                cut -= 1
            head = head[: max(cut, 0)]
        ident = re.search(r"(\w+)$", head)
        if ident:
            owners.append((ident.start(), ident.group(1)))
    return owners


def _clip(text: str) -> str:
    if len(text) <= MAX_OP_TYPE:
        return text
    cut = text.rfind("_", 0, MAX_OP_TYPE)
    return text[:cut] if cut > MAX_OP_TYPE // 2 else text[:MAX_OP_TYPE]


def _mangled_op_type(text: str) -> str | None:
    idents, pos = _mangled_name(text, 2)
    if not idents:
        return None
    short = idents[-1]
    if short in _TEMPLATED_KERNELS:
        return _clip(_with_functor(short, " ".join(_length_prefixed(text[pos:]))))
    if short.lower() in _GENERIC_KERNELS:
        if pos < len(text) and text[pos] == "I":
            argument, _ = _mangled_name(text, pos + 1)
            if argument:
                return _clip(argument[-1])
        return "::".join(idents[-2:])
    return _clip(short)


def _length_prefixed(text: str) -> list[str]:
    """The identifiers of a mangled name's remainder (`13MulFunctorIfE` -> MulFunctor)."""
    found, pos = [], 0
    for match in re.finditer(r"(\d+)(?=[A-Za-z_])", text):
        if match.start() < pos:
            continue
        start = match.end()
        ident = text[start : start + int(match.group(1))]
        if ident.isidentifier():
            found.append(ident)
            pos = start + len(ident)
    return found


def _mangled_name(text: str, pos: int) -> tuple[list[str], int]:
    """Identifiers of an Itanium-mangled (nested) name starting at pos, and where it ends."""
    idents: list[str] = []
    nested = pos < len(text) and text[pos] == "N"
    pos += nested
    while pos < len(text):
        char = text[pos]
        if char.isdigit():
            digits = re.match(r"\d+", text[pos:]).group()
            start = pos + len(digits)
            idents.append(text[start : start + int(digits)])
            pos = start + int(digits)
        elif char == "S":  # substitution: S_, S0_, SA_, St, Sa ...
            match = re.match(r"S[0-9A-Z]*_|S[a-z]", text[pos:])
            pos += len(match.group()) if match else 1
        elif char in "KVrL":
            pos += 1
        else:
            break
        if not nested:
            break
    return idents, pos
