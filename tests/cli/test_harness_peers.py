"""benchmarks/harness.py's PyTorch peer: the stem -> architecture mapping (torch_peer.py), the
throughput ratios and their table (ratios.py), the row format, and a harness run without torch (one
note row per mapped model, gpuc's run() and in-place rows still there)."""
import json
import sys

import numpy as np
import pytest

from helpers.models import block_model
from helpers.repo import ROOT

from benchmarks import harness, ratios, torch_peer
from benchmarks.torch_peer import Peer, peer_for

SKELETONS = ["resnet50", "convnext_tiny", "swin_t", "efficientnet_b0", "mobilenet_v2"]


@pytest.mark.parametrize("arch", SKELETONS)
def test_skeleton_stems_map_to_torchvision(arch):
    assert peer_for(f"torchvision_{arch}") == Peer("torchvision", arch, "nchw")


def test_skeleton_stems_are_the_files_skeleton_py_writes():
    skel = ROOT.parent / "shared" / "skel"
    if not skel.is_dir():
        pytest.skip("../shared/skel not here")
    stems = sorted(json.loads(p.read_text())["name"] for p in skel.glob("*.fill.json"))
    assert stems == sorted(f"torchvision_{a}" for a in SKELETONS)
    assert all(s in torch_peer.PEERS for s in stems)


def test_shared_models_map():
    assert peer_for("mobilenet_v2_224_f32") == Peer("torchvision", "mobilenet_v2", "nhwc")
    assert peer_for("timm_efficientformerv2_s0") == Peer("timm", "efficientformerv2_s0", "nchw")
    hf = peer_for("hf_mobilevit_small")
    assert (hf.library, hf.arch, hf.layout) == ("transformers", "MobileViTForImageClassification", "nchw")
    assert dict(hf.config)["num_labels"] == 1000


def test_unmapped_and_prefix_and_extra():
    assert peer_for("mlp_small_f32") is None
    assert peer_for("mobilenet_v2_224_int8") is None            # int8: no fp peer
    assert peer_for("timm_pvt_v2_b1") == Peer("timm", "pvt_v2_b1", "nchw")
    assert peer_for("torchvision_") is None
    extra = {"mlp_small_f32": Peer("torchvision", "resnet18", "nhwc"),
             "torchvision_resnet50": Peer("timm", "resnet50", "nchw")}
    assert peer_for("mlp_small_f32", extra).arch == "resnet18"
    assert peer_for("torchvision_resnet50", extra).library == "timm"  # --peer overrides the table


def test_parse_peer():
    assert torch_peer.parse_peer("m=torchvision:resnet18") == ("m", Peer("torchvision", "resnet18", "nchw"))
    assert torch_peer.parse_peer("k=timm:vit_tiny_patch16_224:nhwc") == ("k", Peer("timm", "vit_tiny_patch16_224", "nhwc"))
    for bad in ("m", "m=resnet18", "=torchvision:resnet18", "m=keras:resnet", "m=timm:", "m=timm:x:nwhc"):
        with pytest.raises(ValueError, match="STEM=LIBRARY:ARCH"):
            torch_peer.parse_peer(bad)


def test_torch_input_layouts():
    x = np.arange(2 * 4 * 5 * 3, dtype=np.float32).reshape(2, 4, 5, 3)
    t = torch_peer.torch_input(Peer("torchvision", "mobilenet_v2", "nhwc"), x)
    assert t.shape == (2, 3, 4, 5) and t.flags.c_contiguous
    assert t[1, 2, 3, 4] == x[1, 3, 4, 2]
    same = torch_peer.torch_input(Peer("timm", "a", "nchw"), x.transpose(0, 3, 1, 2))
    assert np.array_equal(same, t)
    with pytest.raises(ValueError, match="4-D image input"):
        torch_peer.torch_input(Peer("timm", "a", "nchw"), np.zeros((1, 64), np.float32))


def _row(model, system, batch, ms, **kw):
    return {"model": model, "system": system, "batch": batch, "median_ms": ms, "p90_ms": ms, "min_ms": ms, **kw}


def test_ratios_pair_precisions_and_paths():
    rows = [_row("m", "gpuc-fp32", 1, 0.5), _row("m", "gpuc-fp32-in-place", 1, 0.4),
            _row("m", "gpuc-fp16", 1, 0.25),
            {"model": "m", "system": "gpuc-fp16-in-place", "batch": 1, "note": "not supported"},
            _row("m", "gpuc-fp32", 32, 8.0),
            _row("m", "torch-fp32", 1, 1.0), _row("m", "torch-tf32", 1, 0.8), _row("m", "torch-fp16", 1, 0.5),
            _row("m", "torch-fp32", 32, 4.0), _row("m", "torch-fp16", 32, 2.0),
            {"model": "m", "system": "torch", "note": "skipped"}]
    ratios.attach(rows)
    r = {(x["system"], x.get("batch")): x.get("throughput_ratio") for x in rows}
    assert r[("torch-fp32", 1)] == {"gpuc-fp32": 2.0, "gpuc-fp32-in-place": 2.5}
    assert r[("torch-tf32", 1)] == pytest.approx({"gpuc-fp32": 1.6, "gpuc-fp32-in-place": 2.0})
    assert r[("torch-fp16", 1)] == {"gpuc-fp16": 2.0}          # the in-place row is a note: no ratio
    assert r[("torch-fp32", 32)] == {"gpuc-fp32": 0.5}         # same batch only
    assert r[("torch-fp16", 32)] == {}                           # no gpuc-fp16 row at batch 32
    assert r[("gpuc-fp32", 1)] is None and r[("torch", None)] is None
    lines = ratios.table(rows)
    assert "torch median / gpuc median" in lines[0]
    body = [ln.split() for ln in lines[2:]]
    assert ["m", "1", "torch-fp32", "1.000", "gpuc-fp32", "0.500", "2.00", "0.400", "2.50"] in body
    assert ["m", "1", "torch-fp16", "0.500", "gpuc-fp16", "0.250", "2.00", "-", "-"] in body
    assert ["m", "32", "torch-fp32", "4.000", "gpuc-fp32", "8.000", "0.50", "-", "-"] in body
    assert not any(b[:3] == ["m", "32", "torch-fp16"] for b in body)   # nothing to compare with
    assert ratios.table([_row("m", "gpuc-fp32", 1, 0.5)]) == []


def test_torch_row_format_carries_stem_device_and_ratio():
    r = _row("torchvision_resnet50", "torch-fp32", 32, 11.8, device="NVIDIA H100 80GB HBM3",
             images_per_s=2712.0, note="CUDA graph, pinned host memory in and out",
             throughput_ratio={"gpuc-fp32": 0.51, "gpuc-fp32-in-place": 0.55})
    line = harness.format_row(r)
    assert line.startswith("torchvision_resnet50") and " torch-fp32 " in line
    assert "[NVIDIA H100 80GB HBM3]" in line
    assert "gpuc-fp32/torch 0.51" in line and "gpuc-fp32-in-place/torch 0.55" in line
    assert "11.800" in line and "2712" in line
    note = harness.format_row({"model": "x", "system": "torch", "note": "skipped: torch not importable"})
    assert note.split()[:2] == ["x", "torch"] and note.endswith("skipped: torch not importable")


def test_harness_without_torch(tmp_path, monkeypatch, capsys):
    """torch absent (an import of it fails): the mapped model gets one note row saying so, the unmapped
    one is named, and gpuc's rows (run() and in-place, batch 1 and a --max-batch bundle) are there."""
    pytest.importorskip("ai_edge_litert")
    monkeypatch.setitem(sys.modules, "torch", None)          # import torch -> ImportError
    (tmp_path / "block_img.tflite").write_bytes(block_model())
    (tmp_path / "block_other.tflite").write_bytes(block_model())
    out = tmp_path / "rows.json"
    harness.main([str(tmp_path / "block_img.tflite"), str(tmp_path / "block_other.tflite"), "--runs", "2",
                  "--batch", "1,2", "--skip", "litert-gpu", "--peer", "block_img=torchvision:mobilenet_v2:nhwc",
                  "--json", str(out), "--threads", "1"])
    text = capsys.readouterr().out
    rows = json.loads(out.read_text())
    assert "torch peer: torch not importable (" in text and "no torch-* rows" in text
    assert "no PyTorch architecture mapped for block_other" in text
    torch_rows = [r for r in rows if r["system"].startswith("torch")]
    assert len(torch_rows) == 1
    assert torch_rows[0]["model"] == "block_img" and torch_rows[0]["peer"] == "torchvision:mobilenet_v2"
    assert torch_rows[0]["note"].startswith("skipped: torch not importable")
    assert "median_ms" not in torch_rows[0]
    by = {(r["model"], r["system"], r["batch"]): r for r in rows if "batch" in r}
    ip = by[("block_img", "gpuc-fp32-in-place", 1)]
    assert ip["median_ms"] > 0 and ip["equals_run"] is True and ip["max_rel_err"] < 1e-5
    assert by[("block_img", "gpuc-fp32", 2)]["median_ms"] > 0
    big = by[("block_img", "gpuc-fp32-in-place", 2)]
    # either the runtime runs a batch in place (then it must equal run()), or the row says it cannot
    assert big.get("equals_run") is True or ("run_in_place not supported" in big["note"]
                                             and "NOTE: no like-for-like gpuc row" in text)
    assert not any(r.get("throughput_ratio") for r in rows)
    assert "gpuc vs PyTorch" not in text


def test_in_place_gpu_time_is_the_in_place_runs(monkeypatch):
    """The in-place row's GPU time is read from the slot run_in_place ran on (slot 0), not last_gpu_ms,
    which run_in_place leaves at the last run()'s: timestamps faked per slot (5 ms slot 0, 50 ms others)."""
    pytest.importorskip("vulkan")
    import gpuc
    from gpuc.runtime import commands
    with gpuc.load(gpuc.compile(block_model(), cache=False)) as m:
        if not m.timestamps:
            pytest.skip("device has no timestamp queries")
        monkeypatch.setattr(commands, "read_ms", lambda device, pool, count: [5.0 if pool is m.slots[0].pool else 50.0])
        x = np.random.default_rng(0).uniform(-1, 1, m.inputs[0].shape).astype(m.inputs[0].dtype)
        expect = m.run([x])
        if max(m.slots, key=lambda sl: sl.seq) is m.slots[0]:
            expect = m.run([x])                      # the last run() on another slot than run_in_place's
        assert m.last_gpu_ms == 50.0
        row, why = harness.in_place(m, [x], expect, runs=2)
        assert why is None and row["equals_run"] and row["gpu_ms"] == 5.0
        assert m.last_gpu_ms == 50.0                 # (still the run()'s)


def test_outputs_compare_nan_as_equal():
    """The harness's equality flags (in place against run(), rows against batch 1) count NaN as equal to NaN: a
    random-weight skeleton that overflows float16 gives NaN outputs, which are not a difference between runs."""
    a = np.array([np.nan, 1.0, -0.0], np.float32)
    assert harness._same(a, a.copy()) and not harness._same(a, np.array([np.nan, 1.0, 2.0], np.float32))
    assert not harness._same(a, np.array([0.0, 1.0, -0.0], np.float32))
    assert harness._same(np.arange(3), np.arange(3)) and not harness._same(np.arange(3), np.arange(1, 4))
