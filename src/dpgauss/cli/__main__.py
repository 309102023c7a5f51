"""``python -m dpgauss.cli``: the ``dpgauss`` command."""

import sys

from .app import main

sys.exit(main())
