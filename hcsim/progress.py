"""Progress bars for long sweeps, studies and runs: on a terminal or in a notebook, never in
captured output.

``progress=None`` (every entry point's default) means *auto*: a bar is drawn only when the
environment variable ``HCSIM_PROGRESS`` is not ``"0"`` (nor ``false``, ``no``, ``off``; a
value that is none of these nor ``1``, ``true``, ``yes``, ``on`` is refused) and standard error is a terminal or
the code runs in a Jupyter kernel; so pipes, CI logs and pytest's capture stay clean. Auto
bars appear only once the work has lasted :data:`AUTO_DELAY_S` (a quick call draws
nothing). ``True`` forces a bar (at once), ``False`` turns it off. Bars go to standard
error, never standard output, whose tables and CSV stay machine-readable.

tqdm is an optional extra (``pip install 'hcsim[progress]'``); without it every bar is a
no-op, with one warning when ``progress=True`` was asked for explicitly.

Examples
--------
>>> from hcsim.progress import progress_bar
>>> with progress_bar(3, "points", progress=False) as bar:
...     for _ in range(3):
...         bar.update()
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager

from .errors import bad_value, is_int

ENV_VAR = "HCSIM_PROGRESS"
"""Set to ``"0"`` to turn automatic bars off (``progress=True`` still draws one)."""

ENV_OFF = ("0", "false", "no", "off")
"""Values of :data:`ENV_VAR` (any case) that turn automatic bars off."""

ENV_AUTO = ("", "1", "true", "yes", "on", "auto")
"""Values of :data:`ENV_VAR` (any case) that leave them automatic; any other is refused."""

AUTO_DELAY_S = 1.0
"""An automatic bar (``progress=None``) is drawn only after the work has lasted this long."""

MISSING_TQDM = "progress=True: tqdm is not installed, so no progress bar is drawn; pip install 'hcsim[progress]'"

_warned_missing = False


def check_progress(progress, field: str = "progress"):
    """``progress`` if it is None, True or False, else a one-line error naming ``field``."""
    if progress is None or progress is True or progress is False:
        return progress
    raise bad_value(field, progress, "None (auto: on a terminal or in a notebook), True or False")


def progress_enabled(progress=None) -> bool:
    """Whether a bar is drawn for this ``progress`` setting.

    Parameters
    ----------
    progress : None, True or False
        None: auto (``HCSIM_PROGRESS`` is not ``"0"`` and stderr is a terminal or a Jupyter
        kernel runs the code); True: on; False: off.

    Examples
    --------
    >>> progress_enabled(False), progress_enabled(True)
    (False, True)
    """
    check_progress(progress)
    if progress is not None:
        return progress
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env in ENV_OFF:
        return False
    if env not in ENV_AUTO:  # HCSIM_PROGRESS=false meaning "on" would be a silent surprise
        raise bad_value(ENV_VAR, os.environ[ENV_VAR], "0 (or false, no, off: no automatic progress bars), "
                        "or 1 or unset (automatic: on a terminal or in a notebook)")
    return _stderr_is_terminal() or in_notebook()


def _stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):  # replaced, closed or detached stderr: not a terminal
        return False


def in_notebook() -> bool:
    """Whether a Jupyter kernel (an IPython ZMQ shell) runs this code; IPython is not imported
    to find out (it is loaded already if a kernel runs)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # an IPython too old or half torn down: treat as no kernel
        return False
    return shell is not None and any(c.__name__ == "ZMQInteractiveShell" for c in type(shell).__mro__)


class _NoBar:
    """What :func:`progress_bar` yields when no bar is drawn: accepts updates, does nothing."""

    enabled = False

    def update(self, n: int = 1) -> None:
        pass


class _Bar:
    """A tqdm bar behind the same two members as :class:`_NoBar`."""

    enabled = True

    def __init__(self, bar):
        self._bar = bar

    def update(self, n: int = 1) -> None:
        self._bar.update(n)


def _tqdm_class():
    """tqdm's bar class (the notebook-aware one in a Jupyter kernel), or None if not installed."""
    try:
        if in_notebook():
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


@contextmanager
def progress_bar(total: int, desc: str = "", progress=None):
    """A progress bar over ``total`` units of work, on standard error, with an ETA.

    Parameters
    ----------
    total : int
        Units of work (points, steps); ``update(n)`` advances by n.
    desc : str
        What the bar counts, shown before it.
    progress : None, True or False
        See :func:`progress_enabled`. An automatic bar waits :data:`AUTO_DELAY_S` before it
        appears; a forced one appears at once.

    Yields
    ------
    An object with ``update(n=1)`` and ``enabled`` (False: nothing is drawn). The bar is
    closed (and cleared from the terminal) when the block ends, also on an error.

    Examples
    --------
    >>> with progress_bar(2, "sizes", progress=False) as bar:
    ...     bar.update(2)
    ...     bar.enabled
    False
    """
    if not is_int(total) or total < 0:
        raise bad_value("total", total, "a count of work units, an integer >= 0")
    total = int(total)
    if not progress_enabled(progress):
        yield _NoBar()
        return
    tqdm = _tqdm_class()
    if tqdm is None:
        _warn_missing(progress)
        yield _NoBar()
        return
    bar = tqdm(total=total, desc=str(desc), file=sys.stderr, leave=False, dynamic_ncols=True,
               delay=AUTO_DELAY_S if progress is None else 0.0)
    try:
        yield _Bar(bar)
    finally:
        bar.close()


def _warn_missing(progress) -> None:
    """Say once, in one line, that an explicitly asked-for bar cannot be drawn."""
    global _warned_missing
    if progress is True and not _warned_missing:
        _warned_missing = True
        warnings.warn(MISSING_TQDM, RuntimeWarning, stacklevel=4)
