"""`make shaders`: compile every shader template variant with glslang and validate it with spirv-val."""
import sys
import time

from gpuc.compiler.codegen import glsl
from gpuc.compiler.codegen.glslang import spirv_val
from gpuc.compiler.codegen.variants import all_variants, collected, templates_on_disk


def main() -> int:
    variants = collected()
    missing = templates_on_disk() - {k.split(":")[0] for k in variants}
    if missing:
        print(f"templates without variants in compiler/codegen/variants.py: {sorted(missing)}")
        return 1
    t0, n = time.perf_counter(), 0
    for template, k, dtypes in all_variants():
        spirv = glsl.kernel_spirv(k, dtypes)
        spirv_val(spirv)
        n += 1
    print(f"shaders: {n} variants of {len(variants)} templates compiled and validated "
          f"in {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
