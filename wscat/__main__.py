"""`python -m wscat`: the `wscat` command (wscat.entry)."""
import sys

from wscat.entry import console

sys.exit(console())
