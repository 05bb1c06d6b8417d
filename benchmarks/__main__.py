"""``python -m benchmarks [--quick|--full] [names...]``: every benchmark, one report.

Run from the repository root; see ``run_all.py`` (``python -m benchmarks --help``).
"""

import sys
from pathlib import Path

# benchmarks/ is a directory of standalone scripts, not an installed package:
# import the runner from next to this file, whatever the working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_all import main  # noqa: E402

sys.exit(main())
