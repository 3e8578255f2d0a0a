"""``python -m planted`` runs the command line."""

import sys

from planted.cli import main

sys.exit(main())
