"""The autotuner's progress line: compiled / benchmarked / failed counts and the best latency.

Drawn with tqdm when it is installed, else rich, else not at all; only when stderr is a
terminal (a log file or CI output gets nothing).
"""

from __future__ import annotations

import math
import sys
from typing import Any


class Progress:
    """Counts of one tuning run, shown as a bar over the candidates."""

    def __init__(self, name: str, total: int, *, enabled: bool | None = None) -> None:
        self.name = name
        self.total = total
        self.compiled = 0
        self.benchmarked = 0
        self.failed = 0
        self.best = math.inf
        if enabled is None:
            enabled = bool(getattr(sys.stderr, "isatty", lambda: False)())
        self._bar: Any = None
        self._rich: Any = None
        if enabled:
            self._open()

    def _open(self) -> None:
        try:
            from tqdm import tqdm  # type: ignore[import-untyped]
        except ImportError:
            pass
        else:
            self._bar = tqdm(total=self.total, desc=f"autotune {self.name}", leave=False, file=sys.stderr)
            return
        try:
            from rich.progress import Progress as RichProgress  # type: ignore[import-not-found]
        except ImportError:
            return
        self._rich = RichProgress(transient=True)
        self._rich.start()
        self._bar = self._rich.add_task(f"autotune {self.name}", total=self.total)

    def summary(self) -> str:
        best = "-" if math.isinf(self.best) else f"{self.best:.4g} ms"
        return (
            f"compiled {self.compiled}/{self.total}, benchmarked {self.benchmarked}, "
            f"failed {self.failed}, best {best}"
        )

    def _refresh(self, advance: int) -> None:
        if self._rich is not None:
            self._rich.update(
                self._bar, advance=advance, description=f"autotune {self.name}: {self.summary()}"
            )
        elif self._bar is not None:
            self._bar.update(advance)
            self._bar.set_postfix_str(self.summary(), refresh=True)

    def compiled_one(self) -> None:
        self.compiled += 1
        self._refresh(0)

    def benchmarked_one(self, latency: float | None) -> None:
        self.benchmarked += 1
        if latency is not None:
            self.best = min(self.best, latency)
        self._refresh(1)

    def failed_one(self) -> None:
        self.failed += 1
        self._refresh(1)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self._bar is not None:
            self._bar.close()
        self._bar = self._rich = None
