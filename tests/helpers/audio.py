"""A builder model with an audio-style front-end whose input length is a dynamic dimension
(issue 16: shape specialization)."""
import numpy as np

from helpers.builder import ModelBuilder

IN_NAME = "serving_default_audio:0"
FL, HOP = 64, 32


def audio_frontend(n: int = 1000) -> bytes:
    """[1, N] (signature [-1, -1]) -> frames of the signal times a window: SHAPE, STRIDED_SLICE,
    SUB / FLOOR_DIV / MUL / ADD, PACK, STRIDED_SLICE with that end, RESHAPE, RANGE, GATHER."""
    t2_ = (n - FL) // HOP
    nf, used = t2_ + 1, t2_ * HOP + FL
    mb = ModelBuilder()
    i32 = np.int32
    x = mb.input(IN_NAME, [1, n], shape_signature=[-1, -1])
    s = mb.tensor("shape", [2], "int32")
    mb.op("SHAPE", [x], [s], out_type=2)
    n_t = mb.tensor("n", [], "int32")
    mb.op("STRIDED_SLICE", [s, mb.const("b1", np.array([1], i32)), mb.const("e1", np.array([2], i32)),
                            mb.const("s1", np.array([1], i32))], [n_t], shrink_axis_mask=1)
    t1 = mb.tensor("n_minus_fl", [], "int32")
    mb.op("SUB", [n_t, mb.const("fl", np.array(FL, i32))], [t1])
    t2 = mb.tensor("hops", [], "int32")
    hop = mb.const("hop", np.array(HOP, i32))
    mb.op("FLOOR_DIV", [t1, hop], [t2])
    nf_t = mb.tensor("n_frames", [], "int32")
    mb.op("ADD", [t2, mb.const("one", np.array(1, i32))], [nf_t])
    t3 = mb.tensor("hops_len", [], "int32")
    mb.op("MUL", [t2, hop], [t3])
    used_t = mb.tensor("used", [], "int32")
    mb.op("ADD", [t3, mb.const("fl2", np.array(FL, i32))], [used_t])
    end = mb.tensor("end", [2], "int32")
    mb.op("PACK", [mb.const("one2", np.array(1, i32)), used_t], [end], values_count=2, axis=0)
    trimmed = mb.tensor("trimmed", [1, used], shape_signature=[-1, -1])
    mb.op("STRIDED_SLICE", [x, mb.const("b2", np.array([0, 0], i32)), end, mb.const("s2", np.array([1, 1], i32))],
          [trimmed])
    sig = mb.tensor("signal", [used], shape_signature=[-1])
    mb.op("RESHAPE", [trimmed, mb.const("flat", np.array([-1], i32))], [sig])
    lim = mb.tensor("limit", [], "int32")
    mb.op("MUL", [nf_t, hop], [lim])
    starts = mb.tensor("starts", [nf], "int32", shape_signature=[-1])
    mb.op("RANGE", [mb.const("zero", np.array(0, i32)), lim, hop], [starts])
    col = mb.tensor("starts_col", [nf, 1], "int32", shape_signature=[-1, 1])
    mb.op("RESHAPE", [starts, mb.const("colshape", np.array([-1, 1], i32))], [col])
    offs = mb.tensor("offsets", [FL], "int32")
    mb.op("RANGE", [mb.const("zero2", np.array(0, i32)), mb.const("fl3", np.array(FL, i32)),
                    mb.const("one3", np.array(1, i32))], [offs])
    idx = mb.tensor("indices", [nf, FL], "int32", shape_signature=[-1, FL])
    mb.op("ADD", [col, offs], [idx])
    frames = mb.tensor("frames", [nf, FL], shape_signature=[-1, FL])
    mb.op("GATHER", [sig, idx], [frames], axis=0)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(FL) / FL)).astype(np.float32)
    y = mb.tensor("windowed", [nf, FL], shape_signature=[-1, FL])
    mb.op("MUL", [frames, mb.const("window", window)], [y])
    mb.output(y)
    return mb.finish()
