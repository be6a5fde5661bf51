"""CUSTOM:TFLite_Detection_PostProcess on the GPU against LiteRT's CPU kernel: fast and regular NMS,
every option, exact score ties (scores on a coarse grid), scores at the threshold, suppression
(overlapping anchors), several sort stages and suppression chunks, bad options; and the shared
SSDLite detector end to end against its LiteRT reference outputs."""
from __future__ import annotations

import json

import numpy as np
import pytest
from flatbuffers import flexbuffers

import gpuc
from gpuc.errors import UnsupportedError
from helpers.detection import detection_model, flex_options, random_anchors
from helpers.litert import run_litert


def inputs(n, cb, seed, grid=0):
    """Random encodings and scores; grid > 0: scores on multiples of 1/grid (many exact ties)."""
    rng = np.random.default_rng(seed)
    enc = rng.normal(0, 1, (1, n, 4)).astype(np.float32)
    s = rng.uniform(0, 1, (1, n, cb))
    if grid:
        s = np.floor(s * grid) / grid
    return enc, s.astype(np.float32)


def written(slots, kk, num, regular, n_cat):
    """The output slots LiteRT's kernel writes (it leaves the others as the arena had them; gpuc
    writes 0 there): fast NMS the first n_cat of each detection's kk, regular NMS the first
    max_detections (zeros past the count)."""
    if regular:
        return np.arange(slots) < slots // kk
    b, col = np.divmod(np.arange(slots), kk)
    return (b < num) & (col < n_cat)


def check(model, ins, gpu, kk=1, regular=False, n_cat=1):
    ref, out = run_litert(model, list(ins)), gpu.run(model, list(ins))
    names = ("boxes", "classes", "scores", "num_detections")
    for name, r, o in zip(names, ref, out):
        assert r.shape == o.shape and r.dtype == o.dtype, (name, r.shape, o.shape)
    np.testing.assert_array_equal(out[3], ref[3])
    w = written(ref[1].shape[1], kk, int(ref[3][0]), regular, n_cat)
    np.testing.assert_array_equal(out[1][0, w], ref[1][0, w])
    np.testing.assert_allclose(out[2][0, w], ref[2][0, w], atol=1e-6, rtol=0)
    np.testing.assert_allclose(out[0][0, w], ref[0][0, w], atol=1e-5, rtol=0)
    for o in out[:3]:
        assert not o[0, ~w].any()                # gpuc's padding: zeros
    return ref


def run_case(model, ins, gpu, c, regular, opts):
    kk = opts.get("max_classes_per_detection", 1)
    return check(model, ins, gpu, kk, regular, min(kk, c))


FAST = [  # (anchors, classes, background column, options)
    (40, 3, 1, dict(max_detections=5)),
    (40, 3, 1, dict(max_detections=6, max_classes_per_detection=2)),
    (40, 4, 0, dict(max_detections=8, max_classes_per_detection=4, nms_score_threshold=0.5)),
    (30, 2, 1, dict(max_detections=4, max_classes_per_detection=3)),        # more slots than classes
    (60, 5, 1, dict(max_detections=100, nms_iou_threshold=0.3)),            # runs out of candidates
    (20, 3, 1, dict(max_detections=0)),
    (25, 3, 1, dict(max_detections=5, nms_iou_threshold=1.0, y_scale=1.0, x_scale=2.0, h_scale=3.0, w_scale=4.0)),
]
REGULAR = [
    (40, 3, 1, dict(max_detections=7, detections_per_class=3)),
    (40, 3, 0, dict(max_detections=20, detections_per_class=10, nms_score_threshold=0.5)),
    (50, 4, 1, dict(max_detections=5, detections_per_class=100)),            # detections_per_class > anchors
    (30, 2, 1, dict(max_detections=6, max_classes_per_detection=2, detections_per_class=4)),   # padded slots
    (30, 3, 1, dict(max_detections=4, detections_per_class=None, nms_iou_threshold=0.2)),      # default 100
]


@pytest.mark.parametrize("regular,case", [(False, c) for c in FAST] + [(True, c) for c in REGULAR])
@pytest.mark.parametrize("grid", [0, 4])
def test_detection_matches_litert(gpu, regular, case, grid):
    n, c, bg, opts = case
    rng = np.random.default_rng(n + c)
    model = detection_model(n, c + bg, random_anchors(n, rng), num_classes=c, use_regular_nms=regular, **opts)
    run_case(model, inputs(n, c + bg, n * c + grid, grid), gpu, c, regular, opts)


def test_scores_at_the_threshold_and_negative_zero(gpu):
    """A score equal to the threshold is kept (>=); -0.0 ties with 0.0 (lower anchor first)."""
    n, c = 24, 2
    rng = np.random.default_rng(1)
    enc, s = inputs(n, c + 1, 2, grid=4)
    s[0, ::3, 1] = 0.25
    s[0, 1::5, 2] = -0.0
    s[0, 2::5, 2] = 0.0
    anchors = random_anchors(n, rng)
    for regular in (False, True):
        for thr in (0.25, 0.0):
            opts = dict(max_detections=12, max_classes_per_detection=2, nms_score_threshold=thr,
                        nms_iou_threshold=0.4)
            model = detection_model(n, c + 1, anchors, num_classes=c, use_regular_nms=regular, **opts)
            run_case(model, (enc, s), gpu, c, regular, opts)


@pytest.mark.parametrize("regular", [False, True])
def test_many_anchors_sort_stages_and_chunks(gpu, regular):
    """1500 anchors: a 2048-long sort (global passes) and suppression over many 128-candidate chunks."""
    n, c = 1500, 3
    rng = np.random.default_rng(7)
    anchors = random_anchors(n, rng)
    anchors[:, 2:] *= 0.3                       # small boxes: little suppression, long greedy walks
    opts = dict(max_detections=300, detections_per_class=200, max_classes_per_detection=1 if regular else 2,
                nms_iou_threshold=0.5)
    model = detection_model(n, c + 1, anchors, num_classes=c, use_regular_nms=regular, **opts)
    ref = run_case(model, inputs(n, c + 1, 8, grid=64), gpu, c, regular, opts)
    assert ref[3][0] >= 150                     # the walk really went past one chunk


def test_runtime_anchors(gpu):
    n, c = 30, 3
    model = detection_model(n, c + 1, anchors_input=True, num_classes=c, max_detections=6)
    enc, s = inputs(n, c + 1, 3)
    check(model, (enc, s, random_anchors(n, np.random.default_rng(4))), gpu)


@pytest.mark.parametrize("opts,match", [
    (dict(nms_iou_threshold=0.0), "nms_iou_threshold 0.0 is not in"),
    (dict(max_classes_per_detection=0), "max_classes_per_detection 0"),
    (dict(use_regular_nms=True, detections_per_class=0), "detections_per_class 0"),
    (dict(num_classes=5), "num_classes 5 does not fit scores with 4 columns"),
    (dict(max_detections=-1), "max_detections -1"),
    (dict(max_detections=5000, num_classes=3), None),          # fine: only 30 anchors to keep
])
def test_bad_options_are_refused(opts, match):
    n = 30
    model = detection_model(n, 4, random_anchors(n, np.random.default_rng(0)), **dict(dict(num_classes=3), **opts))
    if match is None:
        gpuc.compile(model)
        return
    with pytest.raises(UnsupportedError, match="TFLite_Detection_PostProcess.*" + match):
        gpuc.compile(model)


def test_malformed_options_and_anchors_are_refused():
    n = 10
    anchors = random_anchors(n, np.random.default_rng(0))
    for raw in (b"\x07\x01\xff", b"\x00\x00\x01", flex_options(dict(num_classes=3))[:-3]):
        with pytest.raises(UnsupportedError, match="TFLite_Detection_PostProcess.*custom_options is (not a valid|a "
                                                   "flexbuffer)"):
            gpuc.compile(detection_model(n, 4, anchors, options=raw))
    with pytest.raises(UnsupportedError, match="option 'num_classes' is a str, not a number"):
        gpuc.compile(detection_model(n, 4, anchors, options=bytes(flexbuffers.Dumps({"num_classes": "three"}))))
    anchors[3, 2] = -0.1
    with pytest.raises(UnsupportedError, match="negative height or width"):
        gpuc.compile(detection_model(n, 4, anchors))


@pytest.mark.parametrize("regular,kk", [(False, 1), (False, 2), (True, 2)])
def test_max_batch_runs_batch_native(tmp_path, gpu, regular, kk):
    """--max-batch 4: batch-native (`gpuc inspect --json`: batch native), every item as its batch-1 run
    (bit for bit) and as LiteRT's run of that item, for runs of 4 and of 3 items (grid ties included)."""
    n, c = 30, 3
    model = detection_model(n, c + 1, random_anchors(n, np.random.default_rng(0)), num_classes=c, max_detections=5,
                            use_regular_nms=regular, max_classes_per_detection=kk, detections_per_class=4)
    path = tmp_path / "d.bundle"
    gpuc.compile(model, output=str(path), max_batch=4)
    from click.testing import CliRunner
    from gpuc.cli import main
    res = CliRunner().invoke(main, ["inspect", str(path), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert (info["batch"], info["batch_native"], info["cpu_nodes"]) == ("native", True, 0), info.get("batch_refusal")
    items = [inputs(n, c + 1, seed, grid=8 if seed % 2 else 0) for seed in range(4)]
    with gpuc.load(str(path)) as m:
        runs = [m.run([np.concatenate([it[k] for it in items[:b]]) for k in range(2)]) for b in (4, 3)]
    for b, outs in zip((4, 3), runs):
        for i, it in enumerate(items[:b]):
            one = gpu.run(model, list(it))
            for o, r in zip(outs, one):
                np.testing.assert_array_equal(o[i:i + 1], r, err_msg=f"batch {b} item {i}")
            check(model, it, gpu, kk, regular, min(kk, c))


def test_shared_ssdlite_matches_litert(models_dir, gpu):
    d = models_dir / "detection"
    path = d / "pedestrian_ssdlite_mobilenet_v2.tflite"
    if not path.is_file():
        pytest.skip("pedestrian_ssdlite_mobilenet_v2.tflite not in the shared models")
    from click.testing import CliRunner
    from gpuc.cli import main
    res = CliRunner().invoke(main, ["inspect", str(path), "--json"])
    info = json.loads(res.output)
    assert (info["cpu_nodes"], info["host_round_trips"]) == (0, 0)
    x = np.load(d / "ref" / "pedestrian_ssdlite_mobilenet_v2.in0.npy")
    ref = [np.load(d / "ref" / f"pedestrian_ssdlite_mobilenet_v2.out{i}.npy") for i in range(4)]
    out = gpu.run(path.read_bytes(), [x])
    classes, num, boxes, scores = out
    np.testing.assert_array_equal(num, ref[1])
    np.testing.assert_array_equal(classes, ref[0])
    assert np.abs(boxes - ref[2]).max() <= 1e-5 and np.abs(scores - ref[3]).max() <= 1e-5
