"""Every header and native source of the packages ships in their wheels.

Editable installs (the developer venv) read files from the tree, so a header that a
``package-data`` glob misses works there and fails only in an installed wheel, as
``tile_hip/async.h`` did in CI. For each package of the repository, every ``.h``,
``.hpp``, ``.c`` and ``.cpp`` file under ``src/`` must match one of the globs its
``pyproject.toml`` lists for the package that holds it.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2]
NATIVE = (".h", ".hpp", ".c", ".cpp")


def _packages() -> list[Path]:
    return sorted(p for p in PACKAGES.iterdir() if (p / "pyproject.toml").exists() and (p / "src").is_dir())


@pytest.mark.parametrize("package", _packages(), ids=lambda p: p.name)
def test_native_files_are_package_data(package: Path) -> None:
    config = tomllib.loads((package / "pyproject.toml").read_text())
    data: dict[str, list[str]] = config.get("tool", {}).get("setuptools", {}).get("package-data", {})
    src = package / "src"
    missing = []
    for path in sorted(p for p in src.rglob("*") if p.suffix in NATIVE and "egg-info" not in str(p)):
        covered = False
        for name, globs in data.items():
            root = src if name == "*" else src / Path(*name.split("."))
            if root not in path.parents:
                continue
            relative = path.relative_to(root).as_posix()
            covered = covered or any(_matches(relative, g) for g in globs)
        if not covered:
            missing.append(path.relative_to(package).as_posix())
    assert missing == [], f"add package-data globs for these files in {package.name}/pyproject.toml"


def _matches(relative: str, glob: str) -> bool:
    return fnmatch.fnmatchcase(relative, glob) and "/" not in _tail(relative, glob)


def _tail(relative: str, glob: str) -> str:
    """What a trailing ``*`` of ``glob`` matched (setuptools' ``*`` stops at ``/``)."""
    prefix = glob.rsplit("/", 1)[0] + "/" if "/" in glob else ""
    return relative[len(prefix) :] if relative.startswith(prefix) else relative
