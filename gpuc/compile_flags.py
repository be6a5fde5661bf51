"""The options of `gpuc compile` and the lines it prints on success: one definition for the click CLI
(gpuc/cli.py builds its options from COMPILE_OPTIONS) and the console script's fast path (gpuc/launch.py
parses them without click).  Imports nothing: the fast path stays cheap, and neither of those two
modules needs the other for these.
"""
from __future__ import annotations


class Option:
    """One option of `gpuc compile`: its names, the parameter it sets and what it takes.  The click
    CLI (gpuc/cli.py) builds its options from COMPILE_OPTIONS; the fast path (gpuc/launch.py) parses them."""

    def __init__(self, names, dest, help="", default=None, choices=None, int_range=None, flag=False,
                 multiple=False, metavar=None, required=False, path=False, fast=True):
        self.names, self.dest, self.help, self.default = tuple(names), dest, help, default
        self.choices, self.int_range, self.flag, self.multiple = choices, int_range, flag, multiple
        self.metavar, self.required, self.path = metavar, required, path
        self.fast = fast             # False: the fast path leaves a command line with it to click


COMPILE_OPTIONS = (
    Option(("-o", "--output"), "output", "bundle to write", required=True, path=True),
    Option(("--precision",), "precision", "fp16: activations and weights stored as float16, computed in fp32 "
           "(a device without 16-bit storage runs the bundle's fp32 fallback)", default="fp32", choices=("fp32", "fp16")),
    Option(("--disable-pass",), "disable_passes", "skip an IR pass (repeatable)", multiple=True, metavar="NAME"),
    Option(("--no-cache",), "no_cache", "always compile; neither read nor write the compile cache", flag=True,
           fast=False),
    Option(("--max-batch",), "max_batch", "the bundle runs any batch 1..N (items stacked on axis 0 of the batch-1 I/O)",
           default=1, int_range=(1, 4096)),
    Option(("--input-shape",), "input_shapes", "give an input a concrete shape, e.g. serving_default_x:0=1x144000 "
           "(-1 dims of its signature only; shapes downstream are recomputed and shape arithmetic folds; repeatable)",
           multiple=True, metavar="NAME=DIMS", fast=False),
    Option(("--dynamic",), "dynamic", "bound a dynamic dimension: NAME:AXIS<=MAX (the last ':' splits off the "
           "axis; repeatable): the batch axis 0 of every input (the bundle runs any batch 1..MAX), or any other "
           "axis of an input, such as a sequence length or an image's height and width (the bundle runs every "
           "size 1..MAX)",
           multiple=True, metavar="NAME:AXIS<=MAX", fast=False),
    Option(("--max-binding-bytes",), "max_binding_bytes", "refuse a tensor bound to a kernel larger than this "
           "(the target device's maxStorageBufferRange; Vulkan guarantees 134217728)", default=4294967295,
           int_range=(1024, 1 << 40), fast=False),
    Option(("-q", "--quiet"), "quiet", "print nothing on success", flag=True),
    Option(("--json",), "as_json", "print one JSON object: output, bytes, seconds, cache (hit / miss / null) and "
           "the bundle's stats", flag=True, fast=False),
)
def compile_summary(output, nbytes: int, stats: dict, seconds: float, hit: bool, max_batch: int) -> list:
    """The lines `gpuc compile` prints on success (the click CLI and the fast path both use this)."""
    st = stats
    lines = [f"wrote {output}: {nbytes} bytes, {st.get('dispatches')} dispatches, "
             f"{st.get('shaders')} shaders, arena {st.get('arena_bytes')} B, "
             f"weights {st.get('weights_bytes')} B, {seconds * 1e3:.1f} ms"
             + (" (compile cache hit)" if hit else "")
             + (f", dynamic {', '.join(st['dynamic_dims'])}" if st.get("dynamic_dims") else
                f", batch 1..{max_batch}" if max_batch > 1 else "")
             + (f", {st['fp16_tensors']} tensors fp16 (+ fp32 fallback)" if st.get("fp16_tensors") else "")]
    if st.get("cpu_nodes"):
        lines.append(f"{st['cpu_nodes']} op(s) on the CPU ({', '.join(st.get('cpu_ops', []))}), "
                     f"{st.get('host_round_trips', 0)} host round trip(s) per run")
    return lines
