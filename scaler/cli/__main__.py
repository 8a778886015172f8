"""``python -m scaler.cli``: the ``tiercast`` command."""

import sys

from scaler.cli import main

sys.exit(main())
