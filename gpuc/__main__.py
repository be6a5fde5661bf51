"""`python -m gpuc ...`: the same entry as the `gpuc` console script (gpuc/launch.py)."""
import sys

from gpuc.launch import main

sys.exit(main())
