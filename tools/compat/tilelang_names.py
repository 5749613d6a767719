"""The public names of a TileLang checkout's modules, read from its source without importing it.

TileLang cannot be imported here (it needs its own TVM build), so this reads the source:
a module's ``__all__`` is evaluated from its literal parts (tuples, lists, sets, ``+``, ``|``,
``sorted``/``tuple``/``dict.fromkeys`` and other modules' ``__all__``); a module without one
exports its public top-level names, star-imports followed. Only names are read: no TileLang
code is copied or kept.

    python tools/compat/tilelang_names.py /path/to/tilelang-checkout tilelang.language
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections.abc import Callable
from typing import Any


class SourceTree:
    """Modules of one checkout (a folder holding the ``tilelang`` package)."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self._cache: dict[str, dict[str, Any]] = {}
        self._busy: set[str] = set()

    def path_of(self, module: str) -> pathlib.Path | None:
        base = self.root.joinpath(*module.split("."))
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    def resolve(self, module: str, level: int, name: str | None) -> str:
        if level == 0:
            return name or ""
        parts = module.split(".")
        is_package = (self.path_of(module) or pathlib.Path()).name == "__init__.py"
        base = parts if is_package else parts[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join([*base, name] if name else base)

    def namespace(self, module: str) -> dict[str, Any]:
        """Module-level names: evaluated values where they are simple, else ``...``."""
        if module in self._cache:
            return self._cache[module]
        if module in self._busy:
            return {}
        path = self.path_of(module)
        if path is None:
            return {}
        self._busy.add(module)
        env: dict[str, Any] = {}
        for node in _top_level(ast.parse(path.read_text(encoding="utf-8"))):
            self._bind(module, node, env)
        self._busy.discard(module)
        self._cache[module] = env
        return env

    def public_names(self, module: str) -> list[str]:
        env = self.namespace(module)
        declared = env.get("__all__")
        if isinstance(declared, (list, tuple, set, frozenset)):
            return sorted({str(n) for n in declared})
        return sorted(n for n in env if not n.startswith("_"))

    def _bind(self, module: str, node: ast.stmt, env: dict[str, Any]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env[node.name] = ...
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in sys.stdlib_module_names:  # ``import os``: not API
                    env[alias.asname or alias.name.split(".")[0]] = ...
        elif isinstance(node, ast.ImportFrom):
            source = self.resolve(module, node.level, node.module)
            if source.split(".")[0] in sys.stdlib_module_names:
                return
            for alias in node.names:
                if alias.name == "*":
                    if self.path_of(source) is not None:
                        for name in self.public_names(source):
                            env[name] = self.namespace(source).get(name, ...)
                    continue
                value: Any = ...
                if alias.name == "__all__":
                    value = self.namespace(source).get("__all__", ())
                env[alias.asname or alias.name] = value
        elif isinstance(node, ast.Assign):
            value = _evaluate(node.value, env)
            if isinstance(node.value, ast.Call) and _is_logger(node.value):
                return
            for target in node.targets:
                for name in _target_names(target):
                    env[name] = value if isinstance(target, ast.Name) else ...
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            env[node.target.id] = _evaluate(node.value, env) if node.value is not None else ...
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            old, new = env.get(node.target.id), _evaluate(node.value, env)
            combined = _binary(node.op, old, new)
            env[node.target.id] = combined
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                for name in _target_names(target):
                    env.pop(name, None)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            _call_method(node.value, env)


def _is_logger(call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "getLogger"


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """Statements at module level, including those inside top-level if/try blocks."""
    out: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.If):
            out.extend(_top_level(ast.Module(body=node.body + node.orelse, type_ignores=[])))
        elif isinstance(node, (ast.Try, ast.With)):
            out.extend(_top_level(ast.Module(body=node.body, type_ignores=[])))
        else:
            out.append(node)
    return out


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    return []


def _call_method(call: ast.Call, env: dict[str, Any]) -> None:
    """``__all__.extend([...])`` / ``.append(...)`` / ``.update(...)`` on a known list or set."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return
    current = env.get(func.value.id)
    args = [_evaluate(a, env) for a in call.args]
    if isinstance(current, list) and func.attr in ("extend", "append") and args:
        env[func.value.id] = current + (list(args[0]) if func.attr == "extend" else [args[0]])
    elif isinstance(current, set) and func.attr in ("update", "add") and args:
        env[func.value.id] = current | (set(args[0]) if func.attr == "update" else {args[0]})


def _binary(op: ast.operator, left: Any, right: Any) -> Any:
    try:
        if isinstance(op, ast.Add):
            if isinstance(left, tuple) and isinstance(right, list):
                return left + tuple(right)
            if isinstance(left, list) and isinstance(right, tuple):
                return left + list(right)
            return left + right
        if isinstance(op, ast.BitOr):
            return set(left) | set(right)
        if isinstance(op, ast.Sub):
            return set(left) - set(right)
    except TypeError:
        return ...
    return ...


_CALLS: dict[str, Callable[..., Any]] = {
    "tuple": tuple,
    "list": list,
    "sorted": sorted,
    "set": set,
    "frozenset": frozenset,
}


def _evaluate(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items: list[Any] = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                value = _evaluate(elt.value, env)
                if value is ...:
                    return ...
                items.extend(value)
            else:
                items.append(_evaluate(elt, env))
        if isinstance(node, ast.Tuple):
            return tuple(items)
        return items if isinstance(node, ast.List) else set(items)
    if isinstance(node, ast.Name):
        return env.get(node.id, ...)
    if isinstance(node, ast.BinOp):
        return _binary(node.op, _evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.Call):
        args = [_evaluate(a, env) for a in node.args]
        if any(a is ... for a in args):
            return ...
        func = node.func
        if isinstance(func, ast.Name) and func.id in _CALLS:
            return _CALLS[func.id](*args)
        if isinstance(func, ast.Attribute) and func.attr == "fromkeys" and args:
            return dict.fromkeys(args[0])
        if isinstance(func, ast.Attribute) and func.attr == "keys" and isinstance(func.value, ast.Name):
            value = env.get(func.value.id)
            return list(value) if isinstance(value, dict) else ...
    if isinstance(node, ast.Dict):
        keys = [_evaluate(k, env) if k is not None else ... for k in node.keys]
        return dict.fromkeys(keys) if ... not in keys else ...
    return ...


def main(argv: list[str]) -> int:
    tree = SourceTree(pathlib.Path(argv[1]))
    for name in tree.public_names(argv[2]):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
