"""Write the README's op table (between the op-table markers) from `gpuc ops` (gpuc/op_listing.py).

    python scripts/gen_op_table.py          # rewrite README.md's table
    python scripts/gen_op_table.py --check  # exit 1 if README.md's table is out of date
"""
from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- op-table -->", "<!-- /op-table -->"


def render(text: str) -> str:
    """`text` (the README) with the table between the markers regenerated."""
    from gpuc.op_listing import listing, markdown
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"README.md needs exactly one {BEGIN} ... {END} pair")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{markdown(listing())}{END}{tail}"


def main(argv: list[str]) -> int:
    text = README.read_text()
    new = render(text)
    if "--check" in argv:
        if new != text:
            print("README.md's op table is out of date: run python scripts/gen_op_table.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
