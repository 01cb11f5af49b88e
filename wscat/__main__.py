"""`python -m wscat`."""
import sys

from wscat.cli import main

sys.exit(main())
