"""NON_MAX_SUPPRESSION_V4 / V5 on the GPU against LiteRT's CPU kernel: equal scores (LiteRT's heap
order, not the lower index), swapped corners, zero-area boxes (LiteRT selects them again and again),
the score threshold (strictly greater), IoU >= the threshold, iou_threshold > 1, max_output_size 0 and
above the box count, a run-time max_output_size (outputs trimmed per run), 2000+ boxes, soft-NMS."""
from __future__ import annotations

import json

import numpy as np
import pytest

import gpuc
from gpuc.errors import GpucError, UnsupportedError
from helpers.nms import litert, nms_model, random_boxes, random_scores


def check(gpu, model, ins, soft=False):
    ref, out = litert(model, ins), gpu.run(model, ins)
    assert [o.shape for o in out] == [r.shape for r in ref] and [o.dtype for o in out] == [r.dtype for r in ref]
    np.testing.assert_array_equal(out[-1], ref[-1])
    np.testing.assert_array_equal(out[0], ref[0])
    if soft:      # decayed scores: GLSL's exp against glibc's expf, a few ulp
        np.testing.assert_allclose(out[1], ref[1], rtol=1e-6, atol=0)
    return ref


CASES = [  # (boxes, v5, max_output_size, iou_threshold, score_threshold, sigma, score grid)
    (30, False, 10, 0.5, 0.0, 0.0, 4),        # many equal scores
    (30, False, 40, 0.3, 0.2, 0.0, 10),       # max_output_size above the box count
    (25, False, 0, 0.5, 0.0, 0.0, 0),         # nothing to select
    (25, False, 8, 0.5, 1.5, 0.0, 0),         # every score below the threshold
    (25, False, 30, 1.5, -1.0, 0.0, 4),       # iou_threshold > 1: every box selected again
    (40, False, 20, 0.0, 0.0, 0.0, 0),        # iou_threshold 0: the first box suppresses every other
    (40, True, 15, 0.5, 0.1, 0.0, 4),         # V5 without soft-NMS: selected_scores are the scores
    (40, True, 30, 0.6, 0.0, 0.5, 8),         # soft-NMS
    (40, True, 50, 1.0, 0.05, 0.3, 0),        # pure soft-NMS (iou_threshold 1), score decay to the threshold
]


@pytest.mark.parametrize("case", CASES)
def test_nms_matches_litert(gpu, case):
    n, v5, mo, iou, thr, sigma, grid = case
    rng = np.random.default_rng(n + mo)
    ins = [random_boxes(n, rng), random_scores(n, rng, grid)]
    check(gpu, nms_model(n, v5, mo, iou, thr, sigma), ins, soft=sigma > 0)


def test_ties_follow_litert_heap_not_index(gpu):
    """Disjoint boxes, two score levels: LiteRT's std::priority_queue hands equal scores out in heap
    order (1, 6, 13, 3, ...), not by index; gpuc the same."""
    n = 20
    boxes = np.array([[i, 0, i + 0.5, 1] for i in range(n)], np.float32)
    scores = np.array([0.5, 0.7, 0.5, 0.7, 0.5, 0.5, 0.7] * 3, np.float32)[:n]
    ref = check(gpu, nms_model(n, max_out=n), [boxes, scores])
    assert list(ref[0][:4]) == [1, 6, 13, 3]


def test_corners_thresholds_and_degenerate_boxes(gpu):
    """Corners given either way round; a score equal to the threshold is not a candidate; IoU equal
    to the threshold suppresses; a zero-area box with the top score is selected repeatedly."""
    boxes = np.array([[0, 0, 1, 1], [1, 1, 0, 0.5], [0.5, 0, 0, 1], [2, 2, 2, 3], [3, 3, 4, 4], [4, 4, 3, 3]],
                     np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.95, 0.3, 0.6], np.float32)
    for thr in (0.3, 0.0):
        for iou in (0.5, 0.7):
            check(gpu, nms_model(6, True, 6, iou, thr), [boxes, scores])
    ref = litert(nms_model(6, max_out=6, thr=0.3), [boxes, scores])
    assert list(ref[0][:3]) == [3, 3, 3]                 # (LiteRT's own behaviour, kept)


@pytest.mark.parametrize("v5", [False, True])
def test_runtime_max_output_size_trims_outputs(gpu, v5):
    n = 30
    rng = np.random.default_rng(3)
    boxes, scores = random_boxes(n, rng), random_scores(n, rng, 6)
    model = nms_model(n, v5, rt_max=True, sigma=0.4 if v5 else 0.0)
    with gpuc.load(gpuc.compile(model, cache=False), device=gpu.device) as m:
        assert m.outputs[0].shape == (n,)
        for mo in (0, 1, 7, n):
            ins = [boxes, scores, np.array(mo, np.int32)]
            out = m.run(ins)
            assert out[0].shape == (mo,) and (not v5 or out[1].shape == (mo,))
            if mo:             # (LiteRT's Python binding cannot read a 0-length tensor)
                ref = litert(model, ins)
                np.testing.assert_array_equal(out[0], ref[0])
                np.testing.assert_array_equal(out[-1], ref[-1])
        with pytest.raises(GpucError, match=r"'selected_indices'.*'max_output_size' = 31, outside \[0, 30\]"):
            m.run([boxes, scores, np.array(n + 1, np.int32)])
        with pytest.raises(GpucError, match="max_output_size' = -1"):
            m.run([boxes, scores, np.array(-1, np.int32)])


def test_many_boxes(gpu):
    """2500 boxes, small ones (long greedy walks), some equal scores."""
    n = 2500
    rng = np.random.default_rng(11)
    ins = [random_boxes(n, rng, size=0.05), random_scores(n, rng, 500)]
    ref = check(gpu, nms_model(n, max_out=400, iou=0.4, thr=0.1), ins)
    assert ref[-1] >= 300


SORTED_CASES = [  # (boxes, v5, max_output_size, iou_threshold, score_threshold, score grid, box size, zero-area share)
    (2000, False, 100, 0.5, 0.1, 0, 0.4, 0.0),      # benchmarks/nms_speed.py's size: the sorted walk
    (800, True, 300, 0.3, 0.0, 0, 0.08, 0.0),       # long walks, V5 without decay
    (400, False, 400, 0.6, 0.2, 0, 0.2, 0.3),       # many zero-area boxes: one of them fills the output
    (500, False, 200, 0.45, 0.05, 64, 0.1, 0.02),   # many equal scores: the heap path
    (300, True, 50, 1.2, 0.0, 0, 0.2, 0.0),         # iou_threshold > 1: the first box repeated
    (400, False, 80, 0.0, 0.5, 0, 0.2, 0.0),        # iou_threshold 0
    (2100, False, 120, 0.5, 0.3, 0, 0.1, 0.05),     # above FAST_CAP boxes: the heap path
]


@pytest.mark.parametrize("case", SORTED_CASES)
def test_sorted_walk_matches_litert(gpu, case):
    """Random boxes with distinct scores (the sorted parallel walk) and with ties (the heap), both
    checked against LiteRT over two draws each."""
    n, v5, mo, iou, thr, grid, size, zero = case
    rng = np.random.default_rng(n + mo)
    model = nms_model(n, v5, mo, iou, thr)
    for _ in range(2):
        ins = [random_boxes(n, rng, degenerate=zero, size=size), random_scores(n, rng, grid)]
        check(gpu, model, ins)


STAGED_CASES = [  # (boxes, v5, max_output_size, iou, score threshold, sigma, candidate share, grid)
    (25200, False, 300, 0.45, 0.25, 0.0, 0.3, 0),   # a YOLO-sized head, 7,560 candidates: wrong in one dispatch
    (5000, False, 2000, 0.3, 0.0, 0.0, 1.0, 0),     # every box a candidate, 2,000 selections
    (3000, False, 200, 0.5, 0.0, 0.0, 1.0, 40),     # ties: the heap's order across dispatches
    (8400, True, 300, 0.45, 0.25, 0.5, 0.3, 0),     # soft-NMS: decayed scores pushed back across dispatches
]


@pytest.mark.parametrize("case", STAGED_CASES)
def test_staged_heap_matches_litert(gpu, case):
    """Sizes where one invocation's heap loops would pass llvmpipe's 65,535 passes: the heap runs in dispatches
    that keep its state in a tensor (pushes in chunks of boxes, pops in chunks), against LiteRT."""
    from gpuc.compiler.ops.nms import _stages
    n, v5, mo, iou, thr, sigma, share, grid = case
    assert _stages(n, mo, sigma > 0)[0] is not None
    rng = np.random.default_rng(n)
    boxes, s = random_boxes(n, rng, size=0.1), random_scores(n, rng, grid)
    s = np.where(rng.random(n) < share, 0.3 + 0.7 * s, 0.2 * s).astype(np.float32)
    ref = check(gpu, nms_model(n, v5, mo, iou, thr, sigma), [boxes, s], soft=sigma > 0)
    assert ref[-1] == mo


def test_staged_runtime_max_output_size():
    n = 4000
    rng = np.random.default_rng(6)
    boxes, scores = random_boxes(n, rng, size=0.05), random_scores(n, rng)
    model = nms_model(n, rt_max=True, iou=0.4)
    with gpuc.load(gpuc.compile(model, cache=False)) as m:
        for mo in (5, 900):
            ins = [boxes, scores, np.array(mo, np.int32)]
            for o, r in zip(m.run(ins), litert(model, ins)):
                np.testing.assert_array_equal(o, r)


def test_runs_on_the_gpu_without_round_trips(tmp_path):
    from click.testing import CliRunner
    from gpuc.cli import main
    p = tmp_path / "nms.tflite"
    p.write_bytes(nms_model(20, True, 5, sigma=0.5))
    res = CliRunner().invoke(main, ["inspect", str(p), "--json"])
    info = json.loads(res.output)
    assert (info["cpu_nodes"], info["host_round_trips"]) == (0, 0)


@pytest.mark.parametrize("kw,match", [
    (dict(max_out=-1), "max_output_size is -1"),
    (dict(max_out=5000), "exceeds the 2048"),
    (dict(v5=True, sigma=-0.5), "soft_nms_sigma is -0.5"),
])
def test_bad_inputs_are_refused(kw, match):
    with pytest.raises(UnsupportedError, match="NON_MAX_SUPPRESSION_V[45].*" + match):
        gpuc.compile(nms_model(10, **kw), cache=False)
