"""Inline PTX in ``T.import_source`` code, rewritten as C++ for the CPU emulator.

The emulator compiles a kernel's CUDA source for the CPU, whose assembler cannot take PTX.
Hand-written dequantization code (TileLang's ``lop3`` int4 -> float16 decoders, the fp4 ->
bfloat16 "twiddling" decoder) is a few bit-manipulation and packed 16-bit float instructions
in ``asm volatile(...)`` statements. Each such statement becomes a C++ block: the operands are
copied into 64-bit registers (``"=r"`` outputs are written back after the last instruction,
inputs are copies, so an instruction that writes an input register changes only the copy, as
in PTX), and each instruction is a call into ``tile_cuda/ptx.h`` of the emulator's headers.

Only the instructions in ``INSTRUCTIONS`` are translated; any other (a predicate, a vector
operand, a memory access, an opcode not listed) raises :class:`InlinePtxError` naming it, and
the backend turns that into a typed error at the ``T.import_source`` line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# opcode -> (the C++ function of tile_cuda/ptx.h, number of source operands)
INSTRUCTIONS: dict[str, tuple[str, int]] = {
    "mov.b32": ("tile_ptx::mov", 1),
    "mov.u32": ("tile_ptx::mov", 1),
    "mov.s32": ("tile_ptx::mov", 1),
    "and.b32": ("tile_ptx::and_b32", 2),
    "or.b32": ("tile_ptx::or_b32", 2),
    "xor.b32": ("tile_ptx::xor_b32", 2),
    "not.b32": ("tile_ptx::not_b32", 1),
    "shl.b32": ("tile_ptx::shl_b32", 2),
    "shr.b32": ("tile_ptx::shr_u32", 2),
    "shr.u32": ("tile_ptx::shr_u32", 2),
    "shr.s32": ("tile_ptx::shr_s32", 2),
    "add.u32": ("tile_ptx::add_u32", 2),
    "add.s32": ("tile_ptx::add_u32", 2),
    "sub.u32": ("tile_ptx::sub_u32", 2),
    "sub.s32": ("tile_ptx::sub_u32", 2),
    "mul.lo.u32": ("tile_ptx::mul_lo_u32", 2),
    "mul.lo.s32": ("tile_ptx::mul_lo_u32", 2),
    "lop3.b32": ("tile_ptx::lop3", 4),
    "prmt.b32": ("tile_ptx::prmt", 3),
    "add.f16x2": ("tile_ptx::add_f16x2", 2),
    "add.rn.f16x2": ("tile_ptx::add_f16x2", 2),
    "sub.f16x2": ("tile_ptx::sub_f16x2", 2),
    "sub.rn.f16x2": ("tile_ptx::sub_f16x2", 2),
    "mul.f16x2": ("tile_ptx::mul_f16x2", 2),
    "mul.rn.f16x2": ("tile_ptx::mul_f16x2", 2),
    "fma.rn.f16x2": ("tile_ptx::fma_f16x2", 3),
    "add.bf16x2": ("tile_ptx::add_bf16x2", 2),
    "add.rn.bf16x2": ("tile_ptx::add_bf16x2", 2),
    "sub.bf16x2": ("tile_ptx::sub_bf16x2", 2),
    "sub.rn.bf16x2": ("tile_ptx::sub_bf16x2", 2),
    "mul.bf16x2": ("tile_ptx::mul_bf16x2", 2),
    "mul.rn.bf16x2": ("tile_ptx::mul_bf16x2", 2),
    "fma.rn.bf16x2": ("tile_ptx::fma_bf16x2", 3),
}

MIN_SM = {"add.bf16x2": 90, "add.rn.bf16x2": 90, "sub.bf16x2": 90, "sub.rn.bf16x2": 90, "mul.bf16x2": 90,
          "mul.rn.bf16x2": 90, "fma.rn.bf16x2": 80}
"""The oldest arch whose ptxas takes the instruction (checked with nvcc 13: the packed bfloat16
add, sub and mul need sm_90); the rest are there on every arch tile targets (sm_80 on)."""

_REGISTER_CONSTRAINTS = {"r", "h", "l", "n"}  # 32-bit, 16-bit, 64-bit register; an immediate


class InlinePtxError(ValueError):
    """An ``asm`` statement the emulator cannot translate; ``statement`` is its first line."""

    def __init__(self, message: str, statement: str) -> None:
        super().__init__(message)
        self.statement = statement


_ASM = re.compile(r"(?:asm|__asm__)\s*(?:volatile\b\s*|__volatile__\s*)?\(")


@dataclass(frozen=True)
class _Operand:
    constraint: str  # "=r", "+r", "r", "n", ...
    expression: str

    @property
    def written(self) -> bool:
        return self.constraint.startswith(("=", "+"))

    @property
    def read(self) -> bool:
        return not self.constraint.startswith("=")


def has_inline_asm(source: str) -> bool:
    return _scan_asm(source, first_only=True) != []


def translate(source: str, sm: int | None = None, *, strict: bool = True) -> str:
    """``source`` with every ``asm(...)`` statement rewritten as C++ (see the module docstring).

    Args:
        sm: the target's compute capability (90 for sm_90a): an instruction its ptxas would
            refuse (``MIN_SM``) is refused here too. None checks no arch.
        strict: False leaves a statement that does not translate as it is, for the kernel's
            whole source: TVM's CUDA prelude holds asm (``__dp4a``) under ``#if __CUDA_ARCH__``,
            which the emulator's preprocessor drops (imported code was checked strictly).

    Raises:
        InlinePtxError: a statement uses something ``INSTRUCTIONS`` does not cover, or that
            ``sm`` does not have.
    """
    out: list[str] = []
    end = 0
    for start, stop in _scan_asm(source):
        out.append(source[end:start])
        try:
            out.append(_translate_statement(source[start:stop], sm))
        except InlinePtxError:
            if strict:
                raise
            out.append(source[start:stop])
        end = stop
    out.append(source[end:])
    return "".join(out)


def _scan_asm(source: str, first_only: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each ``asm(...)`` in code (not in comments or strings); ``end`` is after
    its closing parenthesis."""
    if _ASM.search(source) is None:  # most kernels: no scan of a source of up to ~200 KB (~0.1 s)
        return []
    found: list[tuple[int, int]] = []
    i, n = 0, len(source)
    while i < n:
        after = _skip(source, i)
        if after != i:
            i = after
            continue
        if source[i] in "a_" and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
            match = _ASM.match(source, i)
            if match is not None:
                i = _closing_paren(source, match.end() - 1)
                found.append((match.start(), i))
                if first_only:
                    return found
                continue
        i += 1
    return found


def _skip(text: str, j: int) -> int:
    """The index after the comment or the string or character literal that starts at ``j``;
    ``j`` itself where none does."""
    if text.startswith("//", j):
        newline = text.find("\n", j)
        return len(text) if newline < 0 else newline
    if text.startswith("/*", j):
        close = text.find("*/", j + 2)
        return len(text) if close < 0 else close + 2
    if text[j] in "\"'":
        return _literal_end(text, j)
    return j


def _literal_end(text: str, i: int) -> int:
    quote, j = text[i], i + 1
    while j < len(text) and text[j] != quote:
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _closing_paren(source: str, open_at: int) -> int:
    depth, j = 0, open_at
    while j < len(source):
        after = _skip(source, j)
        if after != j:
            j = after
            continue
        if source[j] == "(":
            depth += 1
        elif source[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise InlinePtxError("an asm statement has no closing parenthesis", source[open_at : open_at + 60])


def _split_top(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside parentheses, brackets, strings and comments."""
    parts, depth, j, begin = [], 0, 0, 0
    while j < len(text):
        after = _skip(text, j)
        if after != j:
            j = after
            continue
        if text[j] in "([{":
            depth += 1
        elif text[j] in ")]}":
            depth -= 1
        elif text[j] == separator and depth == 0:
            parts.append(text[begin:j])
            begin = j + 1
        j += 1
    parts.append(text[begin:])
    return parts


def _strip_comments(text: str) -> str:
    """``text`` with each C comment outside its string literals replaced by a space (a PTX
    comment inside the template's string stays for ``_instructions``)."""
    out, j = [], 0
    while j < len(text):
        after = _skip(text, j)
        if after == j:
            out.append(text[j])
            after = j + 1
        else:
            out.append(text[j:after] if text[j] in "\"'" else " ")
        j = after
    return "".join(out)


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def _template(text: str, statement: str) -> str:
    """The PTX text of the asm template: its adjacent C string literals, joined and unescaped."""
    pieces: list[str] = []
    rest = _strip_comments(text).strip()
    while rest:
        if not rest.startswith('"'):
            raise InlinePtxError("the asm template is not a string literal", statement)
        end = _literal_end(rest, 0)
        body = rest[1 : end - 1]
        pieces.append(re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body))
        rest = rest[end:].strip()
    return "".join(pieces)


def _operands(text: str, statement: str) -> list[_Operand]:
    operands = []
    for part in _split_top(_strip_comments(text), ","):
        part = part.strip()
        if not part:
            continue
        match = re.fullmatch(r'"([^"]*)"\s*\((.*)\)', part, flags=re.S)
        if match is None:
            raise InlinePtxError(f"cannot read the asm operand {part!r}", statement)
        constraint, expression = match.group(1).strip(), match.group(2).strip()
        if constraint.lstrip("=+&") not in _REGISTER_CONSTRAINTS:
            raise InlinePtxError(
                f"asm operand constraint {constraint!r} ({expression}): the emulator takes integer "
                "registers (r, h, l) and immediates (n)",
                statement,
            )
        operands.append(_Operand(constraint, expression))
    return operands


def _translate_statement(statement: str, sm: int | None) -> str:
    first_line = statement.split("\n", 1)[0].strip()
    inner = statement[statement.index("(") + 1 : -1]
    sections = _split_top(inner, ":")
    if len(sections) > 4:
        raise InlinePtxError("an asm goto statement", first_line)
    template = _template(sections[0], first_line)
    outputs = _operands(sections[1], first_line) if len(sections) > 1 else []
    inputs = _operands(sections[2], first_line) if len(sections) > 2 else []
    operands = [*outputs, *inputs]
    lines = ["{ /* inline PTX, translated for the emulator (tile_cuda/ptx.h) */"]
    lines.append(f"  unsigned long long _ptx[{max(len(operands), 1)}] = {{0}};")
    for index, operand in enumerate(operands):
        if operand.read:
            lines.append(f"  _ptx[{index}] = tile_ptx::bits({operand.expression});")
    names: dict[str, str] = {}
    for instruction in _instructions(template):
        lines.append("  " + _instruction(instruction, len(operands), names, first_line, sm))
    for index, operand in enumerate(operands):
        if operand.written:
            lines.append(f"  tile_ptx::put({operand.expression}, _ptx[{index}]);")
    lines.append("}")
    return "\n".join(lines)


def _instructions(template: str) -> list[str]:
    """The template's instructions; the braces of a scope (``{ .reg .b32 t; ... }``) dropped."""
    text = re.sub(r"//[^\n]*", " ", template)
    pieces = (piece.strip().lstrip("{").rstrip("}").strip() for piece in text.split(";"))
    return [piece for piece in pieces if piece]


def _instruction(text: str, count: int, names: dict[str, str], statement: str, sm: int | None) -> str:
    if text.startswith("@"):
        raise InlinePtxError(f"predicated PTX instruction {text!r}", statement)
    if "{" in text or "}" in text:
        raise InlinePtxError(f"a vector operand in {text!r}", statement)
    declaration = re.fullmatch(r"\.reg\s+\.(b32|u32|s32|b16|u16|b64|u64)\s+(.+)", text)
    if declaration is not None:
        declared = []
        for name in (n.strip() for n in declaration.group(2).split(",")):
            if not re.fullmatch(r"[A-Za-z_$][\w$]*", name):
                raise InlinePtxError(f"PTX register declaration {text!r}", statement)
            names[name] = f"_ptx_{name.replace('$', '_')}"
            declared.append(f"{names[name]} = 0")
        return "unsigned long long " + ", ".join(declared) + ";"
    opcode, _, rest = text.partition(" ")
    if opcode not in INSTRUCTIONS:
        raise InlinePtxError(
            f"PTX instruction {opcode!r} (supported: {', '.join(sorted(INSTRUCTIONS))})", statement
        )
    if sm is not None and sm < MIN_SM.get(opcode, 0):
        needs = f"needs sm_{MIN_SM[opcode]} or newer (target sm_{sm})"
        raise InlinePtxError(f"PTX instruction {opcode!r} {needs}", statement)
    function, sources = INSTRUCTIONS[opcode]
    args = [a.strip() for a in rest.split(",")]
    if len(args) != sources + 1:
        raise InlinePtxError(f"{opcode} takes {sources + 1} operands: {text!r}", statement)
    dest, *values = (_value(a, count, names, text, statement) for a in args)
    if not (dest.startswith("_ptx")):
        raise InlinePtxError(f"the destination of {text!r} is not a register", statement)
    return f"{dest} = {function}({', '.join(values)});"


def _value(operand: str, count: int, names: dict[str, str], text: str, statement: str) -> str:
    number = re.fullmatch(r"%(\d+)", operand)
    if number is not None:
        index = int(number.group(1))
        if index >= count:
            raise InlinePtxError(f"operand %{index} of {text!r}: the statement has {count}", statement)
        return f"_ptx[{index}]"
    if operand in names:
        return names[operand]
    immediate = re.fullmatch(r"(-?)(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)[uU]?", operand)
    if immediate is not None:
        sign, digits = immediate.groups()
        base = 16 if digits[:2].lower() == "0x" else 2 if digits[:2].lower() == "0b" else 10
        value = int(digits[2:] if base != 10 else digits, base)
        return f"{sign}{value}ull"
    raise InlinePtxError(f"operand {operand!r} of {text!r}", statement)
