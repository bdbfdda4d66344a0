"""One progress line (tqdm: a widget in notebooks, a line in terminals) while something slow happens."""

from __future__ import annotations

from typing import Optional


class Progress:
    """``step(what)`` counts one step and says what it was; silent when ``enabled`` is false."""

    def __init__(self, enabled: bool, desc: str, total: Optional[int] = None,
                 bar_format: Optional[str] = None) -> None:
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            if bar_format is None:
                bar_format = "{desc}{postfix}" if total is None else "{desc}: {n_fmt}/{total_fmt}{postfix}"
            self._bar = tqdm(desc=desc, total=total, leave=False, bar_format=bar_format)

    def step(self, what: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(what, refresh=False)
            self._bar.update(1)

    def describe(self, what: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(what)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
