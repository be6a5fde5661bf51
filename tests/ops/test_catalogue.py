"""Per-op correctness of gpuc (compile + Vulkan runtime) against LiteRT's builtin CPU kernels.

The models are the tiny configurations catalogued in tests/helpers/catalogue.py (`CASES`), written
with tests/helpers/builder.py; tests/compiler/test_model_builder.py proves each of them loads and runs
in LiteRT with the declared output shapes.  Where LiteRT rejects a valid configuration (CONV_2D / DEPTHWISE_CONV_2D
without a bias, fused activation on CONCATENATION) the case carries an equivalent reference model.
All shapes are small so a CPU Vulkan driver (lavapipe) runs the whole module quickly.
"""
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.catalogue import CASES, build  # noqa: E402
from helpers.data import rnd  # noqa: E402
from helpers.ops import assert_close  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


@pytest.mark.parametrize("name", list(CASES))
def test_op(gpu, name):
    c = CASES[name]()
    refs = c.reference()
    outs = gpu.run(c.model, [x.copy() for x in c.inputs])
    assert_close(outs, refs, c.out_shapes, c.out_dtypes)


def test_rerun_with_new_inputs(gpu):
    """One loaded model, run repeatedly with different inputs, matches LiteRT every time."""
    c = CASES["conv2d-k3x3-s2x2-d1-SAME-RELU6-bias-2x7x9x3to5"]()
    m = gpu.load(c.model)
    try:
        for seed in range(3):
            xs = [rnd(x.shape, 1000 + seed, -2, 2) for x in c.inputs]
            assert_close(m.run(xs), run_litert(c.model, xs), c.out_shapes, c.out_dtypes)
    finally:
        m.close()


def test_load_from_path(gpu, tmp_path):
    c = CASES["add-2x1x4x3-3"]()
    path = tmp_path / "add.gpuc"
    path.write_bytes(gpuc.compile(c.model))
    m = gpuc.load(str(path), device=gpu.device)
    try:
        assert_close(m.run(c.inputs), c.reference(), c.out_shapes, c.out_dtypes)
    finally:
        m.close()


def test_fully_connected_tanh_is_unsupported_like_litert():
    """LiteRT's float FULLY_CONNECTED rejects a fused TANH; gpuc reports it unsupported at compile time."""
    from gpuc.errors import UnsupportedError
    model, _ = build("FULLY_CONNECTED", [[1, 4], rnd((2, 4)), rnd((2,))], [1, 2], fused_activation_function="TANH")
    with pytest.raises(UnsupportedError, match="FULLY_CONNECTED.*TANH"):
        gpuc.compile(model)
