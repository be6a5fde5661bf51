"""Rebuild the tiny litert-torch generative exports in this directory and their LiteRT references.

Each fixture is `NAME.tflite` (litert-torch's `convert_to_tflite`: signatures `prefill_8` and `decode`,
the KV cache as inputs/outputs `kv_cache_{k,v}_{layer}`) and `NAME.ref.npz` from LiteRT CPU's
signature runners (XNNPACK, ai-edge-litert):
  - `prompt` [1, 8] int32;
  - `decode_logits` [8, V], `decode_tokens` [8]: `prefill_8` over the prompt at positions 0..7 from
    zero caches, then 8 greedy `decode` steps, the first fed the prompt's last token at position 8,
    each next one the previous argmax (as ../shared/models/llm/ref/*.greedy.npz);
  - `generate_tokens` [8]: the protocol of gpuc's `generate` (runtime/generate.py): the prompt but its
    last token prefilled (padded with token 0 to 8), then greedy steps from the last token at position 7.
Models are the examples' architectures from tiny configurations (seeded random weights) that keep
what sets each apart: GQA ratio (one KV head included), rope scaling, tied or untied embeddings, q/k norms,
per-layer head counts, qkv bias, attention width unlike the embedding width; and export options: float
weights, int4 blocks, the mask as an input.  OPTIONS lists more export options (weight-only int8, fp16,
transposed cache, prefill logits, two prefill lengths, decode batch 2, the example's own 2048-wide
configuration, the converter's default six prefill lengths with a 1280-position cache), built only when
named.  When last checked gpuc gave LiteRT's tokens on all of them, logits
within 1e-4 of max|logit| but for one step of 8 on tiny_llama_mask_q8 and llama_fake (7.5e-3: one int8
activation rounding step); decode batch 2 compiles, but its reference needs batch-2 caches this script does
not build, and generate refuses it by name.

litert-torch needs torch and tensorflow, which the test environment lacks, so this runs in its own
venv (Python 3.11):
    python3.11 -m venv /tmp/lt && /tmp/lt/bin/pip install litert-torch tensorflow-cpu ai-edge-litert
    /tmp/lt/bin/python tests/data/llm/make_llm_fixtures.py [NAME ...]      # from the repo root
With no NAME every fixture this script knows is rebuilt; LLM_FIXTURES_OUT=DIR writes elsewhere (e.g. to try
the export options in OPTIONS without adding them to the test).  Keep each .tflite under ~300 KB.
"""
from __future__ import annotations

import os
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

HERE = Path(os.environ.get("LLM_FIXTURES_OUT") or Path(__file__).resolve().parent)   # where they are written
PREFILL, KV, STEPS = 8, 64, 8


def _small(cfg, *, vocab=128, layers=2, emb=64, heads=4, head_dim=16, groups=1, inter=128, max_seq=256):
    """Shrink a config in place (every block config)."""
    cfg.vocab_size, cfg.num_layers, cfg.embedding_dim, cfg.max_seq_len = vocab, layers, emb, max_seq
    blocks = cfg.block_configs if isinstance(cfg.block_configs, list) else [cfg.block_configs]
    for b in blocks:
        b.attn_config.num_heads, b.attn_config.head_dim = heads, head_dim
        b.attn_config.num_query_groups = groups
        b.ff_config.intermediate_size = inter
    return cfg


def llama(**small):
    from litert_torch.generative.examples.llama import llama as m
    cfg = _small(m.get_1b_model_config(), **{"heads": 8, "head_dim": 8, "groups": 2, **small})  # GQA 4:1, tied
    # Llama-3.2's scaled rope: head_dim 8 at base 500000 puts one frequency in each of the three
    # bands (kept, interpolated, divided by the factor) of the 8192-token original context.
    assert cfg.build_rope.keywords["max_seq_len"] == 8192
    return m.Llama, cfg


def llama_fake():
    from litert_torch.generative.examples.llama import llama as m
    return m.Llama, m.get_fake_model_config()


def tiny_llama(**small):
    from litert_torch.generative.examples.tiny_llama import tiny_llama as m
    cfg = _small(m.get_model_config(), **{"heads": 8, "head_dim": 8, "groups": 1, **small})  # GQA 8:1, untied
    return m.TinyLlama, cfg


def smollm():
    from litert_torch.generative.examples.smollm import smollm as m
    cfg = _small(m.get_model_config(), heads=9, head_dim=8, groups=3)      # 9 heads: 72 wide on a 64 embedding
    return m.SmolLM, cfg


def smollm2():
    from litert_torch.generative.examples.smollm import smollm as m
    cfg = _small(m.get_model_config_v2(), heads=9, head_dim=8, groups=3)
    return m.SmolLM2, cfg


def amd_llama_135m():
    from litert_torch.generative.examples.amd_llama_135m import amd_llama_135m as m
    cfg = _small(m.get_model_config(), heads=4, head_dim=16, groups=4)     # MHA, untied
    return m.AmdLlama, cfg


def openelm():
    from litert_torch.generative.examples.openelm import openelm as m
    cfg = m.get_model_config()
    cfg.block_configs = cfg.block_configs[:2]
    _small(cfg, emb=64, heads=3, head_dim=16, groups=3, inter=96)
    b1 = cfg.block_configs[1].attn_config                                    # per-layer head counts
    b1.num_heads, b1.num_query_groups = 4, 2
    return m.OpenELM, cfg


def hammer():
    from litert_torch.generative.examples.hammer import hammer as m
    cfg = _small(m.get_1_5b_model_config(), emb=16, heads=6, head_dim=16, groups=1, inter=64)  # qkv bias
    return m.Hammer, cfg


# name -> (builder, quantize, ExportConfig fields)
FIXTURES = {
    "llama_q8": (llama, "dynamic_int8", {}),
    "llama_f32": (partial(llama, emb=32, heads=4, groups=1, inter=64), "none", {}),   # float weights: smaller
    "tiny_llama_q8": (tiny_llama, "dynamic_int8", {}),
    "smollm_q8": (smollm, "dynamic_int8", {}),
    "smollm2_q8": (smollm2, "dynamic_int8", {}),
    "amd_llama_135m_q8": (amd_llama_135m, "dynamic_int8", {}),
    "openelm_q8": (openelm, "dynamic_int8", {}),
    "hammer_q8": (hammer, "dynamic_int8", {}),
    # the causal mask an input; float weights (the int8 form of this export puts one logit of its 8 steps across
    # an int8 rounding step: 7.7e-3 of max|logit| off LiteRT, the other steps at 1.5e-7)
    "tiny_llama_mask_f32": (partial(tiny_llama, emb=32, heads=4, inter=64), "none", {"mask_as_input": True}),
    "tiny_llama_q4b32": (tiny_llama, "dynamic_int4_block32", {}),        # int4 weights, blocks of 32 (+ int4 table)
}
from make_llm_fixtures_more import FIXTURES as _MORE        # noqa: E402 (Gemma, Phi, Qwen3, DeepSeek, Falcon)
FIXTURES.update(_MORE)
# export options: written beside the fixtures only when named on the command line
OPTIONS = {
    "tiny_llama_mask_q8": (tiny_llama, "dynamic_int8", {"mask_as_input": True}),
    "tiny_llama_q8wo": (tiny_llama, "weight_only_int8", {}),
    "tiny_llama_fp16": (tiny_llama, "fp16", {}),
    "tiny_llama_tkv": (tiny_llama, "dynamic_int8", {"kvcache_layout": "transposed"}),
    "tiny_llama_plogits": (tiny_llama, "dynamic_int8", {"output_logits_on_prefill": True}),
    "tiny_llama_p4p8": (tiny_llama, "dynamic_int8", {"prefill_seq_len": [4, 8], "kv_cache_max_len": 128}),
    "tiny_llama_dbs2": (tiny_llama, "dynamic_int8", {"decode_batch_size": 2}),
    "tiny_llama_q4b128": (partial(tiny_llama, emb=128, heads=16, inter=128), "dynamic_int4_block128", {}),
    # the example's own test configuration (2048 wide, 28 MB), the converter's default cache length
    "llama_fake": (llama_fake, "dynamic_int8", {"kv_cache_max_len": 1280}),
    # the converter's default prefill lengths and cache length
    "llama_defaults": (partial(llama, max_seq=2048), "dynamic_int8", {"prefill_seq_len": [8, 64, 128, 256, 512, 1024], "kv_cache_max_len": 1280}),
}


def _spread(model, seed):
    """Seeded random weights; norm scales drawn around 1 so that every weight matters."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1 and "norm" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:                       # the blocks' outputs outweigh the embedding: tokens change step to step
                gain = 2.5 if name.endswith(("output_projection.weight", "w2.weight")) else 1.0
                p.copy_(torch.randn(p.shape, generator=g) * (gain / np.sqrt(p.shape[-1])))


def export(name: str) -> Path:
    import torch
    from litert_torch.generative.utilities import converter
    from litert_torch.generative.layers import kv_cache as kv_utils
    builder, quantize, opts = {**FIXTURES, **OPTIONS}[name]
    opts = dict(opts)
    prefills, kv = opts.pop("prefill_seq_len", [PREFILL]), opts.pop("kv_cache_max_len", KV)
    if opts.get("kvcache_layout") == "transposed":
        opts["kvcache_layout"] = kv_utils.KV_LAYOUT_TRANSPOSED
    torch.manual_seed(0)
    cls, cfg = builder()
    # the causal mask built inside unless it is an input
    model = cls(cfg, mask_cache_size=0 if opts.get("mask_as_input") else kv)
    _spread(model, seed=sum(map(ord, name)))
    model.eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = converter.convert_to_tflite(model, tmp, name, prefill_seq_len=prefills, kv_cache_max_len=kv,
                                           quantize=quantize, config=cfg, export_config=converter.ExportConfig(**opts))
        out = HERE / f"{name}.tflite"
        out.write_bytes(Path(path).read_bytes())
    return out


def causal_mask(pos: np.ndarray, kv: int) -> np.ndarray:
    """A mask input (export option mask_as_input): [1, 1, len(pos), kv], 0 where key j <= pos, else -inf."""
    return np.where(np.arange(kv)[None, :] <= pos[:, None], 0, -np.inf).astype(np.float32)[None, None]


def _greedy(path: Path, prompt: np.ndarray, prefill: np.ndarray, first: int, pos0: int):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=str(path))
    pre, dec = it.get_signature_runner(f"prefill_{PREFILL}"), it.get_signature_runner("decode")
    cache = {k: np.zeros(d["shape"], d["dtype"]) for k, d in pre.get_input_details().items() if k.startswith("kv_cache")}
    kv = next(iter(cache.values())).shape[1] if "mask" in pre.get_input_details() else 0

    def mask(pos):
        return {"mask": causal_mask(pos, max(d["shape"][-1] for k, d in pre.get_input_details().items()
                                             if k == "mask"))} if kv else {}
    pos = np.arange(PREFILL, dtype=np.int32)
    out = pre(tokens=prefill.astype(np.int32), input_pos=pos, **cache, **mask(pos))
    cache = {k: out[k] for k in cache}
    token, logits = first, []
    for step in range(STEPS):
        pos = np.array([pos0 + step], np.int32)
        out = dec(tokens=np.array([[token]], np.int32), input_pos=pos, **cache, **mask(pos))
        cache = {k: out[k] for k in cache}
        logits.append(out["logits"].reshape(-1))
        token = int(np.argmax(logits[-1]))
    return np.array(logits, np.float32)


def reference(path: Path, name: str) -> Path:
    vocab = None
    from ai_edge_litert.interpreter import Interpreter
    for d in Interpreter(model_path=str(path)).get_signature_runner("decode").get_output_details().values():
        vocab = d["shape"][-1]
    rng = np.random.default_rng(sum(map(ord, name)))
    prompt = rng.integers(1, vocab, (1, PREFILL)).astype(np.int32)
    logits = _greedy(path, prompt, prompt, int(prompt[0, -1]), PREFILL)
    padded = np.concatenate([prompt[:, :-1], np.zeros((1, 1), np.int32)], 1)
    gen = _greedy(path, prompt, padded, int(prompt[0, -1]), PREFILL - 1)
    out = HERE / f"{name}.ref.npz"
    np.savez(out, prompt=prompt, decode_logits=logits, decode_tokens=np.argmax(logits, -1).astype(np.int32),
             generate_tokens=np.argmax(gen, -1).astype(np.int32))
    return out


def main(names):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in names or FIXTURES:
        if name not in FIXTURES and name not in OPTIONS:
            sys.exit(f"unknown fixture {name!r}; known: {', '.join(FIXTURES)}; export options: {', '.join(OPTIONS)}")
        path = export(name)
        ref = reference(path, name)
        r = np.load(ref)
        print(f"{name}: {path.stat().st_size // 1024} KB, tokens {list(r['decode_tokens'])}, "
              f"max|logit| {np.abs(r['decode_logits']).max():.3g}")


if __name__ == "__main__":
    main(sys.argv[1:])
