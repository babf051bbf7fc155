"""``python -m tuidebug …``: the same as the ``tuidebug`` command."""

import sys

from tuidebug.cli import main

sys.exit(main())
