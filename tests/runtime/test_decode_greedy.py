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
