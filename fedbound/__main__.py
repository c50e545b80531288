"""``python -m fedbound`` is the ``fedbound`` command."""

import sys

from fedbound.cli import main

sys.exit(main())
