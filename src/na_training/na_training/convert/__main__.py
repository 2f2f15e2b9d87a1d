"""``python -m na_training.convert``: the ``na-train convert`` command on its own."""

import sys

from na_training.convert.cli import main_convert

sys.exit(main_convert())
