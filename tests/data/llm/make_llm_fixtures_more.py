"""More tiny litert-torch generative exports for tests/data/llm (make_llm_fixtures.py imports FIXTURES
from here and builds them the same way): Gemma 1, 2 and 3, Phi-2, -3.5 and -4, Qwen3, DeepSeek-R1-Distill
(Qwen2-shaped) and Falcon, each from the example's own config builder shrunk so that what sets the
architecture apart still acts on 8 + 8 tokens:
  - gemma1: embedding scaled by sqrt(width), GeGLU (gated tanh-GELU), zero-centred RMSNorm, one KV head;
  - gemma2: + attention logit soft-cap, final logit soft-cap (both lowered so that tanh bends the values
    these weights give), alternating sliding-window (5 keys: the decode steps at 8..15 see a window) and
    global layers, norms after attention and after the MLP;
  - gemma3: a sliding layer (rope base 1e4) and a global one (1e6), RMSNorm on q and k;
  - phi2: parallel attention + MLP residual, partial rotary (0.4), LayerNorm, GELU, biases, untied head;
  - phi3: fused gate/up SiLU-GLU, Phi-3.5's scaled rope (its 48 short factors: head_dim 96);
  - phi4: partial rotary 0.75 of head_dim 128 with Phi-4's rope factors, GQA;
  - qwen3: RMSNorm on q and k, GQA; deepseek: Qwen2-shaped (qkv bias), GQA;
  - falcon: ALiBi position bias (no rotary), MHA, LayerNorm, GELU, biases.
Values are entries of make_llm_fixtures.FIXTURES: name -> (builder, quantize, ExportConfig fields)."""
from __future__ import annotations


def _small(cfg, *, emb=32, heads=4, head_dim=16, groups=1, inter=64, window=5, layers=2, vocab=128):
    """Shrink `cfg` in place: every block config; the embedding scale follows the width (Gemma's
    sqrt(width)); a sliding window becomes `window` keys."""
    cfg.vocab_size, cfg.num_layers, cfg.max_seq_len = vocab, layers, 256
    if cfg.embedding_scale is not None:
        cfg.embedding_scale = emb ** 0.5
    cfg.embedding_dim = emb
    if isinstance(cfg.block_configs, list):
        cfg.block_configs = cfg.block_configs[:layers]
    blocks = cfg.block_configs if isinstance(cfg.block_configs, list) else [cfg.block_configs]
    for b in {id(b): b for b in blocks}.values():
        a = b.attn_config
        a.num_heads, a.head_dim, a.num_query_groups = heads, head_dim, groups
        if a.sliding_window_size:
            a.sliding_window_size = window
        b.ff_config.intermediate_size = inter
    return cfg


def gemma1():
    from litert_torch.generative.examples.gemma import gemma1 as m
    return m.Gemma1, _small(m.get_model_config_2b(), groups=1)


def gemma2():
    from litert_torch.generative.examples.gemma import gemma2 as m
    cfg = _small(m.get_model_config_2b(), groups=2)          # layer 0 sliding, layer 1 global
    for b in cfg.block_configs:
        b.attn_config.logit_softcap = 1.5
    cfg.final_logit_softcap = 3.0
    return m.Gemma2, cfg


def gemma3():
    from litert_torch.generative.examples.gemma3 import decoder as m
    cfg = m.get_decoder_config_1b()
    cfg.block_configs = cfg.block_configs[4:6]                # one sliding layer, then the global one
    return m.Decoder, _small(cfg, groups=1)


def phi2():
    from litert_torch.generative.examples.phi import phi2 as m
    return m.Phi2, _small(m.get_model_config(), groups=4, head_dim=20)   # 8 of 20 dims rotated


def phi3():
    from litert_torch.generative.examples.phi import phi3 as m
    return m.Phi3_5Mini, _small(m.get_model_config(), heads=2, head_dim=96, groups=2)


def phi4():
    from litert_torch.generative.examples.phi import phi4 as m
    return m.Phi4Mini, _small(m.get_model_config(), heads=2, head_dim=128, groups=1, inter=32)


def qwen3():
    from litert_torch.generative.examples.qwen import qwen3 as m
    return m.Qwen3, _small(m.get_4b_model_config(), groups=2)


def deepseek():
    from litert_torch.generative.examples.deepseek import deepseek as m
    return m.DeepSeekDistillQwen, _small(m.get_model_config(), groups=2)


def falcon():
    from litert_torch.generative.examples.falcon import falcon as m
    return m.Falcon, _small(m.get_model_config(), groups=4)


FIXTURES = {
    "gemma1_q8": (gemma1, "dynamic_int8", {}),
    "gemma2_q8": (gemma2, "dynamic_int8", {}),
    "gemma3_q8": (gemma3, "dynamic_int8", {}),
    "phi2_q8": (phi2, "dynamic_int8", {}),
    "phi3_q8": (phi3, "dynamic_int8", {}),
    "phi4_q8": (phi4, "dynamic_int8", {}),
    "qwen3_q8": (qwen3, "dynamic_int8", {}),
    "deepseek_q8": (deepseek, "dynamic_int8", {}),
    "falcon_q8": (falcon, "dynamic_int8", {}),
    # Gemma 2's and 3's converter defaults (convert_gemma{2,3}_to_tflite.py): the mask an input, the
    # transposed KV cache (Gemma 3 still cuts its sliding layers' window out of the given mask in the graph)
    "gemma2_tkv_mask_q8": (gemma2, "dynamic_int8", {"mask_as_input": True, "kvcache_layout": "transposed"}),
    "gemma3_tkv_mask_q8": (gemma3, "dynamic_int8", {"mask_as_input": True, "kvcache_layout": "transposed"}),
}


if __name__ == "__main__":            # these fixtures only: python tests/data/llm/make_llm_fixtures_more.py [NAME ...]
    import sys

    import make_llm_fixtures as base
    base.FIXTURES.update(FIXTURES)
    base.main(sys.argv[1:] or list(FIXTURES))
