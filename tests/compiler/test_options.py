"""CompileOptions (compiler/options.py) and the runtime Settings (runtime/settings.py): every compile
switch is in the compile-cache key, the environment is read only by those two modules, and
gpuc.compiler.compile reports a hit or a miss (CompileResult)."""
import re
from pathlib import Path

import pytest

from gpuc.compiler import CompileResult, cache as cc, compile as compile_result, compile_model
from gpuc.compiler import options as O
from gpuc.compiler.ops.depthwise_plan import DwPlan
from gpuc.compiler.ops.gemm_cm2 import Cm2Plan
from gpuc.errors import GpucError
from gpuc.runtime import settings as S
from helpers.builder import ModelBuilder

REPO = Path(__file__).resolve().parents[2]

# a value other than the default for every field (a new field without one fails the test below)
NON_DEFAULT = {
    "precision": "fp16", "disable_passes": ("fuse_activation",), "max_batch": 2,
    "input_shapes": (("x", [1, 6]),), "dynamic": ("x:0<=4",), "max_binding_bytes": 1 << 20,
    "verify_passes": True, "break_op": "RELU6", "coopmat_emulate": True, "fp16_plain_gemms": True,
    "dynamic_debug": 2, "dw_plan": DwPlan(1, 2, 4), "cm2_plan": Cm2Plan(32, 32, 16, 128), "split_k": 4,
    "cm2_act_candidates": 0,
    "reg_factor": 1, "coopmat_vec8": False, "coopmat_direct": False, "coopmat_reg_chain": True,
    "tune_candidates": 0, "coopmat_small_m": False, "coopmat_mid_candidates": 0, "attention_prefetch": True, "attention_split": 2,
    "int8_measured": False, "int8_emulate": True, "split_k_conv": False, "blockwise_kernel": False,
    "ew_vectors": 0, "copy_words": (),
}


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path / "cache"))
    for _, var in O.ENV_FIELDS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("GPUC_NO_CACHE", raising=False)


def relu6_model(n=6) -> bytes:
    mb = ModelBuilder()
    x = mb.input("x", [1, n])
    y = mb.tensor("y", [1, n])
    mb.op("RELU6", [x], [y])
    mb.output(y)
    return mb.finish()


def test_every_field_changes_the_cache_key():
    assert set(NON_DEFAULT) == set(O.CompileOptions.field_names())
    model = relu6_model()
    base = cc.cache_key(model, "m", O.resolve())
    keys = {base}
    for name, value in NON_DEFAULT.items():
        opts = O.resolve(**{name: value})
        assert getattr(opts, name) != getattr(O.DEFAULT, name), name
        keys.add(cc.cache_key(model, "m", opts))
    assert len(keys) == len(NON_DEFAULT) + 1          # each field alone gives a key of its own


@pytest.mark.parametrize("var,field,text,value", [
    ("GPUC_TEST_BREAK_OP", "break_op", "ADD", "ADD"),
    ("GPUC_TEST_COOPMAT_EMULATE", "coopmat_emulate", "1", True),
    ("GPUC_FP16_PLAIN_GEMMS", "fp16_plain_gemms", "1", True),
    ("GPUC_DYNAMIC_DEBUG", "dynamic_debug", "2", 2),
    ("GPUC_VERIFY_PASSES", "verify_passes", "1", True),
])
def test_environment_switches_enter_the_options_and_the_key(monkeypatch, var, field, text, value):
    model = relu6_model()
    before = cc.cache_key(model, "m", O.resolve())
    monkeypatch.setenv(var, text)
    opts = O.resolve()
    assert getattr(opts, field) == value and O.current() == opts
    assert cc.cache_key(model, "m", opts) != before
    monkeypatch.setenv(var, "0" if field != "break_op" else "")
    assert getattr(O.resolve(), field) == getattr(O.DEFAULT, field)


def test_break_op_miscompiles_through_the_options_and_misses_the_cache(monkeypatch):
    """GPUC_TEST_BREAK_OP changes the kernels (GPUC_TEST_BROKEN defined): never served from the entry
    of a sound compile."""
    model = relu6_model()
    sound = compile_result(model)
    assert sound.cache == "miss" and isinstance(sound, CompileResult)
    monkeypatch.setenv("GPUC_TEST_BREAK_OP", "RELU6")
    broken = compile_result(model)
    assert broken.cache == "miss" and broken.key != sound.key and broken.options.break_op == "RELU6"
    assert broken.bundle != sound.bundle
    monkeypatch.delenv("GPUC_TEST_BREAK_OP")
    again = compile_result(model)
    assert again.hit and again.bundle == sound.bundle


def test_compile_result_reports_hit_miss_and_cache_off(tmp_path):
    model = relu6_model(7)
    first = compile_result(model, output=tmp_path / "a.bundle")
    assert (first.cache, first.hit, first.path) == ("miss", False, tmp_path / "a.bundle")
    assert first.stats["dispatches"] >= 1 and first.bundle == (tmp_path / "a.bundle").read_bytes()
    second = compile_result(model)
    assert second.hit and second.key == first.key and second.stats == first.stats and second.path is None
    off = compile_result(model, cache=False)
    assert off.cache is None and off.key is None and off.bundle == first.bundle
    assert compile_model(model) == first.bundle                      # the bytes API is unchanged


def test_options_object_and_keywords():
    model = relu6_model(5)
    opts = O.CompileOptions(precision="fp16")
    r = compile_result(model, options=opts, cache=False)
    assert r.options.precision == "fp16"
    assert compile_result(model, options=opts, precision="fp32", cache=False).options.precision == "fp32"
    assert compile_model(model, options=opts, cache=False) == r.bundle


def test_precedence(monkeypatch):
    monkeypatch.setenv("GPUC_TEST_BREAK_OP", "ADD")
    with O.using(O.DEFAULT.replace(split_k=2, break_op="SUB")):
        o = O.resolve()
        assert o.split_k == 2 and o.break_op == "ADD"              # the environment over the active options
        assert O.resolve(break_op="MUL").break_op == "MUL"          # a keyword over both
        assert O.resolve(options=O.DEFAULT).break_op is None        # options= is taken whole
    assert O.resolve().split_k is None


@pytest.mark.parametrize("kwargs,field", [({"split_k": 0}, "split_k"), ({"reg_factor": -1}, "reg_factor"),
                                          ({"dynamic_debug": 3}, "dynamic_debug"), ({"dw_plan": (1, 2)}, "dw_plan"),
                                          ({"coopmat_vec8": "yes"}, "coopmat_vec8"), ({"max_batch": 0}, "max_batch"),
                                          ({"tune_candidates": -1}, "tune_candidates"),
                                          ({"coopmat_mid_candidates": -1}, "coopmat_mid_candidates"),
                                          ({"attention_prefetch": 1}, "attention_prefetch"),
                                          ({"attention_split": 0}, "attention_split"),
                                          ({"split_k_conv": "no"}, "split_k_conv"),
                                          ({"blockwise_kernel": "yes"}, "blockwise_kernel"),
                                          ({"ew_vectors": 4}, "ew_vectors"), ({"ew_vectors": True}, "ew_vectors"),
                                          ({"copy_words": (4,)}, "copy_words"), ({"copy_words": 2}, "copy_words"),
                                          ({"copy_words": (1, 1)}, "copy_words")])
def test_bad_values_name_the_field(kwargs, field):
    with pytest.raises(GpucError, match=field):
        O.resolve(**kwargs)


def ew_concat_model() -> bytes:
    """SUB + MUL (one fused elementwise dispatch over [4, 16, 64]) and its result concatenated with an input
    along the last axis (one gather copy of 8192 elements)."""
    mb = ModelBuilder()
    x, z = mb.input("x", [4, 16, 64]), mb.input("z", [4, 16, 64])
    s, m = mb.tensor("s", [4, 16, 64]), mb.tensor("m", [4, 16, 64])
    mb.op("SUB", [x, z], [s])
    mb.op("MUL", [s, z], [m])
    y = mb.tensor("y", [4, 16, 128])
    mb.op("CONCATENATION", [m, x], [y], axis=2)
    mb.output(y)
    return mb.finish()


def grids(bundle: bytes) -> list:
    """(op of the label, workgroups along x) of each dispatch."""
    from gpuc.runtime.bundle import read_bundle
    return [(d.label.split(" ")[0], d.groups[0]) for d in read_bundle(bundle).dispatches]


@pytest.mark.parametrize("kwargs,grid", [
    ({"ew_vectors": 0}, [("SUB+MUL", 64), ("GATHER_COPY", 16)]),      # one element per invocation
    ({"ew_vectors": 2}, [("SUB+MUL", 8), ("GATHER_COPY", 16)]),       # 8
    ({"copy_words": ()}, [("SUB+MUL", 16), ("GATHER_COPY", 128)]),    # the scalar copy
    ({"copy_words": (1,)}, [("SUB+MUL", 16), ("GATHER_COPY", 32)]),   # one word of 4
])
def test_ew_vectors_and_copy_words_have_cache_entries_of_their_own(kwargs, grid):
    """ew_vectors / copy_words (module globals benchmarks once assigned: ops/ew_fused.py VECS, ops/gather_copy.py
    WIDE) change the dispatch grids; a compile with another value misses the default's cache entry instead
    of reusing its bundle, and each value then hits its own entry."""
    model = ew_concat_model()
    default = compile_result(model)
    assert default.cache == "miss" and grids(default.bundle) == [("SUB+MUL", 16), ("GATHER_COPY", 16)]
    other = compile_result(model, **kwargs)
    assert other.cache == "miss" and other.key != default.key and grids(other.bundle) == grid
    assert compile_result(model).bundle == default.bundle and compile_result(model, **kwargs).hit
    assert compile_result(model, options=O.resolve(**kwargs)).bundle == other.bundle


def test_unknown_option_and_frozen():
    with pytest.raises(GpucError, match="unknown compile option"):
        O.resolve(no_such_option=1)
    with pytest.raises(AttributeError, match="frozen"):
        O.DEFAULT.precision = "fp16"


def test_settings_follow_the_environment_and_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUC_ALL_BARRIERS", "1")
    monkeypatch.setenv("GPUC_PIPELINE_THREADS", "3")
    s = S.current()
    assert s.all_barriers and s.pipeline_threads == 3 and s.cache_dir == str(tmp_path / "cache")
    with S.override(all_barriers=False, upload_memory="cached"):
        assert not S.current().all_barriers and S.current().upload_memory == "cached"
    assert S.current().all_barriers
    monkeypatch.setenv("GPUC_ALL_BARRIERS", "0")
    assert not S.current().all_barriers
    with pytest.raises(TypeError, match="unknown"):
        S.override(no_such_setting=1)
    with pytest.raises(ValueError):
        S.export("NOT_A_GPUC_SETTING", "1")
    assert S.current().device_key() == S.current().replace(gpu_timeout_s="5").device_key()


ENV_ACCESS = re.compile(r"\bos\.(environ|getenv|putenv|unsetenv)\b|\bfrom os import\b.*\b(environ|getenv)\b")
ALLOWED = {"compiler/options.py", "runtime/settings.py"}


def test_only_the_options_and_settings_modules_touch_the_environment():
    hits = sorted(str(p.relative_to(REPO)) for top in ("compiler", "runtime", "gpuc") for p in (REPO / top).rglob("*.py")
                  if ENV_ACCESS.search(p.read_text()))
    assert set(hits) == ALLOWED, f"environment read outside options/settings: {sorted(set(hits) - ALLOWED)}"


def test_readme_lists_every_option_and_setting():
    """README's configuration tables name every CompileOptions field and every settings variable."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Configuration"):text.index("## Threads")]
    missing = [f"`{n}`" for n in O.CompileOptions.field_names() if f"`{n}`" not in section]
    missing += [v for v in S.ENV_NAMES if v != "_GPUC_COMPLETE" and f"`{v}" not in section]
    missing += [v for _, v in O.ENV_FIELDS if f"`{v}" not in section]
    assert not missing, f"README's configuration section does not list {missing}"
