"""Bundle format 4: the weights and an fp16 bundle's fp32 fallback lie in sections after the flatbuffer
(no 2 GB flatbuffer cap); every section field a crafted file may lie about is refused by name; format 3
bundles (weights inline) still load and run."""
import pathlib
import struct
import sys

import numpy as np
import pytest

import gpuc
from gpuc.errors import BundleError
from gpuc.runtime import bundle as B
from gpuc.runtime import flatbuf
from gpuc.runtime.trailer import TRAILER_BYTES, with_trailer
from helpers.sample_bundle import sample

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "scripts"))
import fuzz_fields  # noqa: E402

DATA = pathlib.Path(__file__).parent / "data"


def layout(data: bytes) -> dict:
    head = B.read_header(data)
    return {k: int(head[k] or 0) for k in B.SECTION_FIELDS}


def test_weights_section_after_the_flatbuffer_and_covered_by_the_digest():
    w = np.arange(1000, dtype=np.uint8) * 7
    data = B.write_bundle(sample(weights=w))
    lay = layout(data)
    assert lay["weights_offset"] % B.SECTION_ALIGN == 0 and lay["weights_offset"] >= lay["flatbuffer_bytes"]
    assert lay["weights_size"] == 1000 and lay["fallback_size"] == 0 == lay["fallback_offset"]
    assert data[lay["weights_offset"]:lay["weights_offset"] + 1000] == w.tobytes()
    assert len(data) == lay["weights_offset"] + 1000 + TRAILER_BYTES
    b = B.read_bundle(data)
    assert b.format_version == B.FORMAT_VERSION == 4 and b.weights.tobytes() == w.tobytes()
    assert B.read_header(data)["payload"] is not None and flatbuf.read(
        B.read_header(data)["payload"], B.BUNDLE_SCHEMA, "Payload")["weights"] is None    # not inline
    bad = bytearray(data)
    bad[lay["weights_offset"] + 500] ^= 1                     # a weight byte: the trailer digest covers it
    with pytest.raises(BundleError, match="digest mismatch"):
        B.read_bundle(bytes(bad))


def test_written_in_parts_equals_the_joined_bytes(tmp_path):
    b = sample(weights=np.arange(300, dtype=np.uint8), fallback=B.write_bundle(sample()))
    parts = B.write_bundle_parts(b)
    with open(tmp_path / "m.gpub", "wb") as f:
        n = B.write_bundle_to(b, f)
    assert (tmp_path / "m.gpub").read_bytes() == b"".join(parts) == B.write_bundle(b) and n == sum(map(len, parts))
    assert any(isinstance(p, memoryview) for p in parts)       # the weights are written from a view, not a copy


def test_read_from_a_memory_map_views_it(tmp_path):
    import mmap
    path = tmp_path / "m.gpub"
    path.write_bytes(B.write_bundle(sample(weights=np.arange(64, dtype=np.uint8), fallback=B.write_bundle(sample()))))
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    b = B.read_bundle(mm)
    assert b.weights.tolist() == list(range(64)) and not b.weights.flags.owndata
    assert B.read_bundle(b.fallback).weights.tolist() == list(range(16))


def test_a_large_bundle_file_is_loaded_from_a_memory_map(tmp_path, monkeypatch):
    """gpuc.load of a path at or over runtime.MAP_BYTES maps the file (no read copy): the weights the
    upload reads are views of the map; it runs as the bytes do."""
    import mmap
    from gpuc import runtime
    from helpers.models import conv_mean_softmax
    data = gpuc.compile(conv_mean_softmax(), cache=False)
    path = tmp_path / "m.gpub"
    path.write_bytes(data)
    monkeypatch.setattr(runtime, "MAP_BYTES", len(data))
    assert isinstance(runtime.read_bundle_file(path, map_large=True), mmap.mmap)
    assert isinstance(runtime.read_bundle_file(path), bytes)
    monkeypatch.setattr(runtime, "MAP_BYTES", len(data) + 1)
    assert isinstance(runtime.read_bundle_file(path, map_large=True), bytes)
    monkeypatch.setattr(runtime, "MAP_BYTES", 1)
    x = _x()
    with gpuc.load(path) as m, gpuc.load(data) as ref:
        assert isinstance(m.bundle.weights.base.obj, mmap.mmap) and isinstance(ref.bundle.weights.base.obj, bytes)
        assert np.array_equal(m.run([x])[0], ref.run([x])[0])


def test_weights_upload_in_pieces(monkeypatch):
    """The weights go up through a staging buffer of at most UPLOAD_CHUNK bytes, piece by piece (a
    multi-GB section is never staged whole): pieces smaller than the weights give the same outputs."""
    from gpuc.runtime import arenas
    from helpers.models import conv_mean_softmax
    data = gpuc.compile(conv_mean_softmax(), cache=False)
    n = B.read_bundle(data).weights.nbytes
    x = _x()
    with gpuc.load(data) as ref:
        want = ref.run([x])[0]
    monkeypatch.setattr(arenas, "UPLOAD_CHUNK", 320)
    assert n > 2 * 320 and n % 320                            # two whole pieces and a part
    with gpuc.load(data) as m:
        assert np.array_equal(m.run([x])[0], want)


def test_fallback_section_is_a_complete_bundle():
    fb = B.write_bundle(sample(weights=np.arange(16, dtype=np.uint8)[::-1].copy()))
    data = B.write_bundle(sample(fallback=fb))
    lay = layout(data)
    assert lay["fallback_offset"] >= lay["weights_offset"] + lay["weights_size"]
    assert lay["fallback_offset"] % B.SECTION_ALIGN == 0 and lay["fallback_size"] == len(fb)
    b = B.read_bundle(data)
    assert bytes(b.fallback) == fb and B.read_bundle(b.fallback).weights.tolist() == list(range(15, -1, -1))
    again = B.write_bundle(b)                                 # read and written again: identical
    assert again == data


def craft(data: bytes, **fields) -> bytes:
    return fuzz_fields.reseal_sections(data, **fields)


@pytest.mark.parametrize("fields, needle", [
    (dict(weights_offset=256 + 1), "weights_offset = 257 is not a multiple of 256"),
    (dict(weights_offset=0), "weights_offset = 0 overlaps the flatbuffer"),
    (dict(weights_size=1 << 40), "weights_size = 1099511627776 runs past the end"),
    (dict(weights_offset=(1 << 64) - 256), "weights_size = 16 runs past the end"),
    (dict(weights_size=0), "weights_offset"),
    (dict(fallback_size=4), "fallback_offset = 0 overlaps the flatbuffer"),
    (dict(flatbuffer_bytes=1 << 33), "flatbuffer_bytes = 8589934592 is not a length within"),
    (dict(flatbuffer_bytes=4), "flatbuffer_bytes = 4"),
    (dict(flatbuffer_bytes=100), "flatbuffer_bytes = 100 cuts the flatbuffer short"),   # its offsets leave it
])
def test_crafted_section_fields_are_refused_by_name(fields, needle):
    data = B.write_bundle(sample())
    with pytest.raises(BundleError) as e:
        B.read_bundle(craft(data, **fields))
    assert needle in str(e.value), str(e.value)


def test_crafted_overlapping_sections_are_refused():
    data = B.write_bundle(sample(fallback=B.write_bundle(sample())))
    lay = layout(data)
    for foff in (lay["weights_offset"], lay["weights_offset"] - 256 if lay["weights_offset"] - 256 >= lay[
            "flatbuffer_bytes"] else lay["weights_offset"]):
        with pytest.raises(BundleError, match="fallback_offset .* overlaps the (weights section|flatbuffer)"):
            B.read_bundle(craft(data, fallback_offset=foff))
    for fields in (dict(fallback_size=lay["fallback_size"] - 8), dict(fallback_offset=lay["fallback_offset"] + 256,
                                                                   fallback_size=lay["fallback_size"] - 256)):
        with pytest.raises(BundleError, match=r"header field fallback_size = \d+ \(fallback_offset \d+\) does not "
                                              "frame a bundle file"):
            B.read_bundle(craft(data, **fields))
    # the weights shrunk inside their section: the tensors then lie outside their memory
    with pytest.raises(BundleError, match=r"tensor 2 \('w'\) lies outside its memory"):
        B.read_bundle(craft(data, weights_size=8))


def test_crafted_sound_layout_still_reads():
    """craft() itself keeps a sound file sound (so the refusals above are the fields', not craft's)."""
    data = B.write_bundle(sample(fallback=B.write_bundle(sample())))
    assert B.read_bundle(craft(data)).weights.tolist() == list(range(16))


def test_inline_weights_in_a_format_4_payload_are_refused():
    data = B.write_bundle(sample())
    v3 = B.write_bundle(sample(format_version=3))            # inline weights, then relabelled 4 and resealed
    head = B.read_header(v3)
    import flatbuffers
    ob = flatbuffers.Builder(1024)
    stats = head["stats"]
    vals = (0, 0, 0, 0, 0)
    root = {"magic": head["magic"], "format_version": 4, "compiler_version": head["compiler_version"],
            "fingerprint": head["fingerprint"], "payload": np.frombuffer(bytes(head["payload"]), np.uint8),
            "stats": stats}
    for _ in range(2):
        vals = (vals[0] or 1,) + vals[1:]
        ob = flatbuffers.Builder(1024)
        ob.Finish(flatbuf.write(ob, B.BUNDLE_SCHEMA, "Bundle", dict(
            root, checksum=B.checksum(head["payload"], head["compiler_version"], head["fingerprint"], 4, stats, vals),
            **dict(zip(B.SECTION_FIELDS, vals)))), file_identifier=B.FILE_ID)
        vals = (len(ob.Output()),) + vals[1:]
    with pytest.raises(BundleError, match="format 4 payload with inline weights"):
        B.read_bundle(with_trailer(bytes(ob.Output())))
    assert B.read_bundle(data).weights.tolist() == list(range(16))


def test_format_3_bundles_still_read_and_write():
    v3 = B.write_bundle(sample(format_version=3))
    b = B.read_bundle(v3)
    assert b.format_version == 3 and b.weights.tolist() == list(range(16))
    assert B.write_bundle(b) == v3                            # a v3 bundle resealed stays v3
    b.format_version = 4
    assert B.read_bundle(B.write_bundle(b)).weights.tolist() == list(range(16))


def test_format_3_section_fields_are_refused():
    v3 = B.write_bundle(sample(format_version=3))
    head = B.read_header(v3)
    import flatbuffers
    ob = flatbuffers.Builder(1024)
    ob.Finish(flatbuf.write(ob, B.BUNDLE_SCHEMA, "Bundle", {
        "magic": head["magic"], "format_version": 3, "compiler_version": head["compiler_version"],
        "fingerprint": head["fingerprint"], "checksum": head["checksum"],
        "payload": np.frombuffer(bytes(head["payload"]), np.uint8), "stats": head["stats"], "weights_size": 5}),
        file_identifier=B.FILE_ID)
    with pytest.raises(BundleError, match="format 3 bundle with format 4 section fields"):
        B.read_bundle(with_trailer(bytes(ob.Output())))


def _x(shape=(1, 5, 5, 3)):
    return np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)


def test_v3_fp16_fixture_loads_and_runs_its_fallback(monkeypatch):
    """A format 3 fp16 bundle (tests/runtime/data, written by gpuc before format 4) with its inline fp32
    fallback: it loads and runs, and on a device without 16-bit storage its fallback runs the same."""
    from helpers.models import conv_mean_softmax
    v3 = (DATA / "v3_conv_fp16.gpub").read_bytes()
    b = B.read_bundle(v3)
    assert b.format_version == 3 and b.fallback and B.read_bundle(b.fallback).format_version == 3
    now = gpuc.compile(conv_mean_softmax(), precision="fp16", cache=False)
    assert B.read_bundle(now).format_version == 4 and B.read_bundle(B.read_bundle(now).fallback).format_version == 4
    x = _x()
    with gpuc.load(v3) as m3, gpuc.load(now) as m4:
        assert np.array_equal(m3.run([x])[0], m4.run([x])[0])
    monkeypatch.setenv("GPUC_DISABLE_FP16", "1")
    with pytest.warns(RuntimeWarning, match="fp32 program"), gpuc.load(v3, device=gpuc.open_device()) as f3, \
            gpuc.load(now, device=gpuc.open_device()) as f4:
        assert np.array_equal(f3.run([x])[0], f4.run([x])[0])


def test_v3_two_signature_fixture_loads():
    v3 = (DATA / "v3_two_signatures.gpub").read_bytes()
    b = B.read_bundle(v3)
    assert b.format_version == 3 and [s.signature for s in b.signatures] == ["step"]
    assert b.signatures[0].weights is b.weights
    with gpuc.load(v3) as m:
        assert m.signatures == ["fill_3", "step"]


def test_v4_multi_signature_bundle_shares_the_weights_section():
    from helpers.signatures import two_signature_model
    data = gpuc.compile(two_signature_model(), cache=False)
    b = B.read_bundle(data)
    assert b.format_version == 4 and b.weights.nbytes and b.signatures[0].weights is b.weights
    lay = layout(data)
    assert lay["weights_size"] == b.weights.nbytes and lay["fallback_size"] == 0
    sub = B.read_header(B.write_bundle(B._without_weights(b.signatures[0])))
    assert sub["sections"] == {"weights": (0, 0), "fallback": (0, 0)}   # a signature's own bundle: no sections
    b.signatures[0].format_version = 3                        # formats mixed inside one bundle
    mixed = B.write_bundle(b)
    assert B.read_bundle(mixed).signatures[0].format_version == 4  # (the writer writes them at the top's)
    assert struct.unpack("<I", data[:4])[0] < lay["flatbuffer_bytes"]
