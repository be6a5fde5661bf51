"""Tiny .litertlm files for tests/runtime/test_litertlm.py, written by LiteRT-LM's own builder
(the `litert-lm-builder` package): a toy LLM laid out as litert-torch exports one, and a word-level
HuggingFace tokenizer made here."""
from __future__ import annotations

import numpy as np

from helpers.builder import ModelBuilder, signature_model

VOCAB, DIM, CACHE_LEN, HIDDEN = 32, 8, 32, 16


def _toy_signature(n: int, w: dict):
    """tokens [1, n], input_pos [n] -> kv_cache_k_0' = DUS(cache, E[tokens], [0, pos[0], 0]);
    decode (n == 1) adds logits = tanh(sum(cache', axis 1) @ W1) @ W2.  Token 0's embedding is zero,
    so the rows a padded prefill writes past the prompt add nothing before decode rewrites them."""
    mb = ModelBuilder()
    tokens = mb.input("tokens", [1, n], "int32")
    pos = mb.input("input_pos", [n], "int32")
    cache = mb.input("kv_cache_k_0", [1, CACHE_LEN, DIM])
    emb = mb.tensor("emb", [1, n, DIM])
    mb.op("GATHER", [mb.const("embedding", w["E"]), tokens], [emb], axis=0)
    first = mb.tensor("first", [1], "int32")
    mb.op("SLICE", [pos, mb.const("b0", np.zeros(1, np.int32)), mb.const("s1", np.ones(1, np.int32))], [first])
    start = mb.tensor("start", [3], "int32")
    zero = mb.const("zero", np.zeros(1, np.int32))
    mb.op("CONCATENATION", [zero, first, zero], [start], axis=0)
    out = mb.tensor("kv_cache_k_0_out", [1, CACHE_LEN, DIM])
    mb.op("DYNAMIC_UPDATE_SLICE", [cache, emb, start], [out])
    names = {"inputs": {"tokens": tokens, "input_pos": pos, "kv_cache_k_0": cache}, "outputs": {"kv_cache_k_0": out}}
    if n == 1:
        total = mb.tensor("total", [1, DIM])
        mb.op("SUM", [out, mb.const("ax", np.array([1], np.int32))], [total], keep_dims=False)
        pre, h = mb.tensor("pre", [1, HIDDEN]), mb.tensor("h", [1, HIDDEN])
        mb.op("FULLY_CONNECTED", [total, mb.const("w1", w["W1"]), -1], [pre])
        mb.op("TANH", [pre], [h])
        logits = mb.tensor("logits", [1, VOCAB])
        mb.op("FULLY_CONNECTED", [h, mb.const("w2", w["W2"]), -1], [logits])
        mb.output(logits)
        names["outputs"] = {"logits": logits, **names["outputs"]}
    mb.output(out)
    return mb, names


def toy_llm(seed: int = 0) -> bytes:
    """Signatures prefill_4 and decode over a KV cache of CACHE_LEN rows, random weights."""
    rng = np.random.default_rng(seed)
    E = rng.standard_normal([VOCAB, DIM]).astype(np.float32)
    E[0] = 0
    w = {"E": E, "W1": rng.standard_normal([HIDDEN, DIM]).astype(np.float32) / 2,
         "W2": rng.standard_normal([VOCAB, HIDDEN]).astype(np.float32) * 2}
    return signature_model([("prefill_4", *_toy_signature(4, w)), ("decode", *_toy_signature(1, w))])


def litert_greedy(model: bytes, prompt: list, n: int) -> list:
    """LiteRT's greedy tokens: the prompt fed one token at a time through `decode` (no prefill
    chunking, no padding), then n steps, the cache fed back each time."""
    from ai_edge_litert.interpreter import Interpreter
    decode = Interpreter(model_content=model).get_signature_runner("decode")
    cache, seq, out = np.zeros([1, CACHE_LEN, DIM], np.float32), list(prompt), []
    for pos in range(len(prompt) + n - 1):
        r = decode(tokens=np.array([[seq[pos]]], np.int32), input_pos=np.array([pos], np.int32), kv_cache_k_0=cache)
        cache = r["kv_cache_k_0"]
        if pos >= len(prompt) - 1:
            seq.append(int(np.argmax(r["logits"].reshape(-1))))
            out.append(seq[-1])
    return out


def word_tokenizer_json(vocab_size: int) -> str:
    """A WordLevel tokenizer.json: <pad> <bos> <eos> then words w3 .. w{vocab_size-1}, split on spaces."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, **{f"w{i}": i for i in range(3, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<pad>", "<bos>", "<eos>"])
    return tok.to_str()


def sentencepiece_model(vocab_size: int) -> bytes:
    """A SentencePiece BPE model of vocab_size pieces (<unk> 0, <s> 1, </s> 2) trained on a few words."""
    import io

    import sentencepiece as spm
    text = ["the cat sat on the mat", "a dog ran to the cat", "the mat is red and the dog is blue"] * 20
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=out, vocab_size=vocab_size,
                                   model_type="bpe", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                   character_coverage=1.0, minloglevel=2)
    return out.getvalue()


def build_litertlm(out_path, tflite_path, tokenizer, *, start="<bos>", stops=("<eos>",),
                   user=("", ""), model=("", "")) -> str:
    """A .litertlm with the LLM (model_type tf_lite_prefill_decode), the tokenizer (a tokenizer.json
    string: HF; bytes: a SentencePiece model) and an LlmMetadata proto.  A token given as an int or
    list is written as token_ids, a string as token_str."""
    from litert_lm_builder import LitertLmFileBuilder, TfLiteModelType
    from litert_lm_builder.runtime.proto import llm_metadata_pb2, token_pb2

    def token(t):
        return token_pb2.TokenUnion(token_str=t) if isinstance(t, str) else \
            token_pb2.TokenUnion(token_ids=token_pb2.TokenIds(ids=[t] if isinstance(t, int) else list(t)))
    meta = llm_metadata_pb2.LlmMetadata(start_token=token(start), stop_tokens=[token(t) for t in stops],
                                        max_num_tokens=128)
    meta.prompt_templates.user.prefix, meta.prompt_templates.user.suffix = user
    meta.prompt_templates.model.prefix, meta.prompt_templates.model.suffix = model
    base = str(out_path)
    with open(base + ".meta.pb", "wb") as f:
        f.write(meta.SerializeToString())
    b = LitertLmFileBuilder()
    b.add_tflite_model(str(tflite_path), TfLiteModelType.PREFILL_DECODE)
    if isinstance(tokenizer, str):
        with open(base + ".tokenizer.src.json", "w") as f:
            f.write(tokenizer)
        b.add_hf_tokenizer(base + ".tokenizer.src.json")
    else:
        with open(base + ".tokenizer.src.model", "wb") as f:
            f.write(tokenizer)
        b.add_sentencepiece_tokenizer(base + ".tokenizer.src.model")
    b.add_llm_metadata(base + ".meta.pb")
    with open(base, "wb") as f:
        b.build(f)
    return base
