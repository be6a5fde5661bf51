"""LLM benchmark (issue 29): gpuc against PyTorch (CUDA graphs) and llama.cpp's Vulkan backend on the
same random weights, Qwen2.5-shaped, int8 weights.

    python -m benchmarks.llm_bench --config qwen2.5-0.5b [--prefill 512] [--decode 64] [--json OUT]
    python -m benchmarks.llm_bench --config tiny --check          # the harness's own check (lavapipe is fine)

The model.  litert-torch is not installed where this runs (it needs torch and tensorflow; the GPU machine
reaches no package index), so `write_tflite` writes the graph that litert-torch's generative converter
writes for a Qwen2 decoder (the shared qwen_tiny_q8_kv128.tflite is the pattern, op for op), with
tests/helpers/builder.py: signatures `prefill_N` and `decode` over one set of weights (shared buffers);
inputs `tokens` [1, T] int32, `input_pos` [T] int32 and `kv_cache_{k,v}_{layer}` [1, KV, kv_heads,
head_dim] float32 threaded through DYNAMIC_UPDATE_SLICE at [0, input_pos[0], 0, 0]; decode outputs
`logits` [1, 1, vocab]; EMBEDDING_LOOKUP of an int8 (per-row scale) table, rotary embedding from
CAST(input_pos) * inv_freq with COS / SIN and the rotate-half form (SLICE, MUL, SUB, ADD, CONCATENATION),
a causal mask row by GATHER_ND from a constant table, STABLEHLO_COMPOSITE `odml.rms_norm` and
`odml.scaled_dot_product_attention` with their decomposition subgraphs (GQA through RESHAPE +
BROADCAST_TO, q and k each scaled by head_dim^-1/4, BATCH_MATMUL, mask ADD, SOFTMAX), int8 per-channel
FULLY_CONNECTED (fused qkv with bias; o; gate / up with LOGISTIC * MUL as SiLU; down) and the tied
embedding as the LM head.  The weights come from a seed and are never shipped (the model is built on the
machine that runs it).

What is measured (each peer on the same float weights: gpuc's int8 per-channel weights dequantized):
- gpuc: the bundle compiled once (time reported); prefill: one `prefill_N` run of N prompt tokens (median
  of --runs after a warm-up) -> tokens/s; decode (`decode_tok_s`): --decode greedy steps of the derived
  `decode_greedy` runner (the argmax on the device, submissions queued, each of --steps-per-submit steps in
  one command buffer, the 4-byte tokens read back: runtime/decode_loop.py; median of --runs after a
  warm-up; with a list of values each is timed, `decode_by_steps_per_submit`, the first one the headline;
  `gpu_ms_per_step`: the timestamps of one k-step submission / k, the GPU's share of ms/token),
  checked to give the host path's tokens (`greedy_same_tokens`); the host path
  (`decode_host_tok_s`): --decode steps of the `decode` runner, each feeding the numpy argmax of the
  previous logits (token in, logits out) -> tokens/s; time to first token: `generate` on an
  N+1-token prompt until it yields (prefill_N + one decode step + the host's sampling).
- PyTorch: transformers' Qwen2ForCausalLM with the same shapes and weights, bf16 (--torch-dtype), a
  StaticCache, the decode step compiled with torch.compile(mode="reduce-overhead") (CUDA graphs); prefill
  of the same N tokens (eager, and compiled when it compiles); decode tok/s over the same steps.
- llama.cpp Vulkan (the `cyllama-vulkan` wheel): a GGUF (`gguf` package) of the same weights in Q8_0,
  every layer offloaded; prefill of N tokens in one batch, decode steps with greedy sampling.
- The weight-read floor: the bytes a decode step must read (every int8 FC weight incl. the LM head, plus
  scales) / 3.35 TB/s (the H100 SXM's HBM3 bandwidth; --bandwidth to change).
Peers that are not installed are reported as skipped with the reason.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from benchmarks.timing import once, timed

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Config:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    rope_theta: float = 1e6
    eps: float = 1e-6


CONFIGS = {      # Qwen2.5 shapes (tied embeddings, qkv bias, GQA)
    "qwen2.5-0.5b": Config(151936, 896, 24, 14, 2, 64, 4864),
    "qwen2.5-1.5b": Config(151936, 1536, 28, 12, 2, 128, 8960),
    "tiny": Config(256, 64, 2, 4, 2, 16, 128),
}


# --- weights ---------------------------------------------------------------------------------------
def _q8_rows(w: np.ndarray):
    """Symmetric int8 per output row (as litert-torch's int8 weights): (int8, scales, dequantized)."""
    s = (np.abs(w).max(1) / 127).astype(np.float32)
    s[s == 0] = 1.0
    q = np.clip(np.round(w / s[:, None]), -127, 127).astype(np.int8)
    return q, s, q.astype(np.float32) * s[:, None]


def make_weights(cfg: Config, seed: int = 0) -> dict:
    """Random weights: name -> (int8, scales, dequantized float32) for matrices, float32 for the rest."""
    rng = np.random.default_rng(seed)
    d, hd = cfg.hidden, cfg.head_dim

    def mat(n, k):
        return _q8_rows(rng.standard_normal((n, k), np.float32) * np.float32(k ** -0.5))

    w = {"embed": _q8_rows(rng.standard_normal((cfg.vocab, d), np.float32) * np.float32(0.5)),
         "norm": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)}
    nq, nkv = cfg.heads * hd, cfg.kv_heads * hd
    for i in range(cfg.layers):
        w[f"{i}.qkv"] = mat(nq + 2 * nkv, d)
        w[f"{i}.qkv_b"] = (0.1 * rng.standard_normal(nq + 2 * nkv)).astype(np.float32)
        w[f"{i}.o"] = mat(d, nq)
        w[f"{i}.gate"] = mat(cfg.inter, d)
        w[f"{i}.up"] = mat(cfg.inter, d)
        w[f"{i}.down"] = mat(d, cfg.inter)
        w[f"{i}.attn_norm"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        w[f"{i}.ffn_norm"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    return w


def decode_weight_bytes(cfg: Config, w: dict) -> int:
    """Bytes one decode step must read: every int8 FC matrix (the tied LM head too) and its scales."""
    mats = [v for k, v in w.items() if isinstance(v, tuple) and k != "embed"] + [w["embed"]]
    return sum(q.nbytes + s.nbytes for q, s, _ in mats)


# --- the litert-torch-shaped .tflite ------------------------------------------------------------------
class _Assembly:
    """Subgraphs from several ModelBuilders in one model; constant buffers of 1 KiB and more that view
    the same memory are stored once (the weights shared by the signatures)."""

    def __init__(self):
        self.model = {"version": 3, "operator_codes": [], "subgraphs": [], "buffers": [{}],
                      "description": "gpuc llm_bench: litert-torch-shaped Qwen2 (random weights)"}
        self.seen = {}

    def add(self, mb, name: str) -> int:
        d = mb.model_dict()
        sg = d["subgraphs"][0]
        sg["name"] = name
        remap = {}
        for t in sg["tensors"]:
            b = t.get("buffer")
            if not b:
                continue
            if b not in remap:
                data = d["buffers"][b].get("data")
                key = (data.__array_interface__["data"][0], data.nbytes) if data is not None and data.nbytes >= 1024 else None
                if key is not None and key in self.seen:
                    remap[b] = self.seen[key]
                else:
                    self.model["buffers"].append(d["buffers"][b])
                    remap[b] = len(self.model["buffers"]) - 1
                    if key is not None:
                        self.seen[key] = remap[b]
            t["buffer"] = remap[b]
        codes = self.model["operator_codes"]
        for op in sg["operators"]:
            c = d["operator_codes"][op["opcode_index"]]
            if c not in codes:
                codes.append(c)
            op["opcode_index"] = codes.index(c)
        self.model["subgraphs"].append(sg)
        return len(self.model["subgraphs"]) - 1


def _composite(mb, name: str, inputs, outputs, sub: int) -> None:
    from flatbuffers import flexbuffers
    mb.operators.append({"opcode_index": mb.opcode("STABLEHLO_COMPOSITE"), "inputs": np.asarray(inputs, np.int32),
                         "outputs": np.asarray(outputs, np.int32),
                         "builtin_options2": ("StableHLOCompositeOptions",
                                              {"name": name, "decomposition_subgraph_index": sub,
                                               "composite_attributes": np.frombuffer(flexbuffers.Dumps({}), np.uint8)})})


VERSIONS = {"BROADCAST_TO": 2, "FULLY_CONNECTED": 5}     # as litert-torch's export declares them


class _G:
    """A few helpers over one ModelBuilder (tensor names made unique)."""

    def __init__(self, mb):
        self.mb, self.n = mb, 0

    def t(self, shape, dtype="float32"):
        self.n += 1
        return self.mb.tensor(f"t{self.n}", list(shape), dtype)

    def c(self, arr, quant=None):
        self.n += 1
        return self.mb.const(f"c{self.n}", arr, quant=quant)

    def i32(self, v):
        return self.c(np.asarray(v, np.int32))

    def op(self, op, ins, shape, dtype="float32", **opts):
        y = self.t(shape, dtype)
        self.mb.op(op, ins, [y], version=VERSIONS.get(op, 1), **opts)
        return y

    def reshape(self, x, shape, dtype="float32"):
        return self.op("RESHAPE", [x, self.i32(shape)], shape, dtype)

    def slice(self, x, begin, size):
        return self.op("SLICE", [x, self.i32(begin), self.i32(size)], size)


def _rms_norm_sub(cfg: Config, T: int):
    from tests.helpers.builder import ModelBuilder
    g = _G(ModelBuilder())
    x, w = g.mb.input("x", [1, T, cfg.hidden]), g.mb.input("w", [cfg.hidden])
    sq = g.op("MUL", [x, x], [1, T, cfg.hidden])
    ms = g.op("MEAN", [sq, g.i32([2])], [1, T], keep_dims=False)
    ms = g.op("ADD", [ms, g.c(np.float32(cfg.eps))], [1, T])
    r = g.op("RSQRT", [g.reshape(ms, [1, T, 1])], [1, T, 1])
    y = g.op("MUL", [g.op("MUL", [x, r], [1, T, cfg.hidden]), w], [1, T, cfg.hidden])
    g.mb.output(y)
    return g.mb


def _sdpa_sub(cfg: Config, T: int, kv: int):
    from tests.helpers.builder import ModelBuilder
    g = _G(ModelBuilder())
    H, KH, D = cfg.heads, cfg.kv_heads, cfg.head_dim
    q = g.mb.input("q", [1, T, H, D])
    k = g.mb.input("k", [1, kv, KH, D])
    v = g.mb.input("v", [1, kv, KH, D])
    mask = g.mb.input("mask", [1, 1, T, kv])
    perm = g.i32([0, 2, 1, 3])

    def heads(x):                                   # [1, kv, KH, D] -> [1, H, kv, D] (GQA)
        xt = g.op("TRANSPOSE", [x, perm], [1, KH, kv, D])
        x5 = g.reshape(xt, [1, KH, 1, kv, D])
        xb = g.op("BROADCAST_TO", [x5, g.i32([1, KH, H // KH, kv, D])], [1, KH, H // KH, kv, D])
        return g.reshape(xb, [1, H, kv, D])
    scale = g.c(np.float32(D ** -0.25))
    kh, vh = heads(k), heads(v)
    qt = g.op("TRANSPOSE", [g.op("MUL", [q, scale], [1, T, H, D]), perm], [1, H, T, D])
    kt = g.op("TRANSPOSE", [g.op("MUL", [kh, scale], [1, H, kv, D]), g.i32([0, 1, 3, 2])], [1, H, D, kv])
    s = g.op("BATCH_MATMUL", [g.reshape(qt, [H, T, D]), g.reshape(kt, [H, D, kv])], [H, T, kv])
    p = g.op("SOFTMAX", [g.op("ADD", [s, mask], [1, H, T, kv])], [1, H, T, kv], beta=1.0)
    o = g.op("BATCH_MATMUL", [g.reshape(p, [H, T, kv]), g.reshape(vh, [H, kv, D])], [H, T, D])
    y = g.op("TRANSPOSE", [g.reshape(o, [1, H, T, D]), perm], [1, T, H, D])
    g.mb.output(y)
    return g.mb


def _signature(cfg: Config, w: dict, T: int, kv: int, logits: bool, subs):
    """One signature subgraph (prefill_T or decode); `subs(kind, T)` gives a decomposition's index."""
    from tests.helpers.builder import ModelBuilder
    g = _G(ModelBuilder())
    mb = g.mb
    d, H, KH, D = cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim
    tokens = mb.input("tokens", [1, T], "int32")
    pos = mb.input("input_pos", [T], "int32")
    caches = {}
    for i in range(cfg.layers):
        for a in "kv":
            caches[a, i] = mb.input(f"kv_cache_{a}_{i}", [1, kv, KH, D])

    def q8(name):
        q, s, _ = w[name]
        return g.c(q, quant=(s, 0, 0))
    emb = q8("embed")
    h = g.op("EMBEDDING_LOOKUP", [g.reshape(tokens, [T], "int32"), emb], [T, d])
    h = g.reshape(h, [1, T, d])
    inv = (1.0 / cfg.rope_theta ** (np.arange(0, D, 2, dtype=np.float64) / D)).astype(np.float32)
    ang = g.op("MUL", [g.op("CAST", [g.reshape(pos, [1, T, 1], "int32")], [1, T, 1]), g.c(inv)], [1, T, D // 2])
    cos = g.reshape(g.op("COS", [ang], [1, T, D // 2]), [1, T, 1, D // 2])
    sin = g.reshape(g.op("SIN", [ang], [1, T, D // 2]), [1, T, 1, D // 2])
    table = np.where(np.arange(kv)[None, :] <= np.arange(kv)[:, None], 0, np.finfo(np.float32).min).astype(np.float32)
    mask = g.op("GATHER_ND", [g.c(table), g.reshape(pos, [T, 1], "int32")], [T, kv])
    mask = g.reshape(mask, [1, 1, T, kv])
    p0 = g.reshape(g.op("SLICE", [pos, g.i32([0]), g.i32([1])], [1], "int32"), [], "int32")
    zero = g.c(np.int32(0))
    start = g.op("PACK", [zero, p0, zero, zero], [4], "int32", values_count=4, axis=0)

    def rope(x, n):
        x1 = g.slice(x, [0, 0, 0, 0], [1, T, n, D // 2])
        x2 = g.slice(x, [0, 0, 0, D // 2], [1, T, n, D // 2])
        half = [1, T, n, D // 2]
        r1 = g.op("SUB", [g.op("MUL", [x1, cos], half), g.op("MUL", [x2, sin], half)], half)
        r2 = g.op("ADD", [g.op("MUL", [x2, cos], half), g.op("MUL", [x1, sin], half)], half)
        return g.op("CONCATENATION", [r1, r2], [1, T, n, D], axis=3)

    def norm(x, wn):
        y = g.t([1, T, d])
        _composite(mb, "odml.rms_norm", [x, g.c(w[wn])], [y], subs("rms", T))
        return y

    def fc(x, name, n, bias=None):
        return g.op("FULLY_CONNECTED", [x, q8(name), -1 if bias is None else g.c(w[bias])], [1, T, n],
                    keep_num_dims=True)
    outs = {}
    nq, nkv = H * D, KH * D
    for i in range(cfg.layers):
        qkv = fc(norm(h, f"{i}.attn_norm"), f"{i}.qkv", nq + 2 * nkv, f"{i}.qkv_b")
        q = rope(g.reshape(g.slice(qkv, [0, 0, 0], [1, T, nq]), [1, T, H, D]), H)
        k = rope(g.reshape(g.slice(qkv, [0, 0, nq], [1, T, nkv]), [1, T, KH, D]), KH)
        v = g.reshape(g.slice(qkv, [0, 0, nq + nkv], [1, T, nkv]), [1, T, KH, D])
        for a, x in (("k", k), ("v", v)):
            outs[a, i] = g.op("DYNAMIC_UPDATE_SLICE", [caches[a, i], x, start], [1, kv, KH, D])
        att = g.t([1, T, H, D])
        _composite(mb, "odml.scaled_dot_product_attention", [q, outs["k", i], outs["v", i], mask], [att],
                   subs("sdpa", T))
        h = g.op("ADD", [h, fc(g.reshape(att, [1, T, nq]), f"{i}.o", d)], [1, T, d])
        x = norm(h, f"{i}.ffn_norm")
        gate = fc(x, f"{i}.gate", cfg.inter)
        act = g.op("MUL", [gate, g.op("LOGISTIC", [gate], [1, T, cfg.inter])], [1, T, cfg.inter])
        h = g.op("ADD", [h, fc(g.op("MUL", [act, fc(x, f"{i}.up", cfg.inter)], [1, T, cfg.inter]), f"{i}.down", d)],
                 [1, T, d])
    names = {"inputs": {"tokens": tokens, "input_pos": pos}, "outputs": {}}
    for (a, i), t in caches.items():
        names["inputs"][f"kv_cache_{a}_{i}"] = t
    if logits:
        y = g.op("FULLY_CONNECTED", [norm(h, "norm"), emb, -1], [1, T, cfg.vocab], keep_num_dims=True)
        names["outputs"]["logits"] = y
        mb.output(y)
    for (a, i), t in outs.items():
        names["outputs"][f"kv_cache_{a}_{i}"] = t
        mb.output(t)
    return mb, names


def write_tflite(cfg: Config, w: dict, prefill: list[int], kv: int) -> bytes:
    """The litert-torch-shaped model: signatures prefill_N (N in `prefill`) and decode."""
    from tests.helpers.builder import write_root
    sigs = [(f"prefill_{n}", n, False) for n in prefill] + [("decode", 1, True)]
    order, builders = [], {}

    def subs(kind, T):
        if (kind, T) not in builders:
            builders[kind, T] = _rms_norm_sub(cfg, T) if kind == "rms" else _sdpa_sub(cfg, T, kv)
            order.append((kind, T))
        return len(sigs) + order.index((kind, T))
    asm, defs = _Assembly(), []
    for key, T, logits in sigs:
        mb, names = _signature(cfg, w, T, kv, logits, subs)
        gi = asm.add(mb, key)
        defs.append({"signature_key": key, "subgraph_index": gi,
                     "inputs": [{"name": k, "tensor_index": v} for k, v in names["inputs"].items()],
                     "outputs": [{"name": k, "tensor_index": v} for k, v in names["outputs"].items()]})
    for kind, T in order:
        asm.add(builders[kind, T], f"odml.{'rms_norm' if kind == 'rms' else 'scaled_dot_product_attention'}.impl_{T}")
    asm.model["signature_defs"] = defs
    size = 1 << 20
    size += sum(len(b.get("data", ())) for b in asm.model["buffers"])
    return write_root("Model", asm.model, file_identifier=b"TFL3", size=size)


# --- peers ------------------------------------------------------------------------------------------
def _median(fn, runs: int) -> float:
    """Median seconds of `runs` calls after one untimed call."""
    return timed(fn, runs, warmup_s=0)["median_ms"] / 1e3


def dispatch_counts(bundle: bytes) -> dict:
    """Per signature: dispatches of one call and the barriers the runtime records between them."""
    from gpuc.runtime import hazards
    from gpuc.runtime.bundle import read_bundle
    b = read_bundle(bundle)
    return {sb.signature: {"dispatches": len(sb.dispatches), "barriers": sum(hazards.plan(hazards.arena_access(sb)))}
            for sb in [b] + b.signatures}


def _gpu_ms_per_step(greedy, pre, feed, token: int, pos: int, k: int):
    """GPU time (timestamps) of one submission of k decode_greedy steps, per step (None: no timestamps)."""
    from gpuc.runtime import decode_loop
    pre.run(feed)
    decode_loop.seed(greedy, token, pos)
    greedy.run_repeated_async(k).wait()
    ms = greedy.last_gpu_ms
    return None if ms is None else ms / k


def bench_gpuc(model: bytes, cfg: Config, kv: int, n_prefill: int, n_decode: int, runs: int, device=None,
               disable_passes=(), steps_per_submit=()) -> dict:
    import gpuc
    from gpuc.runtime import decode_loop
    ks = list(steps_per_submit) or [decode_loop.STEPS_PER_SUBMIT]
    bundle, compile_s = once(lambda: gpuc.compile(model, disable_passes=list(disable_passes)))
    res = {"compile_s": compile_s, "bundle_bytes": len(bundle), "disable_passes": list(disable_passes),
           "per_call": dispatch_counts(bundle)}
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, cfg.vocab, n_prefill + 1).astype(np.int32)
    with gpuc.load(bundle, **({"device": device} if device else {})) as m:
        res["device"] = m.device.name
        pre, dec = m.signature(f"prefill_{n_prefill}"), m.signature("decode")
        feed = {"tokens": prompt[None, :n_prefill], "input_pos": np.arange(n_prefill, dtype=np.int32)}
        res["prefill_s"] = _median(lambda: pre.run(feed), runs)
        res["prefill_tok_s"] = n_prefill / res["prefill_s"]
        m.reset_state()

        def steps():
            tok, toks = int(prompt[-1]), []
            for s in range(n_decode):
                out = dec.run({"tokens": np.array([[tok]], np.int32), "input_pos": np.array([n_prefill + s], np.int32)})
                tok = int(np.argmax(out[0].reshape(-1)))
                toks.append(tok)
            return toks
        steps()                                              # warm-up
        pre.run(feed)
        host_tokens, host_s = once(steps)
        res["decode_host_s_per_tok"] = host_s / n_decode
        res["decode_host_tok_s"] = 1 / res["decode_host_s_per_tok"]
        greedy = decode_loop.greedy_runner(m)
        if greedy is None:                                   # no decode_greedy signature: the host figure
            res["decode_s_per_tok"], res["decode"] = res["decode_host_s_per_tok"], "host greedy (no decode_greedy)"
        else:
            by_k = res["decode_by_steps_per_submit"] = {}
            for k in ks:
                def device_steps():
                    pre.run(feed)                            # the same cache as the host steps had
                    return once(lambda: list(decode_loop.run(greedy, int(prompt[-1]), n_prefill, n_decode,
                                                             steps_per_submit=k)))
                device_steps()                               # warm-up (records the k-step command buffers)
                timed_runs = [device_steps() for _ in range(max(1, runs))]
                dev_s = float(np.median([t for _, t in timed_runs]))
                by_k[str(k)] = {"s_per_tok": dev_s / n_decode, "tok_s": n_decode / dev_s,
                                "same_tokens": all(toks == host_tokens for toks, _ in timed_runs),
                                "gpu_ms_per_step": _gpu_ms_per_step(greedy, pre, feed, int(prompt[-1]), n_prefill, k)}
            res["steps_per_submit"] = ks[0]
            res["decode_s_per_tok"] = by_k[str(ks[0])]["s_per_tok"]
            res["decode"] = (f"decode_greedy: argmax on the device, {ks[0]} steps per submission, submissions queued, "
                             "4 bytes read back per token")
            res["greedy_same_tokens"] = all(r["same_tokens"] for r in by_k.values())
        res["decode_tok_s"] = 1 / res["decode_s_per_tok"]

        def first_token():
            gen = m.generate([int(x) for x in prompt], 1)
            next(gen)
            gen.close()
        res["ttft_s"] = _median(first_token, max(2, runs // 2))
    return res


def bench_torch(cfg: Config, w: dict, kv: int, n_prefill: int, n_decode: int, runs: int, dtype: str) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device"}
    dt = getattr(torch, dtype)
    hc = Qwen2Config(vocab_size=cfg.vocab, hidden_size=cfg.hidden, intermediate_size=cfg.inter,
                     num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
                     head_dim=cfg.head_dim, rope_theta=cfg.rope_theta, rms_norm_eps=cfg.eps, tie_word_embeddings=True,
                     max_position_embeddings=kv, use_sliding_window=False)
    model = Qwen2ForCausalLM(hc).eval()
    nq, nkv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    sd = {"model.embed_tokens.weight": w["embed"][2], "model.norm.weight": w["norm"]}
    for i in range(cfg.layers):
        p, qkv, b = f"model.layers.{i}.", w[f"{i}.qkv"][2], w[f"{i}.qkv_b"]
        for n, lo, hi in (("q", 0, nq), ("k", nq, nq + nkv), ("v", nq + nkv, nq + 2 * nkv)):
            sd[p + f"self_attn.{n}_proj.weight"], sd[p + f"self_attn.{n}_proj.bias"] = qkv[lo:hi], b[lo:hi]
        sd[p + "self_attn.o_proj.weight"] = w[f"{i}.o"][2]
        for n in ("gate", "up", "down"):
            sd[p + f"mlp.{n}_proj.weight"] = w[f"{i}.{n}"][2]
        sd[p + "input_layernorm.weight"], sd[p + "post_attention_layernorm.weight"] = w[f"{i}.attn_norm"], w[f"{i}.ffn_norm"]
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()},
                                                strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"state dict mismatch: missing {missing[:4]}, unexpected {unexpected[:4]}")
    model.tie_weights()
    model = model.to("cuda", dt)
    from transformers import StaticCache
    try:
        cache = StaticCache(config=hc, max_cache_len=kv, device="cuda", dtype=dt, max_batch_size=1)
    except TypeError:
        cache = StaticCache(config=hc, max_cache_len=kv)
    rng = np.random.default_rng(1)
    prompt = torch.tensor(rng.integers(0, cfg.vocab, n_prefill + 1)[None], device="cuda")
    res = {"dtype": dtype, "device": torch.cuda.get_device_name()}

    def sync():
        torch.cuda.synchronize()

    def forward(ids, pos):
        """One forward over the cache; `pos` a CUDA tensor of the positions (no Python ints: no
        recompilation per step); logits of the last position only, as gpuc's signatures give them."""
        return model(input_ids=ids, position_ids=pos[None], cache_position=pos, past_key_values=cache,
                     use_cache=True, logits_to_keep=1).logits

    torch.set_grad_enabled(False)
    pre_pos = torch.arange(n_prefill, device="cuda")

    def prefill():
        cache.reset()
        out = forward(prompt[:, :n_prefill], pre_pos)
        sync()
        return out
    res["prefill_s"] = _median(prefill, runs)
    res["prefill_tok_s"] = n_prefill / res["prefill_s"]
    steps_pos = [torch.tensor([n_prefill + s], device="cuda") for s in range(n_decode)]

    def decode_steps(n, step):
        tok = prompt[:, -1:]
        for s in range(n):
            tok = step(tok, steps_pos[s])[:, -1:].argmax(-1)
        sync()
        return tok
    step = torch.compile(forward, mode="reduce-overhead", fullgraph=True)
    prefill()
    try:
        decode_steps(min(n_decode, 8), step)                 # compile + capture the CUDA graphs
        res["compiled"] = "fullgraph"
    except Exception as e:                                   # graph breaks: CUDA graphs per piece
        res["compiled"] = f"with graph breaks ({type(e).__name__}: {str(e)[:200]})"
        torch._dynamo.reset()
        step = torch.compile(forward, mode="reduce-overhead")
        prefill()
        decode_steps(min(n_decode, 8), step)
    prefill()
    res["decode_s_per_tok"] = once(decode_steps, n_decode, step)[1] / n_decode
    res["decode_tok_s"] = 1 / res["decode_s_per_tok"]
    res["ttft_s"] = _median(lambda: (prefill(), decode_steps(1, step)), max(2, runs // 2))
    res["decode"] = "torch.compile(mode='reduce-overhead') on the StaticCache step (CUDA graphs)"
    return res


def write_gguf(cfg: Config, w: dict, path: str, kv: int) -> None:
    """A llama.cpp GGUF (arch qwen2) of the same weights, matrices in Q8_0, a placeholder SPM vocabulary."""
    import gguf
    from gguf.quants import quantize
    wr = gguf.GGUFWriter(path, "qwen2")
    wr.add_context_length(kv)
    wr.add_embedding_length(cfg.hidden)
    wr.add_block_count(cfg.layers)
    wr.add_feed_forward_length(cfg.inter)
    wr.add_head_count(cfg.heads)
    wr.add_head_count_kv(cfg.kv_heads)
    wr.add_rope_freq_base(cfg.rope_theta)
    wr.add_layer_norm_rms_eps(cfg.eps)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    wr.add_tokenizer_model("llama")
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    toks += [f"t{i}" for i in range(cfg.vocab - len(toks))]
    types = [2, 3, 3] + [6] * 256 + [1] * (cfg.vocab - 259)
    wr.add_token_list(toks[:cfg.vocab])
    wr.add_token_scores([0.0] * cfg.vocab)
    wr.add_token_types(types[:cfg.vocab])
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    q8 = gguf.GGMLQuantizationType.Q8_0

    def mat(name, a):
        wr.add_tensor(name, quantize(np.ascontiguousarray(a, np.float32), q8), raw_dtype=q8)
    nq, nkv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    mat("token_embd.weight", w["embed"][2])
    wr.add_tensor("output_norm.weight", w["norm"])
    for i in range(cfg.layers):
        qkv, b = w[f"{i}.qkv"][2], w[f"{i}.qkv_b"]
        for n, lo, hi in (("q", 0, nq), ("k", nq, nq + nkv), ("v", nq + nkv, nq + 2 * nkv)):
            mat(f"blk.{i}.attn_{n}.weight", qkv[lo:hi])
            wr.add_tensor(f"blk.{i}.attn_{n}.bias", np.ascontiguousarray(b[lo:hi]))
        mat(f"blk.{i}.attn_output.weight", w[f"{i}.o"][2])
        for n in ("gate", "up", "down"):
            mat(f"blk.{i}.ffn_{n}.weight", w[f"{i}.{n}"][2])
        wr.add_tensor(f"blk.{i}.attn_norm.weight", w[f"{i}.attn_norm"])
        wr.add_tensor(f"blk.{i}.ffn_norm.weight", w[f"{i}.ffn_norm"])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def bench_llamacpp(cfg: Config, w: dict, kv: int, n_prefill: int, n_decode: int, runs: int, tmp: str,
                   allow_cpu: bool = False) -> dict:
    import cyllama.llama.llama_cpp as cy
    path = os.path.join(tmp, "model_q8_0.gguf")
    res = {"gguf_s": once(write_gguf, cfg, w, path, kv)[1], "gguf_bytes": os.path.getsize(path)}
    cy.disable_logging()
    cy.ggml_backend_load_all()
    res["devices"] = cy.ggml_backend_dev_info()
    if not any(d.get("type") == "GPU" for d in res["devices"]) and not allow_cpu:
        return dict(res, error=f"ggml found no GPU device (Vulkan), only {res['devices']}")
    mp = cy.LlamaModelParams()
    mp.n_gpu_layers = 999
    model = cy.LlamaModel(path, mp)
    cp = cy.LlamaContextParams()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = kv, n_prefill, n_prefill
    ctx = cy.LlamaContext(model, cp)
    sp = cy.LlamaSamplerChainParams()
    smp = cy.LlamaSampler(sp)
    smp.add_greedy()
    rng = np.random.default_rng(1)
    prompt = [int(x) for x in rng.integers(3, cfg.vocab, n_prefill + 1)]

    def prefill():
        ctx.kv_cache_clear()
        ctx.decode(cy.llama_batch_get_one(prompt[:n_prefill], 0))
        ctx.synchronize()
    res["prefill_s"] = _median(prefill, runs)
    res["prefill_tok_s"] = n_prefill / res["prefill_s"]

    def decode_steps(n):
        tok = prompt[-1]
        for s in range(n):
            ctx.decode(cy.llama_batch_get_one([tok], n_prefill + s))
            tok = smp.sample(ctx, -1)
        ctx.synchronize()
    prefill()
    decode_steps(min(n_decode, 8))
    prefill()
    res["decode_s_per_tok"] = once(decode_steps, n_decode)[1] / n_decode
    res["decode_tok_s"] = 1 / res["decode_s_per_tok"]
    res["ttft_s"] = _median(lambda: (prefill(), decode_steps(1)), max(2, runs // 2))
    ctx.close() if hasattr(ctx, "close") else None
    return res


def _peer(name: str, fn, *args) -> dict:
    try:
        return fn(*args)
    except ImportError as e:
        return {"skipped": f"not installed: {e}"}
    except Exception as e:                              # a peer failing must not hide the others
        return {"error": f"{type(e).__name__}: {e}"}


# --- the harness's own check ------------------------------------------------------------------------
def check(cfg: Config, w: dict, model: bytes, n_prefill: int, kv: int, steps: int = 4) -> dict:
    """gpuc's decode logits and greedy tokens against LiteRT's signature runners on the generated model."""
    import gpuc
    from ai_edge_litert.interpreter import Interpreter

    from gpuc.runtime import decode_loop
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, cfg.vocab, n_prefill).astype(np.int32)
    it = Interpreter(model_content=model)
    pre, dec = it.get_signature_runner(f"prefill_{n_prefill}"), it.get_signature_runner("decode")
    cache = {k: np.zeros(v["shape"], np.float32) for k, v in dec.get_input_details().items() if k.startswith("kv")}
    out = pre(tokens=prompt[None], input_pos=np.arange(n_prefill, dtype=np.int32), **cache)
    cache = {k: out[k] for k in cache}
    ref, tok = [], int(prompt[-1])
    for s in range(steps):
        o = dec(tokens=np.array([[tok]], np.int32), input_pos=np.array([n_prefill + s], np.int32), **cache)
        cache = {k: o[k] for k in cache}
        ref.append(o["logits"].reshape(-1))
        tok = int(np.argmax(ref[-1]))
    from gpuc.runtime.bundle import read_bundle
    bundle = gpuc.compile(model)
    b = read_bundle(bundle)
    cpu_nodes = {s.signature: s.stats["cpu_nodes"] for s in [b] + b.signatures}
    with gpuc.load(bundle) as m:
        m.signature(f"prefill_{n_prefill}").run({"tokens": prompt[None], "input_pos": np.arange(n_prefill, dtype=np.int32)})
        d, got, tok = m.signature("decode"), [], int(prompt[-1])
        for s in range(steps):
            got.append(d.run({"tokens": np.array([[tok]], np.int32), "input_pos": np.array([n_prefill + s], np.int32)})[0].reshape(-1))
            tok = int(np.argmax(got[-1]))
        m.signature(f"prefill_{n_prefill}").run({"tokens": prompt[None], "input_pos": np.arange(n_prefill, dtype=np.int32)})
        greedy = decode_loop.greedy_runner(m)               # the same steps with the argmax on the device
        device = None if greedy is None else list(decode_loop.run(greedy, int(prompt[-1]), n_prefill, steps,
                                                                  steps_per_submit=max(1, steps - 1)))  # 1, then the rest at once
    ref, got = np.array(ref), np.array(got)
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    same = bool((ref.argmax(-1) == got.argmax(-1)).all())
    same_device = device == [int(t) for t in ref.argmax(-1)]
    return {"steps": steps, "rel_err_vs_litert": err, "same_tokens": same, "device_greedy_same_tokens": same_device,
            "cpu_nodes": cpu_nodes, "ok": bool(same and same_device and err < 2e-3 and not any(cpu_nodes.values()))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="qwen2.5-0.5b", choices=sorted(CONFIGS))
    ap.add_argument("--prefill", type=int, default=512, help="prompt tokens of the prefill signature")
    ap.add_argument("--decode", type=int, default=64, help="decode steps timed")
    ap.add_argument("--kv", type=int, default=1024, help="KV cache length")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bandwidth", type=float, default=3.35e12, help="bytes/s of the weight-read floor")
    ap.add_argument("--peers", default="gpuc,torch,llamacpp", help="comma list of gpuc, torch, llamacpp")
    ap.add_argument("--torch-dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--device", default=None, help="gpuc device name filter (e.g. NVIDIA)")
    ap.add_argument("--steps-per-submit", default="", metavar="K[,K...]",
                    help="gpuc's greedy decode steps per submission (default: decode_loop.STEPS_PER_SUBMIT); a "
                         "list times each, the first one reported as decode tok/s (e.g. 4,1)")
    ap.add_argument("--disable-pass", action="append", default=[], metavar="NAME",
                    help="compile gpuc's bundle without this pass (A/B, e.g. fuse_q8_gemv); repeatable")
    ap.add_argument("--llamacpp-cpu", action="store_true",
                    help="let the llama.cpp peer run on ggml's CPU backend when it finds no GPU (harness tests only)")
    ap.add_argument("--save-model", default=None, help="also write the generated .tflite here")
    ap.add_argument("--check", action="store_true", help="check gpuc against LiteRT on the generated model and exit")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    cfg = CONFIGS[a.config]
    if a.prefill + a.decode + 1 > a.kv:
        ap.error(f"--prefill + --decode + 1 must fit --kv {a.kv}")
    try:
        ks = [int(k) for k in a.steps_per_submit.split(",") if k.strip()]
    except ValueError:
        ks = [0]
    if any(k < 1 for k in ks):
        ap.error(f"--steps-per-submit {a.steps_per_submit!r}: positive integers, comma-separated")

    def build():
        w = make_weights(cfg, a.seed)
        return w, write_tflite(cfg, w, [a.prefill], a.kv)
    (w, model), build_s = once(build)
    res = {"config": a.config, "shape": asdict(cfg), "prefill_tokens": a.prefill, "decode_steps": a.decode,
           "kv": a.kv, "model_bytes": len(model), "build_s": build_s}
    if a.save_model:
        Path(a.save_model).write_bytes(model)
    if a.check:
        res["check"] = check(cfg, w, model, a.prefill, a.kv)
        print(json.dumps(res, indent=1))
        return 0 if res["check"]["ok"] else 1
    wb = decode_weight_bytes(cfg, w)
    res["floor"] = {"weight_bytes": wb, "bandwidth": a.bandwidth, "decode_s_per_tok": wb / a.bandwidth,
                    "decode_tok_s": a.bandwidth / wb}
    peers = a.peers.split(",")
    if "gpuc" in peers:
        res["gpuc"] = _peer("gpuc", bench_gpuc, model, cfg, a.kv, a.prefill, a.decode, a.runs, a.device,
                            a.disable_pass, ks)
    del model
    if "torch" in peers:
        res["torch"] = _peer("torch", bench_torch, cfg, w, a.kv, a.prefill, a.decode, a.runs, a.torch_dtype)
    if "llamacpp" in peers:
        with tempfile.TemporaryDirectory() as tmp:
            res["llamacpp_vulkan"] = _peer("llamacpp", bench_llamacpp, cfg, w, a.kv, a.prefill, a.decode, a.runs, tmp,
                                           a.llamacpp_cpu)
    print(f"{a.config}: prefill {a.prefill} tokens, {a.decode} decode steps, KV {a.kv}")
    print(f"{'peer':18} {'prefill tok/s':>14} {'decode tok/s':>13} {'ms/token':>9} {'TTFT ms':>9}")
    for name in ("gpuc", "torch", "llamacpp_vulkan", "floor"):
        r = res.get(name)
        if not r:
            continue
        if "decode_tok_s" not in r:
            print(f"{name:18} {r.get('skipped') or r.get('error')}")
            continue
        pf = f"{r['prefill_tok_s']:14.0f}" if "prefill_tok_s" in r else f"{'':14}"
        tt = f"{r['ttft_s'] * 1e3:9.1f}" if "ttft_s" in r else ""
        label = f"{name} ({r['steps_per_submit']}/submit)" if "steps_per_submit" in r else name
        print(f"{label:18} {pf} {r['decode_tok_s']:13.1f} {r['decode_s_per_tok'] * 1e3:9.3f} {tt}")
        for k, d in r.get("decode_by_steps_per_submit", {}).items():
            gpu = "" if d.get("gpu_ms_per_step") is None else f", GPU {d['gpu_ms_per_step']:.3f} ms/step"
            print(f"{'  (' + k + ' steps/submit)':18} {'':14} {d['tok_s']:13.1f} {d['s_per_tok'] * 1e3:9.3f}"
                  f"   device-greedy tokens == host: {d['same_tokens']}{gpu}")
        if "decode_host_tok_s" in r:
            print(f"{'  (host greedy)':18} {'':14} {r['decode_host_tok_s']:13.1f} {r['decode_host_s_per_tok'] * 1e3:9.3f}"
                  f"   device-greedy tokens == host: {r.get('greedy_same_tokens')}")
    for sig, c in (res.get("gpuc") or {}).get("per_call", {}).items():
        print(f"gpuc {sig}: {c['dispatches']} dispatches, {c['barriers']} barriers a call")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
