"""The `gpuc` console script.

A `gpuc compile` that the compile cache can answer is served here, importing nothing but os, sys,
marshal, xxhash and lean gpuc modules (no click, numpy, compiler or flatbuffer reader).
Everything else -- other commands, --help, --no-cache, GPUC_NO_CACHE, any option or value this
parser does not fully understand, a cache miss, anything doubtful -- goes to the click CLI
(gpuc.cli), untouched, which then behaves exactly as it always does.
"""
from __future__ import annotations

import sys
import time

from gpuc.compile_flags import COMPILE_OPTIONS, Option, compile_summary


_BY_NAME = {name: o for o in COMPILE_OPTIONS for name in o.names}


def _plain(value) -> bool:
    return bool(value) and not value.startswith("-")


def _take(got: dict, o: Option, value) -> bool:
    """Record one option value; False for what the fast path leaves to click (bad or repeated values)."""
    if not _plain(value):
        return False
    if o.multiple:
        got.setdefault(o.dest, []).append(value)
        return True
    if o.dest in got:
        return False
    if o.choices and value not in o.choices:
        return False
    if o.int_range:
        if not (value.isascii() and value.isdigit()) or not o.int_range[0] <= int(value) <= o.int_range[1]:
            return False
        value = int(value)
    got[o.dest] = value
    return True


def parse_compile(argv: list) -> dict | None:
    """{model, output, precision, max_batch, disable_passes, quiet} of a `gpuc compile` command line
    that this parser fully understands, else None."""
    if not argv or argv[0] != "compile":
        return None
    got, models, it = {}, [], iter(argv[1:])
    for tok in it:
        o = _BY_NAME.get(tok)
        if o is not None and o.flag:
            if not o.fast or o.dest in got:
                return None
            got[o.dest] = True
            continue
        name, eq, value = tok.partition("=") if tok.startswith("--") else (tok, "", None)
        o = _BY_NAME.get(name)
        if o is not None and not o.flag:
            if not o.fast or not _take(got, o, value if eq else next(it, None)):
                return None
        elif not _plain(tok):
            return None
        else:
            models.append(tok)
    if len(models) != 1:
        return None
    for o in COMPILE_OPTIONS:
        if o.fast and o.dest not in got:
            if o.required:
                return None
            got[o.dest] = [] if o.multiple else False if o.flag else o.default
    return dict(got, model=models[0])


def _encodable(texts, stream) -> bool:
    if stream is None:
        return False
    try:
        for t in texts:
            t.encode(stream.encoding or "utf-8", stream.errors or "strict")
    except (UnicodeError, LookupError):
        return False
    return True


def serve_hit(a: dict) -> bool:
    """Serve `gpuc compile` from the compile cache and print what the click CLI would; False when
    the cache cannot answer (nothing printed; the output may have been written, identically)."""
    from gpuc.compiler import cache
    from gpuc.runtime import settings
    if not cache.enabled() or settings.current().completing:
        return False
    t0 = time.perf_counter()
    meta = cache.serve(a["model"], a["output"], {"precision": a["precision"],
                                                 "disable_passes": a["disable_passes"], "max_batch": a["max_batch"]})
    dt = time.perf_counter() - t0
    if meta is None:
        return False
    stats = meta["stats"]
    lines = [] if a["quiet"] else compile_summary(a["output"], meta["size"], stats, dt, True, a["max_batch"])
    if not (_encodable(lines, sys.stdout) and _encodable(stats.get("warnings", []), sys.stderr)):
        return False
    cache.repeat_warnings(stats)
    for line in lines:
        print(line)
    sys.stdout.flush()
    return True


def main():
    a = parse_compile(sys.argv[1:])
    if a is not None:
        try:
            if serve_hit(a):
                return 0
        except BrokenPipeError:                  # as the click CLI does
            sys.stderr.close()
            return 0
        except KeyboardInterrupt:
            print("gpuc: error: interrupted", file=sys.stderr)
            return 130
        except Exception:  # noqa: BLE001 - anything unexpected: the click CLI does it the normal way
            pass
    from gpuc.cli import main as cli_main
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
