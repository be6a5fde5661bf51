"""Regenerate the TensorFlow-converted test models of tests/compiler/test_tf_converted_shapes.py (issue 34).

Needs `tensorflow-cpu` (not a gpuc dependency; the tests read the committed .tflite files, so CI does
not need TensorFlow).  Each model takes a float32 signal whose input signature has a None (-1)
dimension, so that the converter writes the shape arithmetic of tf.signal / tf.tensordot / tf.shape
into the graph and [1, 1]-style placeholder shapes for the tensors downstream:

  tf_stft_mel.tflite       [None, 4000]: stft (256 / 128 / 256) -> abs -> tensordot with a 129x16 mel
                           matrix -> log (output "logmel") -> average pool -> mean over frames ->
                           dense head (output "logits", 4)
  tf_frame_pad.tflite      [None, 1000]: tf.signal.frame(64, 48, pad_end=True) times a window,
                           summed per frame
  tf_shape_reshape.tflite  [None, 256]:  reshape [b, n] -> [b, n / 4, 4] by tf.shape, max over the 4
  tf_shape_reshape_len.tflite [1, None]: the same with the length unknown (the file's shape, [1, 1], is
                           too short for it: LiteRT fails there too)

Run:  python tests/data/gen_dynamic_shape_models.py   (writes next to this file)
"""
from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))


def mel_matrix(bins: int, mels: int) -> np.ndarray:
    rng = np.random.default_rng(34)
    m = np.abs(rng.standard_normal((bins, mels))).astype(np.float32)
    return m / m.sum(axis=0, keepdims=True)


def stft_mel(n: int = 4000):
    mel = tf.constant(mel_matrix(129, 16))
    rng = np.random.default_rng(35)
    w = tf.constant(rng.standard_normal((16, 4)).astype(np.float32) * 0.5)
    b = tf.constant(rng.standard_normal((4,)).astype(np.float32) * 0.1)

    @tf.function(input_signature=[tf.TensorSpec([None, n], tf.float32, name="audio")])
    def f(x):
        spec = tf.signal.stft(x, frame_length=256, frame_step=128, fft_length=256)
        mag = tf.abs(spec)                                         # [b, frames, 129]
        m = tf.tensordot(mag, mel, axes=1)                         # [b, frames, 16]
        logm = tf.math.log(m + 1e-3)
        pooled = tf.nn.avg_pool2d(tf.expand_dims(logm, -1), ksize=[2, 1], strides=[2, 1], padding="VALID")
        feat = tf.reduce_mean(tf.squeeze(pooled, -1), axis=1)             # [b, 16]
        return {"logmel": logm, "logits": tf.matmul(feat, w) + b}
    return f


def frame_pad(n: int = 1000):
    win = tf.constant(np.hanning(64).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, n], tf.float32, name="signal")])
    def f(x):
        frames = tf.signal.frame(x, frame_length=64, frame_step=48, pad_end=True)   # [b, frames, 64]
        return tf.reduce_sum(frames * win, axis=-1)
    return f


def shape_reshape(sig=(None, 256)):
    @tf.function(input_signature=[tf.TensorSpec(list(sig), tf.float32, name="x")])
    def f(x):
        s = tf.shape(x)
        y = tf.reshape(x, tf.stack([s[0], s[1] // 4, 4]))
        return tf.reduce_max(y, axis=-1) * 2.0
    return f


def convert(f) -> bytes:
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return conv.convert()


def main():
    for name, f in (("tf_stft_mel", stft_mel()), ("tf_frame_pad", frame_pad()),
                    ("tf_shape_reshape", shape_reshape()), ("tf_shape_reshape_len", shape_reshape((1, None)))):
        data = convert(f)
        path = os.path.join(HERE, name + ".tflite")
        with open(path, "wb") as fh:
            fh.write(data)
        print(f"{path}: {len(data)} bytes")


if __name__ == "__main__":
    main()
