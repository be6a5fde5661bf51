""".litertlm end to end (gpuc/litertlm.py, gpuc/tokenizer.py, `gpuc generate --prompt`): a toy LLM laid
out as litert-torch exports one (prefill_4 / decode, the KV cache threaded as state), a word-level
HuggingFace tokenizer and an LlmMetadata (start token, stop tokens, prompt templates), packed by
LiteRT-LM's own builder; gpuc's greedy tokens against LiteRT's signature runners, the text against
the tokenizer's decode, the compiled bundle with its tokenizer beside it, and bad files refused."""
from __future__ import annotations

import shutil
import struct

import pytest

pytest.importorskip("vulkan")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("litert_lm_builder")

from click.testing import CliRunner  # noqa: E402

from gpuc.cli import main  # noqa: E402
from gpuc.litertlm import LitertLm, parse_llm_metadata  # noqa: E402
from helpers.litertlm import (  # noqa: E402
    VOCAB, build_litertlm, litert_greedy, sentencepiece_model, toy_llm, word_tokenizer_json)

PROMPT = "w20 w21 w22 w23"
USER, MODEL = ("w5 ", " w6"), (" w7", "")
N = 10


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("litertlm")
    model = toy_llm()
    (d / "toy.tflite").write_bytes(model)
    tok_json = word_tokenizer_json(VOCAB)
    tok = tokenizers.Tokenizer.from_str(tok_json)
    prompt = [1] + tok.encode(USER[0] + PROMPT + USER[1] + MODEL[0], add_special_tokens=False).ids
    ref = litert_greedy(model, prompt, N)
    # a stop token: the first token that LiteRT makes for the first time after a few steps
    k = next(i for i in range(2, N) if ref[i] not in ref[:i])
    path = build_litertlm(d / "toy.litertlm", d / "toy.tflite", tok_json, start="<bos>", stops=("<eos>", [ref[k]]),
                          user=USER, model=MODEL)
    return {"dir": d, "path": path, "model": model, "tok": tok, "prompt": prompt, "ref": ref, "k": k}


def _generate(*args):
    r = CliRunner().invoke(main, ["generate", *map(str, args)])
    return r, dict(line.split(": ", 1) for line in r.stderr.splitlines() if line.startswith(("ids", "prompt ids")))


def _ids(text):
    return [int(t) for t in text.split()]


def test_reader_sees_the_builders_sections(case):
    lm = LitertLm(case["path"])
    assert lm.version[0] == 1 and "uuid" in lm.system
    assert [s.kind for s in lm.sections] == ["tflite_model", "hf_tokenizer_zlib", "llm_metadata"]
    assert lm.sections[0].items["model_type"] == "tf_lite_prefill_decode"
    assert all(s.begin % 16384 == 0 for s in lm.sections)          # each section on a 16 KiB block
    assert lm.tflite() == case["model"]
    kind, text = lm.tokenizer()
    assert kind == "hf" and tokenizers.Tokenizer.from_str(text.decode()).get_vocab_size() == VOCAB
    m = lm.llm_metadata()
    assert m.start_token == "<bos>" and m.stop_tokens == ["<eos>", [case["ref"][case["k"]]]]
    assert m.templates == {"user": USER, "model": MODEL} and m.max_num_tokens == 128


def test_generate_litertlm_matches_litert(case):
    """Prompt templated and tokenized, the start token first; prefilled in chunks of 4 (the last one
    padded); greedy tokens as LiteRT's until the stop token, which ends the text unseen."""
    ref, k = case["ref"], case["k"]
    r, got = _generate(case["path"], "--prompt", PROMPT, "--max-tokens", N, "--ids")
    assert r.exit_code == 0, r.output
    assert _ids(got["prompt ids"]) == case["prompt"] and len(case["prompt"]) == 8
    assert _ids(got["ids"]) == ref[:k + 1]
    assert r.stdout.rstrip("\n") == case["tok"].decode(ref[:k], skip_special_tokens=False)
    assert f"{k + 1} token(s)" in r.stderr


def test_compiled_bundle_with_its_tokenizer_beside(case):
    d, ref = case["dir"], case["ref"]
    bundle = d / "toy.bundle"
    r = CliRunner().invoke(main, ["compile", str(case["path"]), "-o", str(bundle)])
    assert r.exit_code == 0, r.output
    assert (d / "toy.bundle.tokenizer.json").exists() and (d / "toy.bundle.llm.json").exists()
    # without the template, 3 tokens: LiteRT's greedy decode of the bare prompt
    bare = [1] + case["tok"].encode(PROMPT, add_special_tokens=False).ids
    r, got = _generate(bundle, "--prompt", PROMPT, "--no-template", "-n", 3, "--ids")
    assert r.exit_code == 0, r.output
    assert _ids(got["prompt ids"]) == bare and _ids(got["ids"]) == litert_greedy(case["model"], bare, 3)
    # token-id mode: the ids printed as before; the metadata's stop token still ends it
    r, _ = _generate(bundle, "--prompt-ids", ",".join(map(str, case["prompt"])), "-n", N)
    assert r.exit_code == 0, r.output
    assert _ids(r.stdout) == ref[:case["k"] + 1]
    # a bundle without a tokenizer beside it: --prompt says what to give
    lone = d / "lone.bundle"
    shutil.copy(bundle, lone)
    r, _ = _generate(lone, "--prompt", PROMPT)
    assert r.exit_code == 2 and "--tokenizer" in r.output


def test_sentencepiece_litertlm(case, tmp_path):
    """The SentencePiece route: start and stop tokens as pieces, the text as sentencepiece decodes it."""
    spm = pytest.importorskip("sentencepiece")
    proto = sentencepiece_model(VOCAB)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    prompt = [1] + sp.encode("the cat sat on")
    ref = litert_greedy(case["model"], prompt, 6)
    path = build_litertlm(tmp_path / "sp.litertlm", case["dir"] / "toy.tflite", proto, start="<s>", stops=("</s>",))
    assert LitertLm(path).tokenizer()[0] == "sentencepiece"
    stop = sp.piece_to_id("</s>")
    want = ref[:ref.index(stop) + 1] if stop in ref else ref
    r, got = _generate(path, "--prompt", "the cat sat on", "-n", 6, "--ids")
    assert r.exit_code == 0, r.output
    assert _ids(got["prompt ids"]) == prompt and _ids(got["ids"]) == want
    assert r.stdout.rstrip("\n") == sp.decode([t for t in want if t != stop])


def _patched(data: bytes, at: int, fmt: str, value) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def _tokenizer_section(data: bytes):
    lm = LitertLm(data)
    return lm.of_kind("hf_tokenizer_zlib")[0]


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:20], "truncated: 20 bytes"),
    (lambda d: b"LITERTXX" + d[8:], "magic is b'LITERTXX'"),
    (lambda d: _patched(d, 8, "<I", 2), "major_version 2"),
    (lambda d: _patched(d, 24, "<Q", len(d) + 1), "header_end_offset"),
    (lambda d: _patched(d, 32, "<I", 0xFFFFFF), "header: root table: offset points outside"),
    (lambda d: d[:16500], "section 0 (tflite_model): begin_offset"),
    (lambda d: _patched(d, _tokenizer_section(d).begin + 8, "<I", 0xDEADBEEF), "hf_tokenizer_zlib): bad zlib data"),
])
def test_bad_files_are_refused_naming_the_field(case, tmp_path, damage, message):
    bad = tmp_path / "bad.litertlm"
    bad.write_bytes(damage(open(case["path"], "rb").read()))
    for args in (["generate", str(bad), "--prompt", PROMPT], ["compile", str(bad), "-o", str(tmp_path / "b")]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def test_llm_metadata_wire_format():
    """Packed and unpacked token ids, negative int32, unknown fields skipped, truncation named."""
    from litert_lm_builder.runtime.proto import llm_metadata_pb2, token_pb2
    m = llm_metadata_pb2.LlmMetadata(max_num_tokens=-3, stop_tokens=[token_pb2.TokenUnion(
        token_ids=token_pb2.TokenIds(ids=[7, 300000]))], jinja_prompt_template="{{ x }}")
    m.start_token.token_str = "<s>"
    got = parse_llm_metadata(m.SerializeToString())
    assert got.start_token == "<s>" and got.stop_tokens == [[7, 300000]] and got.max_num_tokens == -3
    unpacked = bytes([0x12, 0x06, 0x0A, 0x04, 0x08, 0x07, 0x08, 0x09])     # stop_tokens { token_ids { ids: 7 ids: 9 } }
    assert parse_llm_metadata(unpacked).stop_tokens == [[7, 9]]
    with pytest.raises(ValueError, match="passes the end"):
        parse_llm_metadata(m.SerializeToString()[:-2])


def test_missing_tokenizer_package_says_how_to_install(monkeypatch):
    import sys
    from gpuc.tokenizer import Tokenizer, TokenizerError
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(TokenizerError, match=r"pip install 'gpuc\[llm\]'"):
        Tokenizer("hf", b"{}")


def test_gpuc_load_takes_a_litertlm_file(case):
    """gpuc.load of a .litertlm compiles its LLM section: the same signatures as the .tflite's."""
    import gpuc
    with gpuc.load(str(case["path"])) as m, gpuc.load(case["model"]) as ref:
        assert m.bundle.checksum == ref.bundle.checksum
