"""The compile cache's fast path (gpuc/launch.py + compiler/cache.py sidecars): a hit prints and
writes exactly what the click CLI does, imports nothing heavy, and anything damaged or doubtful
falls back to the normal path -- a recompile or a fully checked hit, never a wrong bundle."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import gpuc
from gpuc.compiler import cache, compile as compile_result, options
from gpuc.launch import parse_compile
from helpers.builder import ModelBuilder

HEAVY = ("json", "click", "numpy", "gpuc.cli", "gpuc.runtime.bundle", "gpuc.runtime.flatbuf", "gpuc.compiler.driver",
         "pathlib", "tempfile", "dataclasses", "importlib.resources", "flatbuffers")

# Runs the console script's main() in a fresh process; reports its exit code and the heavy modules
# it imported (those loaded before it, e.g. by site-packages .pth files, do not count).
LAUNCH = """
import json, sys
before = set(sys.modules)
from gpuc.launch import main
sys.argv = ["gpuc"] + sys.argv[1:]
try:
    rc = main()
except SystemExit as e:
    rc = e.code
new = set(sys.modules) - before
print(json.dumps({"rc": rc, "heavy": sorted(m for m in %r if m in new)}), file=sys.stderr)
""" % (HEAVY,)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUC_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _model(n=6, cpu_op=False) -> bytes:
    mb = ModelBuilder()
    x = mb.input("x", [1, n])
    y = mb.tensor("y", [1, n])
    mb.op("RELU6", [x], [y])
    if cpu_op:                          # LSH_PROJECTION runs on the CPU: a compiler warning, kept in the stats
        v = mb.tensor("v", [4], "int32")
        hv = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
        mb.op("LSH_PROJECTION", [mb.const("hash", hv), y], [v], type=1)
        mb.output(v)
    else:
        mb.output(y)
    return mb.finish()


@pytest.fixture
def model(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(_model())
    return p


def launch(*args):
    """(rc, stdout, stderr without the report line, heavy modules) of the console script's main()."""
    r = subprocess.run([sys.executable, "-c", LAUNCH, *map(str, args)], capture_output=True, text=True)
    *err, report = r.stderr.splitlines(keepends=True)
    rep = json.loads(report)
    return rep["rc"], r.stdout, "".join(err), rep["heavy"]


def click_cli(*args):
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", *map(str, args)], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def no_ms(text):
    return re.sub(r"\d+\.\d ms", "T ms", text)


def entry(cache_dir, suffix=".bundle"):
    (p,) = (cache_dir / "bundles").glob("*" + suffix)
    return p


@pytest.mark.parametrize("cpu_op,extra", [(False, []), (False, ["--precision", "fp16", "--max-batch=3"]),
                                          (True, ["--disable-pass", "fuse_activation", "-q"])])
def test_fast_hit_prints_and_writes_what_the_click_cli_does(tmp_path, cpu_op, extra):
    m = tmp_path / "w.tflite"
    m.write_bytes(_model(cpu_op=cpu_op))
    rc, out0, err0 = click_cli("compile", m, "-o", tmp_path / "a.bundle", *extra)
    assert rc == 0 and "cache hit" not in out0, err0
    rc, out1, err1 = click_cli("compile", m, "-o", tmp_path / "b.bundle", *extra)
    assert rc == 0 and ("(compile cache hit)" in out1 or "-q" in extra)
    b = (tmp_path / "b.bundle").read_bytes()
    (tmp_path / "b.bundle").unlink()
    rc, out2, err2, heavy = launch("compile", m, "-o", tmp_path / "b.bundle", *extra)
    assert rc == 0 and heavy == []                   # served by the fast path
    assert no_ms(out2) == no_ms(out1) and err2 == err1
    assert ("gpuc: warning:" in err2) == cpu_op and (out2 == "") == ("-q" in extra)
    assert (tmp_path / "a.bundle").read_bytes() == b == (tmp_path / "b.bundle").read_bytes()


def _damage(cache_dir, what):
    bundle, meta = entry(cache_dir), entry(cache_dir, ".meta")
    data, text = bytearray(bundle.read_bytes()), meta.read_bytes()
    if what == "truncate_entry":
        bundle.write_bytes(bytes(data[:len(data) // 2]))
    elif what == "flip_entry":
        data[len(data) // 3] ^= 0x10
        bundle.write_bytes(bytes(data))
    elif what == "flip_trailer":
        data[-1] ^= 0x01
        bundle.write_bytes(bytes(data))
    elif what == "truncate_meta":
        meta.write_bytes(text[:len(text) // 2])
    elif what == "flip_meta":
        meta.write_bytes(text[:20] + bytes([text[20] ^ 1]) + text[21:])
    elif what == "empty_meta":
        meta.write_bytes(b"")
    elif what == "no_meta":
        meta.unlink()
    elif what == "garbage_meta":
        meta.write_bytes(os.urandom(300))
    return bundle


DAMAGE = ["truncate_entry", "flip_entry", "flip_trailer", "truncate_meta", "flip_meta", "empty_meta", "no_meta",
          "garbage_meta"]


@pytest.mark.parametrize("what", DAMAGE)
def test_damage_is_a_miss_for_the_fast_path(cache_dir, model, tmp_path, what):
    good = gpuc.compile(model)
    _damage(cache_dir, what)
    assert cache.serve(str(model), str(tmp_path / "x.bundle"), {}) is None
    assert not (tmp_path / "x.bundle").exists()
    r = compile_result(model, output=tmp_path / "y.bundle")           # the normal path decides
    assert r.bundle == good == (tmp_path / "y.bundle").read_bytes()
    assert r.cache == ("miss" if what.endswith(("entry", "trailer")) else "hit")
    assert cache.serve(str(model), str(tmp_path / "z.bundle"), {}) is not None    # sidecar rewritten
    assert (tmp_path / "z.bundle").read_bytes() == good


@pytest.mark.parametrize("what", ["flip_entry", "garbage_meta"])
def test_damage_through_the_console_script(cache_dir, model, tmp_path, what):
    good = gpuc.compile(model)
    _damage(cache_dir, what)
    rc, out, err, heavy = launch("compile", model, "-o", tmp_path / "x.bundle")
    assert rc == 0 and "Traceback" not in err and "click" in heavy         # fell back
    assert ("cache hit" in out) == (what == "garbage_meta")
    assert (tmp_path / "x.bundle").read_bytes() == good


def test_sidecar_of_another_entry_is_refused(cache_dir, tmp_path):
    a, b = tmp_path / "a.tflite", tmp_path / "b.tflite"
    a.write_bytes(_model(6))
    b.write_bytes(_model(9))
    good_a = gpuc.compile(a)
    gpuc.compile(b)
    ka, kb = (cache.model_key(m, options.resolve()) for m in (a, b))
    meta_a, meta_b = cache_dir / "bundles" / f"{ka}.meta", cache_dir / "bundles" / f"{kb}.meta"
    meta_a.write_bytes(meta_b.read_bytes())                         # copied: names the other key
    assert cache.serve(str(a), str(tmp_path / "x.bundle"), {}) is None
    forged = dict(cache.read_meta(kb), key=ka)                      # right key, the other entry's digest
    meta_a.write_bytes(cache.seal(forged))
    assert cache.read_meta(ka) is not None
    assert cache.serve(str(a), str(tmp_path / "x.bundle"), {}) is None
    r = compile_result(a)
    assert r.bundle == good_a and r.hit
    assert cache.read_meta(ka)["digest"] != forged["digest"]        # rewritten by the full check


def test_in_process_hit_checks_once_without_the_header_parser(model, monkeypatch):
    from gpuc.runtime import bundle
    first = compile_result(model)
    stats = bundle.header_stats(first.bundle)
    assert first.stats == stats
    calls = []
    monkeypatch.setattr(bundle, "read_header", lambda *a: calls.append(a))
    r = compile_result(model)
    assert r.bundle == first.bundle and r.hit and r.stats == stats and calls == []


def _tree(tmp_path):
    roots = [tmp_path / "src" / "a", tmp_path / "src" / "b"]
    (roots[0] / "sub").mkdir(parents=True)
    (roots[0] / "__pycache__").mkdir()
    roots[1].mkdir()
    (roots[0] / "x.py").write_text("x = 1\n")
    (roots[0] / "sub" / "k.comp").write_text("void main() {}\n")
    (roots[0] / "__pycache__" / "x.py").write_text("ignored\n")
    (roots[0] / "notes.txt").write_text("ignored\n")
    (roots[1] / "s.fbs").write_text("table T {}\n")
    return tuple(str(r) for r in roots)


def _fresh_digest(roots):
    cache._sources_memo.clear()
    return cache.sources_digest(roots)


def test_sources_digest_follows_every_source_file(tmp_path, cache_dir):
    roots = _tree(tmp_path)
    d0 = _fresh_digest(roots)
    assert len(list((cache_dir / "sources").iterdir())) == 1
    assert _fresh_digest(roots) == d0                                      # from the memo
    (tmp_path / "src" / "a" / "notes.txt").write_text("changed\n")
    (tmp_path / "src" / "a" / "__pycache__" / "x.py").write_text("changed\n")
    assert _fresh_digest(roots) == d0                                      # not sources
    x = tmp_path / "src" / "a" / "x.py"
    st = os.stat(x)
    x.write_text("x = 2\n")                                                # same size
    os.utime(x, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    d1 = _fresh_digest(roots)
    assert d1 != d0
    for f in (cache_dir / "sources").iterdir():                            # no memo: same answer
        f.unlink()
    assert _fresh_digest(roots) == d1
    for f in (cache_dir / "sources").iterdir():                            # a damaged memo is ignored
        f.write_bytes(b"not a digest")
    assert _fresh_digest(roots) == d1
    (tmp_path / "src" / "b" / "new.glsl").write_text("// new\n")
    assert _fresh_digest(roots) not in (d0, d1)


def test_sources_digest_is_that_of_the_package_sources():
    """Same file set and formula as before the on-disk memo (importlib.resources walk)."""
    import xxhash
    from importlib import resources
    h = xxhash.xxh3_128()
    for pkg in ("gpuc.shaders", "gpuc.compiler", "gpuc.runtime"):
        stack, files = [resources.files(pkg)], []
        while stack:
            for p in stack.pop().iterdir():
                if p.is_dir() and p.name != "__pycache__":
                    stack.append(p)
                elif p.name.endswith((".comp", ".glsl", ".py", ".fbs")):
                    files.append(p)
        for p in sorted(files, key=str):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    assert _fresh_digest(None) == h.hexdigest()


def test_changed_source_misses(model, tmp_path, monkeypatch):
    roots = _tree(tmp_path)
    monkeypatch.setattr(cache, "source_roots", lambda: roots)
    cache._sources_memo.clear()
    gpuc.compile(model)
    assert compile_result(model).cache == "hit"
    (tmp_path / "src" / "b" / "s.fbs").write_text("table U {}\n")
    cache._sources_memo.clear()
    assert compile_result(model).cache == "miss"
    cache._sources_memo.clear()


@pytest.mark.parametrize("argv", [
    ["compile", "m.tflite"], ["compile", "-o", "x"], ["compile", "m", "-o", "x", "--no-cache"],
    ["compile", "m", "-o", "x", "--help"], ["compile", "--help"], ["--help"], ["run", "x.bundle"],
    ["compile", "m", "-o", "x", "--precision", "fp64"], ["compile", "m", "-o", "x", "--max-batch", "2x"],
    ["compile", "m", "-o", "x", "--max-batch", "+2"], ["compile", "m", "-o", "x", "--max-batch", "0"],
    ["compile", "m", "-o", "x", "--max-batch", "4097"], ["compile", "m", "-o", "x", "-o", "y"],
    ["compile", "m", "-ox"], ["compile", "m", "n", "-o", "x"], ["compile", "m", "-o", "x", "--"],
    ["compile", "m", "-o", "x", "--disable-pass"], ["compile", "m", "-o", "-q"], ["compile", "m", "-o", ""],
    ["compile", "m", "-o", "x", "-q", "--quiet"], ["compile", "m", "-o", "x", "--bogus"], [],
])
def test_parser_leaves_what_it_does_not_fully_understand_to_click(argv):
    assert parse_compile(argv) is None


def test_cli_and_fast_path_share_the_compile_options():
    """gpuc/cli.py builds `gpuc compile`'s click options from gpuc.launch.COMPILE_OPTIONS."""
    from gpuc.cli import compile_cmd
    from gpuc.launch import COMPILE_OPTIONS
    click_opts = {p.name: p for p in compile_cmd.params if p.param_type_name == "option"}
    assert set(click_opts) == {o.dest for o in COMPILE_OPTIONS}
    for o in COMPILE_OPTIONS:
        assert tuple(click_opts[o.dest].opts) == o.names and click_opts[o.dest].multiple == o.multiple


def test_parser_understands_the_documented_forms():
    a = parse_compile(["compile", "m.tflite", "--output=o.b", "--precision", "fp16", "--max-batch", "8",
                       "--disable-pass", "p1", "--disable-pass=p2", "--quiet"])
    assert a == {"model": "m.tflite", "output": "o.b", "precision": "fp16", "max_batch": 8,
                 "disable_passes": ["p1", "p2"], "quiet": True}
    assert parse_compile(["compile", "-o", "o.b", "m.tflite"])["precision"] == "fp32"


def test_fallbacks_run_the_click_cli(model, tmp_path, monkeypatch):
    rc, out, err, heavy = launch("compile", "--help")
    assert rc == 0 and "Usage" in out and "click" in heavy
    rc, out, err, heavy = launch("compile", model, "-o", tmp_path / "x.bundle", "--max-batch", "0")
    assert rc == 2 and "Invalid value" in err
    gpuc.compile(model)
    monkeypatch.setenv("GPUC_NO_CACHE", "1")
    rc, out, err, heavy = launch("compile", model, "-o", tmp_path / "x.bundle")
    assert rc == 0 and "cache hit" not in out and "click" in heavy
    monkeypatch.delenv("GPUC_NO_CACHE")
    rc, out, err, heavy = launch("compile", tmp_path / "missing.tflite", "-o", tmp_path / "x.bundle")
    assert rc == 2 and "cannot read model" in err
    rc, out, err, heavy = launch("compile", model, "-o", tmp_path / "no" / "dir" / "x.bundle")
    assert rc == 2 and "cannot write bundle" in err and "Traceback" not in err


def test_cache_list_and_clear_handle_sidecars(model, cache_dir, monkeypatch):
    gpuc.compile(model)
    gpuc.compile(model, precision="fp16")
    assert len(list((cache_dir / "bundles").glob("*.meta"))) == 2
    assert len(cache.list_entries()) == 2
    (cache_dir / "bundles" / ("0" * 32 + ".meta")).write_bytes(b"stray")
    assert cache.clear() == 2
    assert list((cache_dir / "bundles").iterdir()) == []
    monkeypatch.setenv("GPUC_CACHE_MAX_BYTES", "1")
    gpuc.compile(model)
    assert list((cache_dir / "bundles").iterdir()) == []                   # evicted with its sidecar


def test_key_fields_cannot_slide_into_each_other():
    """Model bytes D+'ab' named 'model' and D named 'abmodel' are different compiles: different keys."""
    from gpuc.compiler import cache as cc
    opts = options.resolve()
    d = b"TFL3" * 8
    assert cc.cache_key(d + b"ab", "model", opts) != cc.cache_key(d, "abmodel", opts)


def test_model_from_a_pipe_compiles_with_the_cache_on(tmp_path, monkeypatch):
    """A model path that can be read once (a pipe) is read once: compiled on a miss, a hit next time."""
    import os
    import subprocess
    import sys
    import threading
    from gpuc.compiler import compile as compile_result
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path / "cache"))
    data = _model()
    for expect in ("miss", "hit"):
        r, w = os.pipe()
        threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True).start()
        try:
            res = compile_result(f"/dev/fd/{r}")
        finally:
            os.close(r)
        assert res.cache == expect and res.bundle[4:8] == b"GPUB"
    cli = subprocess.run([sys.executable, "-c", "import sys; from gpuc.launch import main; sys.exit(main())",
                          "compile", "/dev/stdin", "-o", str(tmp_path / "p.bundle")],
                         input=data, capture_output=True, env=dict(os.environ, GPUC_CACHE_DIR=str(tmp_path / "c2")))
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "p.bundle").read_bytes()[4:8] == b"GPUB"
