"""Device-side greedy decoding (compiler/ops/greedy_feed.py, runtime/decode_loop.py) on the tiny
llm_bench model (benchmarks/llm_bench.py --config tiny: litert-torch's graph, random weights): the
derived `decode_greedy` signature gives the host path's tokens, stops at a stop token, and a decode
signature of another shape gets no derived signature."""
from __future__ import annotations

import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.ops import greedy_feed  # noqa: E402
from gpuc.compiler.signatures import thread_state  # noqa: E402
from gpuc.errors import GpucError, RunError  # noqa: E402
from gpuc.runtime import decode_loop  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from gpuc.runtime.generate import Sampler  # noqa: E402

from benchmarks import llm_bench  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    cfg = llm_bench.CONFIGS["tiny"]
    w = llm_bench.make_weights(cfg, 2)
    for k in [k for k in w if k.endswith((".o", ".down"))]:     # layers that outweigh the tied embedding: the
        w[k] = llm_bench._q8_rows(w[k][2] * 16)                  # greedy tokens change from step to step
    model = llm_bench.write_tflite(cfg, w, [8], 48)
    return model, gpuc.compile(model)


def test_device_greedy_equals_host_greedy(tiny):
    _, bundle = tiny
    prompt = [7, 200, 3, 45, 91, 12, 250, 8, 66, 1, 19]        # 10 prefilled (8 + 2 padded in 8), then decode
    with gpuc.load(bundle) as m:
        host = list(m.generate(prompt, 16, device_greedy=False))
        assert len(set(host)) > 3                              # tokens that change: the feedback is exercised
        assert list(m.generate(prompt, 16)) == host
        stop = host[5]
        got = list(m.generate(prompt, 16, stop_ids=(stop,)))
        assert got == host[:host.index(stop) + 1]
        gen = m.generate(prompt, 16)                           # abandoned with steps in flight
        assert next(gen) == host[0]
        gen.close()
        assert list(m.generate(prompt[:3], 6)) == list(m.generate(prompt[:3], 6, device_greedy=False))
        sampled = [list(m.generate(prompt, 6, Sampler(temperature=0.8, seed=4))) for _ in range(2)]
        assert sampled[0] == sampled[1] and len(sampled[0]) == 6      # sampling keeps the (seeded) host path


def test_derived_signature_in_bundle(tiny):
    _, bundle = tiny
    b = read_bundle(bundle)
    subs = {s.signature: s for s in b.signatures}
    g = subs["decode_greedy"]
    assert g.stats["derived_from"] == "decode" and g.stats["cpu_nodes"] == 0 and g.inputs == []
    assert [g.tensors[i].name for i in g.outputs] == ["next_token"]
    state = {g.tensors[d].name for d, _ in g.state_init}
    assert {greedy_feed.STATE_TOKENS, greedy_feed.STATE_POS} <= state


def test_other_decode_shape_gets_no_derived_signature(tiny):
    model, _ = tiny
    m = load_tflite(model)
    i = [s["key"] for s in m.signatures].index("prefill_8")     # tokens [1, 8]: not a decode step's shape
    m.main_index = m.signatures[i]["subgraph"]
    thread_state(m.main, m.signatures[i])
    nodes, outputs = list(m.main.nodes), list(m.main.outputs)
    assert not greedy_feed.attach(m, m.signatures[i])
    assert m.main.nodes == nodes and m.main.outputs == outputs and not m.variables.init


PROMPT = [7, 200, 3, 45, 91, 12, 250, 8, 66, 1, 19]


def _counted(runner, monkeypatch):
    """Count the multi-step submissions the decode loop makes through `runner` (k of each)."""
    ks, real = [], runner.run_repeated_async
    monkeypatch.setattr(runner, "run_repeated_async", lambda k: ks.append(k) or real(k))
    return ks


@pytest.mark.parametrize("k", [1, 3])
def test_steps_per_submit_same_tokens(tiny, k, monkeypatch):
    _, bundle = tiny
    monkeypatch.setattr(decode_loop, "STEPS_PER_SUBMIT", k)
    with gpuc.load(bundle) as m:
        ks = _counted(decode_loop.greedy_runner(m), monkeypatch)
        host = list(m.generate(PROMPT, 16, device_greedy=False))
        for steps in (16, 14, 2, 1):                     # 1 + 3 * 5; a tail of 1; less than k
            assert list(m.generate(PROMPT, steps)) == host[:steps]
        assert ks == ([3] * 5 + [3] * 4 if k == 3 else [])
        assert decode_loop.plan(14, 3) == [1, 3, 3, 3, 3, 1] and sum(decode_loop.plan(17, 4)) == 17
        stop = host[5]                                   # inside the second 3-step submission
        assert list(m.generate(PROMPT, 16, stop_ids=(stop,))) == host[:host.index(stop) + 1]
        greedy = decode_loop.greedy_runner(m)            # the parameter overrides the constant
        list(m.generate(PROMPT, 1))
        assert list(decode_loop.run(greedy, host[0], len(PROMPT), 9, steps_per_submit=4)) == host[1:10]
        with pytest.raises(GpucError, match="steps_per_submit"):
            next(decode_loop.run(greedy, host[0], len(PROMPT), 9, steps_per_submit=0))


def test_run_repeated_async(tiny):
    _, bundle = tiny
    with gpuc.load(bundle) as m:
        g = decode_loop.greedy_runner(m)
        host = list(m.generate(PROMPT, 9, device_greedy=False))

        def seed(token=PROMPT[-1]):
            decode_loop.seed(g, token, len(PROMPT) - 1)
        for k in (2, 3, 5, 2, 8):                        # staging grows (2, 4, 8); command buffers re-recorded
            seed()
            outs = g.run_repeated_async(k).wait()
            assert [int(o["next_token"].reshape(-1)[0]) for o in outs] == host[:k]
            assert g.last_gpu_ms is None or g.last_gpu_ms > 0
        seed()
        h1, h2 = g.run_repeated_async(4), g.run_repeated_async(5)     # queued back to back: state carried
        assert [int(o[0].reshape(-1)[0]) for o in h1.wait() + h2.wait()] == host[:9]
        seed(10 ** 6)                                    # a token past the embedding table: LiteRT fails too
        h = g.run_repeated_async(3)
        for _ in range(2):
            with pytest.raises(RunError, match="run 0"):
                h.wait()
        seed()
        assert int(g.run({})[0].reshape(-1)[0]) == host[0]      # the single-step path's checks are intact
        for bad in (0, 257, 2.0, True):
            with pytest.raises(GpucError, match="run_repeated_async: k"):
                g.run_repeated_async(bad)
        with pytest.raises(GpucError, match="takes inputs"):
            m.signature("decode").run_repeated_async(2)


@pytest.mark.parametrize("k", [1, 3])
def test_close_with_steps_queued(tiny, k, monkeypatch):
    _, bundle = tiny
    monkeypatch.setattr(decode_loop, "STEPS_PER_SUBMIT", k)
    m = gpuc.load(bundle)
    gen = m.generate(PROMPT, 16)
    first = next(gen)                                    # 1 step done, 2 submissions queued
    m.close()
    with pytest.raises(GpucError, match="model is closed"):
        next(gen)
    gen.close()
    assert isinstance(first, int)
