"""`python -m devbench demo|bench ...` (devbench.cli)."""

import sys

from devbench.cli import main

sys.exit(main())
