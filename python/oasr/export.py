"""``python3 -m oasr.export``: the command line of oasr.export (the code is
in oasr/_export.py; ``from oasr import export`` is the function)."""
import sys

from oasr._export import main

if __name__ == "__main__":
    sys.exit(main())
