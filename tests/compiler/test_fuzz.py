"""A bounded fuzz run inside `make test` (`make fuzz` runs 10,000 cases)."""
import sys

import pytest

from helpers.repo import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import fuzz  # noqa: E402
import fuzz_fields  # noqa: E402


def test_mutated_models_compile_or_fail_cleanly():
    r = fuzz.fuzz_models(400, seed=7, timeout=60, chunk=200)
    assert r["failures"] == [] and r["ok"] + r["reject"] == 400


def test_bundle_bit_flips_are_all_refused():
    assert fuzz.fuzz_bundle(1000, seed=3)["accepted"] == 0


def test_resealed_field_lies_run_unchanged_or_are_refused():
    """One semantic field changed, every digest recomputed: the same outputs or a one-line refusal."""
    r = fuzz_fields.fuzz(150, seed=11, timeout=60, chunk=150)
    assert r["failures"] == [] and r["same"] + r["refused_total"] + r["skipped"] == 150
    assert r["refused_total"] > 75


def test_fuzz_findings_fail_cleanly_or_match_litert():
    """Models from `scripts/fuzz.py --seed 31337` (cases 4340, 5520, 17117, 19257), rebuilt by hand: a NaN softmax
    beta runs (NaN, as LiteRT computes it); a MEAN without inputs, and float convolutions over int8 weights
    without a scale, are one-line refusals naming the operator."""
    import numpy as np
    import gpuc
    from gpuc.errors import UnsupportedError
    from helpers.builder import ModelBuilder
    from helpers.litert import run_litert

    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.tensor("y", [1, 4])
    mb.op("SOFTMAX", [x], [y], beta=float("nan"))
    mb.output(y)
    model = mb.finish()
    xs = [np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)]
    with gpuc.load(gpuc.compile(model, cache=False)) as m:
        got = m.run(xs)[0]
    assert np.isnan(got).all() and np.isnan(run_litert(model, xs)[0]).all()

    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.tensor("y", [1])
    mb.op("MEAN", [], [y], keep_dims=False)
    mb.output(y)
    with pytest.raises(UnsupportedError, match="MEAN"):
        gpuc.compile(mb.finish(), cache=False)

    for op, wshape, opts in (("CONV_2D", (4, 3, 3, 2), {}), ("DEPTHWISE_CONV_2D", (1, 3, 3, 4), {"depth_multiplier": 2})):
        mb = ModelBuilder()
        x = mb.input("x", [1, 6, 6, 2])
        w = mb.const("w", np.ones(wshape, np.int8))
        b = mb.const("b", np.zeros(4, np.float32))
        y = mb.tensor("y", [1, 6, 6, 4])
        mb.op(op, [x, w, b], [y], padding="SAME", stride_w=1, stride_h=1, **opts)
        mb.output(y)
        with pytest.raises(UnsupportedError, match=op):
            gpuc.compile(mb.finish(), cache=False)


def test_non_finite_literals_compile_in_defines_and_constant_arrays():
    from gpuc.compiler.codegen.glslang import compile_glsl
    from gpuc.compiler.glsl_literal import literal
    vals = [literal(float(v)) for v in ("nan", "inf", "-inf")]
    src = ("#version 450\nlayout(local_size_x = 1) in;\nlayout(set = 0, binding = 0) buffer B { float o[]; };\n"
           f"#define V {vals[0]}\nconst float a[3] = float[]({', '.join(vals)});\n"
           "void main() { o[0] = a[0] + V; o[1] = a[1]; o[2] = a[2]; }\n")
    assert compile_glsl(src, name="non-finite literals")


def test_fuzz_findings_seed_777_fail_cleanly():
    """`scripts/fuzz.py --seed 777` cases 8767 (a CONCATENATION without inputs crashed movement folding) and 4762
    (a depthwise convolution's bias typed bfloat16 reached memory planning), rebuilt by hand."""
    import numpy as np
    import gpuc
    from gpuc.errors import GpucError
    from helpers.builder import ModelBuilder

    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.tensor("y", [1, 4])
    mb.op("CONCATENATION", [], [y], axis=0)
    z = mb.tensor("z", [1, 4])
    mb.op("ADD", [x, y], [z])
    mb.output(z)
    with pytest.raises(GpucError, match="CONCATENATION"):
        gpuc.compile(mb.finish(), cache=False)

    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 4])
    w = mb.const("w", np.ones((1, 3, 3, 4), np.float32))
    b = mb.tensor("b", [4], dtype="bfloat16", data=np.zeros(4, np.uint16))
    y = mb.tensor("y", [1, 6, 6, 4])
    mb.op("DEPTHWISE_CONV_2D", [x, w, b], [y], padding="SAME", stride_w=1, stride_h=1, depth_multiplier=1)
    mb.output(y)
    with pytest.raises(GpucError, match="bfloat16"):
        gpuc.compile(mb.finish(), cache=False)


def test_fuzz_finding_seed_2027_fails_cleanly():
    """`scripts/fuzz.py --seed 2027` case 8612: a CALL_ONCE init subgraph assigning a constant typed `resource`
    to a variable reached numpy (TypeError); it is refused naming the op and the tensor, rebuilt by hand."""
    import numpy as np
    import gpuc
    from gpuc.errors import GpucError
    from helpers.builder import ModelBuilder, with_subgraphs

    mb = ModelBuilder()
    x = mb.input("x", [4])
    mb.op("CALL_ONCE", [], [], init_subgraph_index=1)
    h = mb.tensor("h", [], "resource")
    mb.op("VAR_HANDLE", [], [h], container="", shared_name="acc")
    v = mb.tensor("v", [4])
    mb.op("READ_VARIABLE", [h], [v])
    y = mb.tensor("y", [4])
    mb.op("ADD", [v, x], [y])
    mb.output(y)
    ib = ModelBuilder()
    h2 = ib.tensor("h", [], "resource")
    ib.op("VAR_HANDLE", [], [h2], container="", shared_name="acc")
    ib.op("ASSIGN_VARIABLE", [h2, ib.tensor("init", [4], "resource", data=np.zeros(4, np.uint8))], [])
    with pytest.raises(GpucError, match=r"ASSIGN_VARIABLE .*'init' of dtype resource"):
        gpuc.compile(with_subgraphs(mb, ib), cache=False)
