"""Write the table of every op (markdown) from `gpuc ops` (gpuc/op_listing.py).  The table is generated,
never committed: it is always current, and adding an op touches no document.

    python scripts/gen_op_table.py            # to standard output
    python scripts/gen_op_table.py ops.md     # to a file
"""
from __future__ import annotations

import sys
from pathlib import Path


def render() -> str:
    from gpuc.op_listing import listing, markdown
    return markdown(listing())


def main(argv: list[str]) -> int:
    text = render()
    if argv:
        Path(argv[0]).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
