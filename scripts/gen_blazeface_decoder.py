"""Write examples/models/blazeface_decoder.tflite: BlazeFace's box decoding as a model of its own, for
examples/chain_on_device.py (a second bundle that takes the face detector's outputs on the device).

inputs  regressors [1, 896, 16], classificators [1, 896, 1]: the face detector's raw outputs
outputs boxes [1, 896, 16]: xmin, ymin, xmax, ymax, then 6 keypoints (x, y), normalised to the input;
        scores [1, 896, 1]: sigmoid of the logits clipped to +-100
as gpuc/demo.py's decode() computes them before thresholding and non-max suppression: the box and
keypoint offsets are one linear map (a FULLY_CONNECTED: scale by 1/128, centre +- size/2) plus each
anchor's centre (an ADD of a constant).

    python scripts/gen_blazeface_decoder.py        (tests/cli/test_examples.py checks the file is current)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "examples" / "models" / "blazeface_decoder.tflite"


def decoder_model() -> bytes:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.builder import ModelBuilder
    from gpuc.demo import INPUT_SIZE, NUM_KEYPOINTS, SCORE_CLIP, ssd_anchors

    n, c = 896, 4 + 2 * NUM_KEYPOINTS
    w = np.zeros((c, c), np.float32)                        # FULLY_CONNECTED weights: [out, in]
    s = 1.0 / INPUT_SIZE
    for k in (0, 1):                                        # x, y: centre -+ size/2
        w[k, k], w[k, 2 + k] = s, -s / 2                    # min
        w[2 + k, k], w[2 + k, 2 + k] = s, s / 2             # max
    for j in range(4, c):
        w[j, j] = s                                         # keypoints
    anchors = ssd_anchors()
    offset = np.tile(anchors, (1, c // 2)).astype(np.float32)    # x, y, x, y, ... per anchor

    mb = ModelBuilder("BlazeFace box decoding (gpuc examples/chain_on_device.py)")
    reg = mb.input("regressors", [1, n, c])
    cls = mb.input("classificators", [1, n, 1])
    flat = mb.tensor("flat", [n, c])
    mb.op("RESHAPE", [reg, mb.const("flat_shape", np.array([n, c], np.int32))], [flat], new_shape=[n, c])
    lin = mb.tensor("linear", [n, c])
    mb.op("FULLY_CONNECTED", [flat, mb.const("transform", w), -1], [lin])
    dec = mb.tensor("decoded", [n, c])
    mb.op("ADD", [lin, mb.const("anchor_centres", offset)], [dec])
    boxes = mb.tensor("boxes", [1, n, c])
    mb.op("RESHAPE", [dec, mb.const("boxes_shape", np.array([1, n, c], np.int32))], [boxes], new_shape=[1, n, c])
    lo = mb.tensor("clipped_lo", [1, n, 1])
    mb.op("MAXIMUM", [cls, mb.const("min_logit", np.array([-SCORE_CLIP], np.float32))], [lo])
    hi = mb.tensor("clipped", [1, n, 1])
    mb.op("MINIMUM", [lo, mb.const("max_logit", np.array([SCORE_CLIP], np.float32))], [hi])
    scores = mb.tensor("scores", [1, n, 1])
    mb.op("LOGISTIC", [hi], [scores])
    mb.output(boxes)
    mb.output(scores)
    return mb.finish()


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(decoder_model())
    print(f"wrote {OUT.relative_to(ROOT)}: {OUT.stat().st_size} bytes")
