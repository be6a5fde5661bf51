"""`make shaders`: compile every shader template variant with glslang, validate it with spirv-val and check its
shared memory against what it may take (compiler/codegen/shared_memory.py), over --jobs processes (default: the
machine's cores; each takes every jobs-th variant)."""
import argparse
import multiprocessing
import os
import sys
import time

from gpuc.compiler.codegen import glsl
from gpuc.compiler.codegen.glslang import spirv_val
from gpuc.compiler.codegen.shared_memory import overrun
from gpuc.compiler.codegen.variants import collected, declared_variants, templates_on_disk


def check_share(share: tuple) -> tuple[int, list]:
    """Compile and validate the variants i with i % jobs == r; returns how many, and a line for each that takes
    more shared memory than it may."""
    r, jobs = share
    n, over = 0, []
    for i, (_template, k, dtypes, allowed) in enumerate(declared_variants()):
        if i % jobs == r:
            code = glsl.kernel_spirv(k, dtypes)
            spirv_val(code)
            line = overrun(f"{k.label} ({', '.join(sorted(set(dtypes.values())))})", code, allowed)
            if line:
                over.append(line)
            n += 1
    return n, over


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: the cores)")
    jobs = max(1, ap.parse_args().jobs)
    variants = collected()
    missing = templates_on_disk() - {k.split(":")[0] for k in variants}
    if missing:
        print(f"templates without variants in compiler/codegen/variants.py: {sorted(missing)}")
        return 1
    t0 = time.perf_counter()
    if jobs == 1:
        shares = [check_share((0, 1))]
    else:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            shares = pool.map(check_share, [(r, jobs) for r in range(jobs)])
    n, over = sum(c for c, _ in shares), [line for _, lines in shares for line in lines]
    if over:
        print("\n".join(over))
        return 1
    print(f"shaders: {n} variants of {len(variants)} templates compiled and validated "
          f"in {time.perf_counter() - t0:.2f} s ({jobs} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
