"""Two bundles chained on the device: a face detector, then its box decoding, with the detector's raw
outputs never copied to the host.

The photo's input tensor is uploaded once (gpuc.to_device); the detector (MediaPipe's BlazeFace, as in
`make demo`) runs with keep_on_device=True and returns DeviceTensors; the decoder bundle
(models/blazeface_decoder.tflite: anchors, box corners, sigmoid scores) takes them as its inputs, so
the only copy back is the decoded boxes and scores.  The host keeps what scores over 0.5 and merges
overlapping boxes (non-max suppression), then checks the result against the detector's outputs
decoded on the host (gpuc.demo.decode).

    python examples/chain_on_device.py [PHOTO]          (default: scikit-image's astronaut)
"""
import sys
from pathlib import Path

import numpy as np

import gpuc
from gpuc import demo

DECODER = Path(__file__).resolve().parent / "models" / "blazeface_decoder.tflite"

rgb = demo.load_image(sys.argv[1]) if len(sys.argv) > 1 else demo.astronaut()
x, pad = demo.preprocess(rgb)                       # 1x128x128x3 float32, letterboxed

with gpuc.open_device() as dev:                      # one device: bundles on it share DeviceTensors
    with gpuc.load(gpuc.compile(demo.model_path()), device=dev) as detector, \
         gpuc.load(gpuc.compile(DECODER), device=dev) as decoder:
        print("detector", [(s.name, s.shape) for s in detector.outputs])
        print("decoder ", [(s.name, s.shape) for s in decoder.inputs], "->", [(s.name, s.shape) for s in decoder.outputs])

        with gpuc.to_device(x, dev, name="image") as frame:
            raw = detector.run([frame], keep_on_device=True)        # [regressors, classificators], on the GPU
            boxes, scores = decoder.run(raw)                        # device -> device, then host arrays
            for t in raw:
                t.close()

        reference = demo.decode(*detector.run([x]), pad)           # the same photo, decoded on the host

# the host's part: threshold, weighted non-max suppression, letterbox removal
faces = demo.detections(boxes[0, :, :4], boxes[0, :, 4:].reshape(-1, demo.NUM_KEYPOINTS, 2), scores.reshape(-1), pad)
h, w = rgb.shape[:2]
for i, f in enumerate(faces):
    print(f"face {i}: score {f.score:.3f}  box px {f.box_px(w, h)}")

assert len(faces) == len(reference), (len(faces), len(reference))
diff = max((float(np.abs(f.box - r.box).max()) for f, r in zip(faces, reference)), default=0.0)
print(f"{len(faces)} face(s); chained decoding vs host decoding: box coordinates within {diff:.1e}")
assert diff < 1e-5
