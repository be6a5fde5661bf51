"""A streaming model with state: the "Okay Nabu" wake word detector, fed 30 ms of audio per run.

microWakeWord's okay_nabu.tflite (from the pymicro-wakeword package) keeps its state between runs in
variables, which a gpuc bundle keeps on the device: each run takes the next 3 feature frames (10 ms
each, int8) and returns the wake word's probability (uint8).  The features come from
pymicro-features, the TFLite Micro audio front end the model was trained with.  As microWakeWord
does, the mean of the last 5 probabilities over 0.85 is a detection.  The same stream through one
LiteRT interpreter with its reference kernels (its state carried over the same way) detects the word
at the same moment; the probabilities agree within a few uint8 steps (gpuc rounds an int8 depthwise
convolution's output one step differently now and then, and the state carries that on).

    python examples/wake_word_stream.py [WAV]        (16 kHz, 16-bit mono; default audio/okay_nabu.wav:
                                                      espeak-ng 1.51 saying "okay nabu", resampled to 16 kHz)
"""
import importlib.util
import json
import sys
import wave
from collections import deque
from pathlib import Path

import numpy as np
from pymicro_wakeword import MicroWakeWordFeatures

import gpuc

HERE = Path(__file__).resolve().parent
MODELS = Path(next(iter(importlib.util.find_spec("pymicro_wakeword").submodule_search_locations))) / "models"
model = MODELS / "okay_nabu.tflite"
config = json.loads((MODELS / "okay_nabu.json").read_text())["micro"]    # probability_cutoff, sliding_window_size

wav = sys.argv[1] if len(sys.argv) > 1 else HERE / "audio" / "okay_nabu.wav"
with wave.open(str(wav)) as w:
    assert (w.getframerate(), w.getsampwidth(), w.getnchannels()) == (16000, 2, 1), "16 kHz 16-bit mono WAV"
    audio = w.readframes(w.getnframes())
frames = np.concatenate(list(MicroWakeWordFeatures().process_streaming(audio)), axis=1)   # 1 x T x 40 float

with gpuc.load(gpuc.compile(model)) as m:
    spec, out = m.inputs[0], m.outputs[0]                  # int8 [1, 3, 40] and uint8 [1, 1], quantized
    step = spec.shape[1]
    q_in, q_out = spec.quant, out.quant
    chunks = [np.round(frames[:, t:t + step] / q_in["scale"][0] + q_in["zero_point"][0]).astype(spec.dtype)
              for t in range(0, frames.shape[1] - step + 1, step)]
    print(f"{wav}: {len(audio) / 32000:.2f} s, {frames.shape[1]} feature frames, {len(chunks)} runs of {step}; "
          f"state kept on the device: {m.has_state}")
    probs_q = np.array([m.run([c])[0].item() for c in chunks])            # one run per 30 ms: state carries over
probs = (probs_q - q_out["zero_point"][0]) * q_out["scale"][0]


def detection_time(probs):
    """Seconds of audio heard when the mean of the last `sliding_window_size` probabilities first
    exceeds `probability_cutoff` (microWakeWord's rule), or None."""
    window = deque(maxlen=config["sliding_window_size"])
    for k, p in enumerate(probs):
        window.append(p)
        if len(window) == window.maxlen and np.mean(window) > config["probability_cutoff"]:
            return (k + 1) * step * 0.01
    return None


detected = detection_time(probs)
print("probabilities:", " ".join(f"{p:.2f}" for p in probs))
print(f"'{json.loads((MODELS / 'okay_nabu.json').read_text())['wake_word']}' "
      + (f"detected after {detected:.2f} s" if detected else "not detected") + f" (peak {probs.max():.3f})")

# the same stream through LiteRT's reference kernels (those of the package's own TFLite library)
from ai_edge_litert.interpreter import Interpreter, OpResolverType          # noqa: E402 - the comparison only
it = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
it.allocate_tensors()
ref = []
for c in chunks:
    it.set_tensor(it.get_input_details()[0]["index"], c)
    it.invoke()
    ref.append(it.get_tensor(it.get_output_details()[0]["index"]).item())
steps = int(np.abs(probs_q.astype(int) - ref).max())
ref_detected = detection_time((np.array(ref) - q_out["zero_point"][0]) * q_out["scale"][0])
print(f"LiteRT CPU, same stream: {int(np.sum(probs_q == ref))} of {len(ref)} outputs equal, all within {steps} "
      f"quantization step(s) of {q_out['scale'][0]:.4f}; detected after "
      + (f"{ref_detected:.2f} s" if ref_detected else "never"))
assert steps <= 8 and detected == ref_detected
