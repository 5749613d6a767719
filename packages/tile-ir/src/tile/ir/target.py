"""Compilation targets: what a kernel is compiled for.

A ``Target`` is a small frozen value: a canonical ``kind`` ("cpu", "cuda", "hip", ...),
an optional ``arch`` ("sm_90a", "gfx942", "znver4") and extra string options. It is
parsed from a name, a JSON dict or a JSON string. Which kinds exist is not decided
here but by the installed backends (``tile.ir.backend.resolve_target``), so adding
a backend never edits this module.

Example::

    >>> from tile.ir.target import Target
    >>> Target.parse("llvm")
    Target(kind='cpu', arch=None, options=())
    >>> Target.parse('{"kind": "cuda", "arch": "sm_90a"}').arch
    'sm_90a'
    >>> Target.parse("hip -mcpu=gfx942")
    Target(kind='hip', arch='gfx942', options=())
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from .errors import TargetError

AUTO = "auto"
"""The target name that asks the installed backends which device to use."""

KIND_ALIASES: Mapping[str, str] = {
    "llvm": "cpu",
    "host": "cpu",
    "c": "cpu",
    "rocm": "hip",
    "amdgpu": "hip",
    "nvidia": "cuda",
}
"""Other spellings of a target kind, mapped to the canonical one."""

ARCH_FLAGS = ("-arch", "-mcpu")
"""The flags of a TVM-style target string (``"cuda -arch=sm_90a"``) that name the architecture."""

TVM_CUDA_FALLBACK_ARCH = "sm_50"
"""The arch apache-tvm gives ``Target("cuda")`` when it detects no GPU (its warning says so);
tile targets sm_80 and later, so such a target is read as a bare ``cuda``."""

_HINT = 'write a kind name ("cpu", "cuda", "hip"), a dict like {"kind": "cuda", "arch": "sm_90a"}, or "auto"'


@dataclasses.dataclass(frozen=True)
class Target:
    """A compilation target: canonical kind, optional architecture, extra options."""

    kind: str
    arch: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, spec: str | Mapping[str, Any] | Target) -> Target:
        """Parse a target name, JSON dict or JSON string (``"auto"`` is not a target), or take
        the kind and architecture of an apache-tvm ``tvm.target.Target``.

        Raises:
            TargetError: the spec is malformed.
        """
        if isinstance(spec, Target):
            return spec
        if isinstance(spec, str):
            text = spec.strip()
            if text.startswith("{"):
                try:
                    decoded = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise TargetError(f"target JSON {spec!r} does not parse: {exc}", hint=_HINT) from exc
                if not isinstance(decoded, dict):
                    raise TargetError(f"target JSON {spec!r} is not an object", hint=_HINT)
                return cls.parse(decoded)
            if " " in text:
                return cls._parse_flags(spec, text)
            if not text or text.startswith("-"):
                raise TargetError(f"target {spec!r} is not a target name", hint=_HINT)
            if text == AUTO:
                raise TargetError('"auto" must be resolved by tile.ir.backend.resolve_target', hint=_HINT)
            return cls(kind=canonical_kind(text))
        if isinstance(spec, Mapping):
            fields = dict(spec)
            kind = fields.pop("kind", None)
            if not isinstance(kind, str) or not kind:
                raise TargetError(f"target {spec!r} has no string 'kind'", hint=_HINT)
            arch = fields.pop("arch", None)
            if arch is not None and not isinstance(arch, str):
                raise TargetError(f"target arch {arch!r} is not a string", hint=_HINT)
            options = tuple(sorted((str(k), str(v)) for k, v in fields.items()))
            return cls(kind=canonical_kind(kind), arch=arch, options=options)
        tvm_kind = getattr(getattr(spec, "kind", None), "name", None)
        if isinstance(tvm_kind, str) and hasattr(spec, "attrs"):
            return cls._from_tvm(spec, tvm_kind)
        raise TargetError(f"cannot make a target from {type(spec).__name__} {spec!r}", hint=_HINT)

    @classmethod
    def _from_tvm(cls, spec: Any, kind: str) -> Target:
        """An apache-tvm ``tvm.target.Target`` (``with tvm.target.Target("cuda"):`` in TileLang
        programs): its kind and the architecture it names (``arch``, or ``mcpu`` for ROCm and
        LLVM). TVM's other attributes describe its own code generators and are not read."""
        attrs = spec.attrs
        arch = attrs["arch"] if "arch" in attrs else attrs.get("mcpu", None)
        if kind == "cuda" and str(arch) == TVM_CUDA_FALLBACK_ARCH:
            arch = None  # TVM's guess when it finds no GPU, not the program's choice
        return cls(kind=canonical_kind(kind), arch=str(arch) if arch else None)

    @classmethod
    def _parse_flags(cls, spec: str, text: str) -> Target:
        """TVM's older string form, as TileLang programs still write it: a kind, then
        ``-arch=`` (CUDA) or ``-mcpu=`` (ROCm, LLVM) naming the architecture."""
        kind, *flags = text.split()
        if kind.startswith("-") or kind == AUTO:
            raise TargetError(f"target {spec!r} is not a target name", hint=_HINT)
        arch = None
        for flag in flags:
            name, equals, value = flag.partition("=")
            if name not in ARCH_FLAGS or not equals or not value or arch is not None:
                raise TargetError(
                    f"target {spec!r}: tile reads only one -arch= or -mcpu= after the kind, not {flag!r}",
                    hint=f"pass other settings as a dict: {{'kind': {kind!r}, 'arch': ..., 'option': ...}}",
                )
            arch = value
        return cls(kind=canonical_kind(kind), arch=arch)

    def option(self, name: str, default: str | None = None) -> str | None:
        """The value of an extra option, or ``default``."""
        return dict(self.options).get(name, default)

    def with_arch(self, arch: str | None) -> Target:
        """A copy with ``arch`` replaced."""
        return dataclasses.replace(self, arch=arch)

    def to_json(self) -> dict[str, str]:
        """The JSON-dict form, which ``Target.parse`` reads back."""
        out: dict[str, str] = {"kind": self.kind}
        if self.arch is not None:
            out["arch"] = self.arch
        out.update(dict(self.options))
        return out

    def __str__(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)


def canonical_kind(name: str) -> str:
    """Map a kind spelling to its canonical name (``"llvm"`` -> ``"cpu"``)."""
    lowered = name.strip().lower()
    return KIND_ALIASES.get(lowered, lowered)
