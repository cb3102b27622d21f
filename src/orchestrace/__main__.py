"""``python -m orchestrace`` runs the command line."""

import sys

from orchestrace.cli import main

sys.exit(main())
