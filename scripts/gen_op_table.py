"""Write the table of every op (markdown) from `gpuc ops` (gpuc/op_listing.py).  The table is generated,
never committed: it is always current, and adding an op touches no document.

    python scripts/gen_op_table.py            # to standard output
    python scripts/gen_op_table.py ops.md     # to a file
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def render() -> str:
    from gpuc.op_listing import listing, markdown
    return markdown(listing())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="write the table here (default: standard output)")
    ap.add_argument("--check", action="store_true",
                    help="(kept for old callers) nothing to check: README.md keeps no copy of the table")
    a = ap.parse_args(argv)
    if a.check:
        print("the op table is generated (gpuc ops), not kept in README.md: nothing to check")
        return 0
    text = render()
    if a.out:
        Path(a.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
