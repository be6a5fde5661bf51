"""`make shaders`: compile every shader template variant with glslang and validate it with spirv-val,
over --jobs processes (default: the machine's cores; each takes every jobs-th variant)."""
import argparse
import multiprocessing
import os
import sys
import time

from gpuc.compiler.codegen import glsl
from gpuc.compiler.codegen.glslang import spirv_val
from gpuc.compiler.codegen.variants import all_variants, collected, templates_on_disk


def check_share(share: tuple) -> int:
    """Compile and validate the variants i with i % jobs == r; returns how many."""
    r, jobs = share
    n = 0
    for i, (_template, k, dtypes) in enumerate(all_variants()):
        if i % jobs == r:
            spirv_val(glsl.kernel_spirv(k, dtypes))
            n += 1
    return n


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
        n = check_share((0, 1))
    else:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            n = sum(pool.map(check_share, [(r, jobs) for r in range(jobs)]))
    print(f"shaders: {n} variants of {len(variants)} templates compiled and validated "
          f"in {time.perf_counter() - t0:.2f} s ({jobs} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
