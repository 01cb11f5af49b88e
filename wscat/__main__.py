"""`python -m wscat`. Ctrl-C while the heavy imports load still ends with one line."""
import sys

try:
    from wscat.cli import console
except KeyboardInterrupt:
    print("wscat: error: interrupted while starting; nothing was written", file=sys.stderr)
    sys.exit(130)

sys.exit(console())
