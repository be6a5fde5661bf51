"""Bundle format: round trip, and refusal of damaged, truncated or foreign files."""
import pytest

from gpuc.errors import BundleError
from gpuc.runtime import bundle as B

from helpers.sample_bundle import SPIRV, sample

def test_round_trip():
    b = B.read_bundle(B.write_bundle(sample()))
    assert b.model_name == "m" and b.tensors[2].quant == {"scale": [0.5], "zero_point": [3], "axis": 0}
    assert b.tensors[1].offset == 256 and b.inputs == [0] and b.outputs == [1]
    assert b.shaders[0].spirv == SPIRV and b.dispatches[0].bindings == [1, 0, 2]
    assert b.weights.tolist() == list(range(16)) and b.options == {"precision": "fp32"}
    assert b.compiler_version == "9.9" and b.fingerprint == "abc"


def test_every_truncation_is_refused():
    data = B.write_bundle(sample())
    for n in range(0, len(data), 7):
        with pytest.raises(BundleError):
            B.read_bundle(data[:n])


def test_every_single_bit_flip_is_refused():
    data = B.write_bundle(sample())
    for pos in range(len(data)):
        for bit in (0, 5):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            with pytest.raises(BundleError):
                B.read_bundle(bytes(bad))


def test_not_a_bundle():
    for junk in (b"", b"hello world", b"\x00" * 64, b"\x1c\x00\x00\x00TFL3" + bytes(40)):
        with pytest.raises(BundleError, match="not a gpuc bundle"):
            B.read_bundle(junk)


def test_newer_format_version_names_the_fix():
    data = B.write_bundle(sample(format_version=B.FORMAT_VERSION + 1))
    with pytest.raises(BundleError, match="newer"):
        B.read_bundle(data)


def test_older_format_version_asks_for_a_rebuild():
    data = B.write_bundle(sample(format_version=B.OLDEST_FORMAT - 1))
    with pytest.raises(BundleError, match="no longer supported.*rebuild"):
        B.read_bundle(data)


@pytest.mark.parametrize("change", [
    dict(steps=[B.Step(B.GPU, first=0, count=2)]),
    dict(steps=[B.Step(B.HOST, op="TOPK_V2", inputs=[0, 99], outputs=[1])]),
    dict(steps=[B.Step(B.JUMP_IF_FALSE, inputs=[0], target=9)]),
    dict(steps=[B.Step(7)]),
    dict(inputs=[7]),
    dict(dispatches=[B.Dispatch(3, [1, 0, 2], (1, 1, 1))]),
    dict(dispatches=[B.Dispatch(0, [1, 0], (1, 1, 1))]),
    dict(dispatches=[B.Dispatch(0, [1, 0, 2], (0, 1, 1))]),
    dict(arena_bytes=100),
    dict(shaders=[B.Shader("s", b"notspirv" * 4, 3)]),
])
def test_inconsistent_tables_are_refused(change):
    with pytest.raises(BundleError, match="corrupt bundle"):
        B.read_bundle(B.write_bundle(sample(**change)))


def test_one_flatbuffer_reader_for_bundles_and_models():
    """runtime/flatbuf.py reads bundles and (through compiler/frontend/fbreader.py) TFLite models;
    a defect names its field, raised as FlatbufferError there and ModelFormatError for a model."""
    from gpuc.compiler.frontend import fbreader
    from gpuc.errors import ModelFormatError
    from gpuc.runtime import flatbuf
    assert issubclass(fbreader.Reader, flatbuf.Reader) and fbreader.Table is flatbuf.Table
    payload = bytearray(B.read_header(B.write_bundle(sample()))["payload"])
    r = flatbuf.Reader(payload, B.BUNDLE_SCHEMA).root("Payload")
    assert r["model_name"] == "m" and len(r["tensors"]) == 3 and r["tensors"][1]["offset"] == 256
    vec = r["tensors"].start                      # first element's uoffset: point it past the end
    payload[vec:vec + 4] = (len(payload)).to_bytes(4, "little")
    with pytest.raises(flatbuf.FlatbufferError, match=r"tensors\[0\]: offset points outside"):
        flatbuf.read(payload, B.BUNDLE_SCHEMA, "Payload")
    with pytest.raises(ModelFormatError, match=r"invalid model: tensors\[0\]: offset points outside"):
        fbreader.Reader(payload, B.BUNDLE_SCHEMA).root("Payload")["tensors"][0]


def test_schema_comes_from_bundle_fbs():
    """BUNDLE_SCHEMA, FILE_ID and the Memory / StepKind values are read from bundle.fbs: a field
    added there is written and read back with no second copy to update."""
    import pathlib
    from gpuc.runtime import flatbuf
    fbs = flatbuf.parse_fbs((pathlib.Path(B.__file__).parent / "bundle.fbs").read_text())
    assert B.BUNDLE_SCHEMA == fbs.tables and fbs.root_type == "Bundle" and B.FILE_ID == b"GPUB"
    assert B.BUNDLE_SCHEMA["TensorInfo"]["offset"] == (4, "Q", 0)
    assert B.BUNDLE_SCHEMA["Payload"]["tensors"] == (2, "[table:TensorInfo]", None)
    assert (B.ARENA, B.WEIGHTS, B.GPU, B.HOST, B.JUMP_IF_FALSE, B.JUMP) == (0, 1, 0, 1, 2, 3)


def test_parse_fbs():
    from gpuc.runtime import flatbuf
    s = flatbuf.parse_fbs('''
        // comment: table Ignored { x: int; }
        file_identifier "ABCD";
        enum Color : ubyte { Red = 1, Green, Blue = 7 }
        table T { a: int = -3; b: Color = Green; c: [Color]; d: string; e: U; f: [U]; g: bool = true;
                  h: double = 0.5; }
        table U { x: ulong; }
        root_type T;''')
    assert s.file_identifier == "ABCD" and s.root_type == "T" and s.enums == {"Color": {"Red": 1, "Green": 2, "Blue": 7}}
    assert s.tables["T"] == {"a": (0, "i", -3), "b": (1, "B", 2), "c": (2, "[B]", None), "d": (3, "str", None),
                             "e": (4, "table:U", None), "f": (5, "[table:U]", None), "g": (6, "?", True),
                             "h": (7, "d", 0.5)}
    assert s.tables["U"] == {"x": (0, "Q", 0)}
    for bad in ("struct S { x: int; }", "table T { x: int (id: 3); }", "table T { x: Nope; }"):
        with pytest.raises(ValueError):
            flatbuf.parse_fbs(bad)
