"""Fuzz cases in worker processes (scripts/fuzz.py, fuzz_fields.py): a worker prints `START i` before
case i and `END i RESULT` after it; a crash or hang kills only that worker, and the next one resumes
after the case it died on."""
from __future__ import annotations

import subprocess
import sys


def run_chunked(script: str, extra: list, cases: int, chunk: int, wall_s: float | None = None, log=None):
    """Run `python script --worker *extra START COUNT ...` over cases 0..cases-1 in chunks; returns
    ([(case, result)], [(case, "FAIL worker ...")]) for the cases the workers finished and those they died on."""
    results, failures, i = [], [], 0
    while i < cases:
        n = min(chunk, cases - i)
        p = subprocess.run([sys.executable, script, "--worker", str(extra[0]), str(i), str(n), *map(str, extra[1:])],
                           capture_output=True, text=True, timeout=wall_s)
        last_started, done = None, set()
        for line in p.stdout.splitlines():
            parts = line.split(" ", 2)
            if parts[0] == "START":
                last_started = int(parts[1])
            elif parts[0] == "END" and len(parts) == 3:
                done.add(int(parts[1]))
                results.append((int(parts[1]), parts[2]))
        if p.returncode != 0 and last_started is not None and last_started not in done:
            failures.append((last_started, f"FAIL worker died (exit {p.returncode}): {p.stderr.strip()[-300:]}"))
            i = last_started + 1
        elif p.returncode != 0 and not done:
            failures.append((i, f"FAIL worker failed to start: {p.stderr.strip()[-300:]}"))
            break
        else:
            i += n
        if log:
            log(f"  {i}/{cases} cases, {len(failures) + sum(r.startswith('FAIL') for _, r in results)} failures")
    return results, failures
