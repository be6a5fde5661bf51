"""Bundles as untrusted input (issue 26, rows 1-5 and 7): one field of a valid bundle changed and every
digest recomputed ("resealed") must be refused with a BundleError naming the shader or dispatch, before
any Vulkan object exists, never run to a crash, a hang or a silently wrong answer."""
import struct
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import gpuc
from gpuc.errors import BundleError, UnsupportedError
from gpuc.runtime import bundle as B
from gpuc.runtime import bundle_shaders, load_checks, shader_check, spirv_tools
from helpers.builder import ModelBuilder
from helpers.models import conv_mean_softmax as conv_model


@pytest.fixture(scope="module")
def bundle() -> bytes:
    return gpuc.compile(conv_model(), disable_passes=["schedule_dispatches"])


def reseal(data: bytes, edit) -> bytes:
    b = B.read_bundle(data)
    edit(b)
    return B.write_bundle(b)


def words(code: bytes) -> list:
    return list(struct.unpack(f"<{len(code) // 4}I", code))


def pack(w) -> bytes:
    return struct.pack(f"<{len(w)}I", *w)


def refused(data: bytes, *needles):
    with pytest.raises(BundleError) as e:
        B.read_bundle(data)
    assert all(n in str(e.value) for n in needles), str(e.value)
    return str(e.value)


def test_a_resealed_unchanged_bundle_runs_to_the_same_outputs(bundle):
    x = np.random.default_rng(0).uniform(-1, 1, (1, 5, 5, 3)).astype(np.float32)
    with gpuc.load(bundle) as a, gpuc.load(reseal(bundle, lambda b: None)) as b:
        assert np.array_equal(a.run([x])[0], b.run([x])[0])


def test_row1_id_bound_lie_is_refused_by_read_and_inspect(bundle, tmp_path):
    def edit(b):
        w = words(b.shaders[0].spirv)
        w[3] = 0xFFFFFFFF
        b.shaders[0].spirv = pack(w)
    bad = reseal(bundle, edit)
    refused(bad, "shader 0", "id bound")
    p = tmp_path / "bad.bundle"
    p.write_bytes(bad)
    r = subprocess.run([sys.executable, "-m", "gpuc", "inspect", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and "id bound" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("how", ["truncated", "no_function_end", "scrambled_body", "no_entry_point"])
def test_row2_malformed_spirv_is_refused(bundle, how):
    def edit(b):
        w = words(b.shaders[0].spirv)
        if how == "truncated":
            w = w[:len(w) // 2]
        elif how == "no_function_end":
            w = w[:-1]
        elif how == "scrambled_body":
            i = 5
            while w[i] & 0xFFFF != 54:                                          # the first OpFunction
                i += w[i] >> 16
            i += w[i] >> 16
            w[i] = (w[i] & 0xFFFF0000) | 0x7FFF                                 # an opcode that does not exist
        else:
            i = 5
            while w[i] & 0xFFFF != 15:
                i += w[i] >> 16
            del w[i:i + (w[i] >> 16)]
        b.shaders[0].spirv = pack(w)
    refused(reseal(bundle, edit), "shader 0")


def test_row2_without_spirv_tools_the_instruction_walk_still_refuses(bundle, monkeypatch):
    monkeypatch.setattr(spirv_tools, "_lib", False)
    monkeypatch.setattr(bundle_shaders, "_validated", set())
    monkeypatch.setenv("GPUC_NO_VALIDATION_CACHE", "1")
    assert not spirv_tools.available()

    def edit(b):
        b.shaders[0].spirv = b.shaders[0].spirv[:-4]
    refused(reseal(bundle, edit), "shader 0", "OpFunctionEnd")


def test_row4_shrunk_tensor_is_refused(bundle):
    def edit(b):
        t = b.tensors[b.dispatches[0].bindings[0]]
        t.shape, t.nbytes = (1,), 4
    refused(reseal(bundle, edit), "dispatch 0", "shapes [[1]")


def test_io_record_lies_are_refused(bundle):
    def edit(b):
        b.outputs[0] = b.dispatches[0].bindings[0]
    refused(reseal(bundle, edit), "inputs and outputs")


def test_row4_rebinding_to_a_small_tensor_is_refused(bundle):
    def edit(b):
        d = b.dispatches[0]
        small = min(range(len(b.tensors)), key=lambda i: b.tensors[i].nbytes)
        d.bindings[1] = small
    refused(reseal(bundle, edit), "dispatch 0", "does not match its kernel", "tensors")


def _serves(b, k) -> set:
    """(dispatch, workgroup counts) of each use of shader k: as a dispatch's kernel or as a variant of it."""
    return ({(j, tuple(d.groups)) for j, d in enumerate(b.dispatches) if d.shader == k}
            | {(v.dispatch, tuple(v.groups)) for v in b.variants if v.shader == k})


def test_row4_spirv_swapped_between_dispatches_is_refused(bundle):
    """(A kernel and its own variant with the same grid -- MEAN and its `cols` form -- are interchangeable: each
    computes that dispatch, so a swap of the two is neither refused nor wrong, and is left out.)"""
    b0 = B.read_bundle(bundle)
    pairs = [(i, j) for i in range(len(b0.shaders)) for j in range(i + 1, len(b0.shaders))
             if b0.shaders[i].bindings == b0.shaders[j].bindings and _serves(b0, i) != _serves(b0, j)]
    assert pairs, "the test model needs two shaders with the same binding count"
    for i, j in pairs:
        def edit(b, i=i, j=j):
            b.shaders[i].spirv, b.shaders[j].spirv = b.shaders[j].spirv, b.shaders[i].spirv
        refused(reseal(bundle, edit), "dispatch")

        def edit_index(b, i=i, j=j):       # the dispatch (or else the variant) that runs shader i runs j
            d = next((d for d in b.dispatches if d.shader == i), None) or next(v for v in b.variants if v.shader == i)
            d.shader = j
        refused(reseal(bundle, edit_index), "dispatch")


def test_row4_dropped_binding_is_refused(bundle):
    def edit(b):
        d = b.dispatches[0]
        d.bindings.pop()
        b.shaders[d.shader].bindings -= 1
    refused(reseal(bundle, edit), "shader")


def test_a_written_binding_must_be_in_the_arena(bundle):
    def edit(b):
        d = b.dispatches[0]
        need = b.tensors[d.bindings[0]].nbytes
        big = next(i for i, t in enumerate(b.tensors) if t.memory == B.WEIGHTS and t.nbytes >= need)
        d.bindings[0] = big
    refused(reseal(bundle, edit), "dispatch 0", "tensors")


@pytest.mark.parametrize("groups", [(65535, 65535, 1), (2, 1, 1), (1, 1, 7)])
def test_row5_grid_lies_are_refused(bundle, groups):
    def edit(b):
        b.dispatches[-1].groups = groups
    refused(reseal(bundle, edit), "workgroup counts")


def test_tensor_offset_and_item_unit_lies_are_refused(bundle):
    def edit_offset(b):
        b.tensors[b.dispatches[0].bindings[0]].offset += 256
        b.arena_bytes += 256
    refused(reseal(bundle, edit_offset), "offsets")

    def edit_item(b):
        b.dispatches[0].item_inner = 1
    refused(reseal(bundle, edit_item), "item unit")


def test_row3_dynamic_dims_shape_lie_is_refused_at_load():
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 4])
    y = mb.tensor("y", [1, 6, 4])
    mb.op("TANH", [x], [y])
    mb.output(y)
    data = gpuc.compile(mb.finish(), dynamic=["x:1<=6"])

    def edit(b):
        dd = b.options["dynamic_dims"]
        out = str(b.outputs[0])
        dd["shapes"][out][1] = ["*", dd["shapes"][out][1], 65536]
    refused(reseal(data, edit), "differ from the header's record")

    def edit_both(b):            # the header's record lies too: the sizes check at load still refuses it
        edit(b)
        b.stats["io"] = B.io_record(b.tensors, b.inputs, b.outputs, b.options)
    with pytest.raises(BundleError, match="dynamic_dims gives tensor"):
        gpuc.load(reseal(data, edit_both))

    def edit_bound(b):
        b.options["dynamic_dims"]["dims"][0][2] = 64
        b.stats["io"] = B.io_record(b.tensors, b.inputs, b.outputs, b.options)
    with pytest.raises(BundleError, match="dynamic_dims bounds"):
        gpuc.load(reseal(data, edit_bound))

    def edit_grid(b):
        b.options["dynamic_dims"]["grids"][0] = 1
    refused(reseal(data, edit_grid), "does not match its kernel", "gt")


def test_row7_binding_limit_at_compile_and_at_load(bundle):
    mb = ModelBuilder()
    x = mb.input("x", [1, 1024])
    y = mb.tensor("y", [1, 1024])
    mb.op("RELU", [x], [y])
    mb.output(y)
    with pytest.raises(UnsupportedError, match="binding limit of 2048 bytes"):
        gpuc.compile(mb.finish(), max_binding_bytes=2048, cache=False)
    data = gpuc.compile(mb.finish())
    b = B.read_bundle(data)
    assert b.stats["largest_binding_bytes"] == 4096
    limits = SimpleNamespace(maxComputeWorkGroupCount=[65535] * 3, maxComputeWorkGroupSize=[1024, 1024, 64],
                             maxComputeWorkGroupInvocations=1024, maxPushConstantsSize=128,
                             maxStorageBufferRange=4095)
    with pytest.raises(BundleError, match="maxStorageBufferRange"):
        load_checks.check(b, SimpleNamespace(limits=limits, name="small"))
    limits.maxStorageBufferRange = 4096
    load_checks.check(b, SimpleNamespace(limits=limits, name="small"))


def test_manifest_round_trip_and_malformed_manifests():
    from gpuc.compiler.codegen.glslang import compile_glsl
    code = compile_glsl("#version 450\nlayout(local_size_x = 8) in;\n"
                        "layout(set = 0, binding = 0) buffer B0 { float y[]; };\nvoid main() { y[0] = 1.0; }\n")
    m = {"ext": [4], "uses": [{"d": 0, "t": [3], "off": [256], "mem": [0], "dt": ["float32"], "sh": [[1]],
                               "g": [1, 1, 1], "item": 0}]}
    f = shader_check.interface(shader_check.add_manifest(code, m), "main")
    assert f.manifest == m and f.local_size == (8, 1, 1) and f.bindings == {0: True} and f.push_bytes == 0
    assert spirv_tools.validate(shader_check.add_manifest(code, m)) is None
    with pytest.raises(ValueError, match="no gpuc manifest"):
        shader_check.interface(code, "main")
    with pytest.raises(ValueError, match="malformed"):
        shader_check.interface(shader_check.add_manifest(code, {"ext": ["x"], "uses": []}), "main")
    with pytest.raises(ValueError, match="entry point"):
        shader_check.interface(shader_check.add_manifest(code, m), "other")


@pytest.mark.parametrize("fields, needle", [
    (lambda h: dict(weights_offset=h["weights_offset"] + 8), "weights_offset"),
    (lambda h: dict(weights_offset=(h["flatbuffer_bytes"] - 1) // 256 * 256), "overlaps the flatbuffer"),
    (lambda h: dict(weights_size=h["weights_size"] + 4096), "runs past the end"),
    (lambda h: dict(flatbuffer_bytes=h["flatbuffer_bytes"] // 2), "flatbuffer_bytes"),
])
def test_row0_section_field_lies_are_refused_by_read_load_and_inspect(bundle, tmp_path, fields, needle):
    """Format 4's section fields (a sealed file, every digest recomputed: scripts/fuzz_fields.py
    reseal_sections): one BundleError naming the field, from read_bundle, gpuc.load and `gpuc inspect`."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "scripts"))
    import fuzz_fields
    head = B.read_header(bundle)
    bad = fuzz_fields.reseal_sections(bundle, **fields({k: int(head[k] or 0) for k in B.SECTION_FIELDS}))
    msg = refused(bad, "header field", needle)
    with pytest.raises(BundleError, match="header field"):
        gpuc.load(bad)
    p = tmp_path / "bad.bundle"
    p.write_bytes(bad)
    r = subprocess.run([sys.executable, "-m", "gpuc", "inspect", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.parametrize("which", ["last", "first"])
def test_a_table_that_lost_a_dispatch_is_refused(bundle, which):
    """Dropping the last dispatch shifts no other's index (fuzz seed 31337, case 1047 ran without it to a wrong
    answer): every dispatch a module was compiled for must still be in the table."""
    def edit(b):
        del b.dispatches[-1 if which == "last" else 0]
    refused(reseal(bundle, edit), "was compiled for dispatch" if which == "last" else "not compiled for dispatch 0")


def test_push_constant_offset_on_a_member_the_struct_lacks_is_refused():
    """Fuzz seed 4711: a resealed module whose push-constant struct's Offset decoration names a member
    index it does not have (as many decorations as members, not 0..n-1) failed with a KeyError; it is a
    ValueError naming the struct (a BundleError when read)."""
    from gpuc.compiler.codegen.glslang import compile_glsl
    code = compile_glsl("#version 450\nlayout(local_size_x = 8) in;\n"
                        "layout(push_constant) uniform P { int a; int b; } pc;\n"
                        "layout(set = 0, binding = 0) buffer B0 { float y[]; };\nvoid main() { y[0] = float(pc.a + pc.b); }\n")
    m = {"ext": [4], "uses": []}
    good = shader_check.add_manifest(code, m)
    assert shader_check.interface(good, "main").push_bytes == 8
    w = words(good)
    i, hits = 5, 0
    while i < len(w):                                # OpMemberDecorate %P 1 Offset 4 -> member 5
        n, op = w[i] >> 16, w[i] & 0xFFFF
        if op == 72 and w[i + 2] == 1 and w[i + 3] == 35:
            w[i + 2], hits = 5, hits + 1
        i += max(n, 1)
    assert hits == 1
    with pytest.raises(ValueError, match="push-constant struct .* lacks member offsets"):
        shader_check.interface(pack(w), "main")


def test_shared_memory_over_the_device_limit_is_refused_at_load():
    """A module whose workgroup variables take more shared memory than the device allows (an H100 lost the
    device on such a pipeline rather than failing its creation): refused at load, naming the shader; the
    bundle's own kernels fit."""
    from gpuc.compiler.codegen.glslang import compile_glsl
    code = compile_glsl("#version 450\nlayout(local_size_x = 64) in;\nshared vec4 big[4096];\nshared float two[2][100];\n"
                        "layout(set = 0, binding = 0) buffer B0 { float y[]; };\n"
                        "void main() { big[gl_LocalInvocationIndex] = vec4(1.0); two[1][3] = 2.0; barrier();"
                        " y[0] = big[3].x + two[1][3]; }\n")
    f = shader_check.interface(shader_check.add_manifest(code, {"ext": [4], "uses": []}), "main")
    assert f.shared_bytes == 4096 * 16 + 2 * 100 * 4
    data = gpuc.compile(conv_model())
    b = B.read_bundle(data)
    limits = SimpleNamespace(maxComputeWorkGroupCount=[65535] * 3, maxComputeWorkGroupSize=[1024, 1024, 64],
                             maxComputeWorkGroupInvocations=1024, maxPushConstantsSize=128,
                             maxStorageBufferRange=1 << 30, maxComputeSharedMemorySize=49152)
    load_checks.check(b, SimpleNamespace(limits=limits, name="big"))
    most = max(i.shared_bytes for i in b.interfaces)
    assert 0 < most <= 49152
    limits.maxComputeSharedMemorySize = most - 1
    with pytest.raises(BundleError, match="shared memory, over device 'small'"):
        load_checks.check(b, SimpleNamespace(limits=limits, name="small"))
