"""The `wscat` command (pyproject's [project.scripts]) and `python -m wscat`: a Ctrl-C while
wscat.cli and torch load ends with one line and exit 130, as one during a step does; the
installed script itself imports only this module."""
from __future__ import annotations

import sys

INTERRUPTED = 130  # wscat.errors.INTERRUPTED, which loads more than a start-up may
STARTING = "wscat: error: interrupted while starting; nothing was written"


def console() -> int:
    """wscat.cli.console, its import guarded against Ctrl-C."""
    try:
        from wscat.cli import console as run
    except KeyboardInterrupt:
        print(STARTING, file=sys.stderr)
        return INTERRUPTED
    return run()
