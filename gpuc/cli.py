"""The `gpuc` command line: compile, run, inspect, devices.

Exit codes: 0 ok; 2 bad input or unsupported model (one-line message); 1 internal error; 3 verify
found a mismatch; 4 the GPU did not finish a run within its timeout (--timeout).
Set GPUC_DEBUG=1 to see tracebacks of internal errors.
On a terminal, long work shows its progress on stderr (gpuc/progress.py); pipes and --json get none.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import time

import click

from gpuc import __version__, progress, require_compiler
from gpuc.errors import GpucError
from gpuc.compile_flags import COMPILE_OPTIONS, compile_summary
from gpuc.runtime import settings


def _fail(msg: str, code: int):
    click.echo(f"gpuc: error: {msg}", err=True)
    sys.exit(code)


def guarded(fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except GpucError as e:
            _fail(str(e).splitlines()[0] if str(e) else type(e).__name__, e.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except BrokenPipeError:
            sys.stderr.close()
            sys.exit(0)
        except Exception as e:  # noqa: BLE001 - the CLI's last line of defence
            if settings.current().debug:
                raise
            first = str(e).splitlines()[0] if str(e) else ""
            _fail(f"internal error: {type(e).__name__}: {first} (set GPUC_DEBUG=1 for details; please report it)", 1)
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuc")
def main():
    """gpuc: compile TensorFlow Lite models to Vulkan compute bundles, and run them."""


def _click_options(options):
    """click options from gpuc.compile_flags' declarations (one definition for the CLI and the launcher's
    fast path, which must not import click)."""
    def decorate(fn):
        for o in reversed(options):
            kw = {"help": o.help or None}
            if o.flag:
                kw["is_flag"] = True
            elif o.choices:
                kw["type"] = click.Choice(list(o.choices))
            elif o.int_range:
                kw["type"] = click.IntRange(*o.int_range)
            elif o.path:
                kw["type"] = click.Path(dir_okay=False)
            if o.default is not None:
                kw.update(default=o.default, show_default=True)
            kw.update({k: v for k, v in (("multiple", o.multiple), ("required", o.required), ("metavar", o.metavar))
                       if v})
            fn = click.option(*o.names, o.dest, **kw)(fn)
        return fn
    return decorate


def _is_litertlm(path: str) -> bool:
    """A LiteRT-LM file: named .litertlm (a damaged one is then refused as such) or starting with its magic."""
    from gpuc.litertlm import MAGIC
    if str(path).lower().endswith(".litertlm"):
        return True
    if not os.path.isfile(path):
        return False          # a pipe or stdin is read once, by the command itself (its bytes are not peeked at)
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False          # the command's own reading reports it


def _timeout_option(fn):
    """--timeout SECONDS: sets GPUC_GPU_TIMEOUT_S for the command (and the processes it starts)."""
    def apply(ctx, param, value):
        if value is not None:
            settings.export("GPUC_GPU_TIMEOUT_S", repr(float(value)))
    return click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
                        expose_value=False, callback=apply,
                        help="how long one run may take on the GPU before it fails (exit 4); 0: no limit "
                             "[default: GPUC_GPU_TIMEOUT_S, else 60 s on a GPU, no limit on a CPU device]")(fn)


def _robust_option(fn):
    """--robust: load on a device with robust buffer access (bundles from untrusted sources)."""
    return click.option("--robust", is_flag=True,
                        help="bound every buffer access of every kernel to its binding (robustBufferAccess, "
                             "and robustBufferAccess2 where present): for bundles from untrusted sources")(fn)


@main.command("compile")
@click.argument("model", type=click.Path(dir_okay=False))
@_click_options(COMPILE_OPTIONS)
@guarded
def compile_cmd(model, output, precision, disable_passes, no_cache, max_batch, input_shapes, dynamic,
                max_binding_bytes, quiet, as_json):
    """Compile MODEL (.tflite, or a LiteRT-LM .litertlm: its LLM's TFLite section, with its tokenizer and
    metadata written beside the bundle as OUTPUT.tokenizer.json|.model and OUTPUT.llm.json) into a bundle."""
    require_compiler("gpuc compile")
    from gpuc.compiler import compile as compile_result
    from gpuc import litertlm
    lm = litertlm.LitertLm(model) if _is_litertlm(model) else None
    t0 = time.perf_counter()
    with progress.reporting(progress.terminal(not quiet and not as_json)):   # stages on stderr, a terminal only
        r = compile_result(lm.tflite() if lm else model, output=output, cache=not no_cache, precision=precision,
                           disable_passes=list(disable_passes), max_batch=max_batch,
                           input_shapes=list(input_shapes), dynamic=list(dynamic),
                           max_binding_bytes=max_binding_bytes)
    dt = time.perf_counter() - t0
    data = r.bundle
    beside = litertlm.write_sidecars(lm, output) if lm else []
    if beside and not quiet and not as_json:
        click.echo(f"wrote {', '.join(beside)} (the .litertlm's tokenizer and LLM metadata, read by gpuc generate)")
    if as_json:
        click.echo(json.dumps({"output": output, "bytes": len(data), "seconds": round(dt, 4),
                               "cache": r.cache, "stats": r.stats, **({"beside": beside} if beside else {})},
                              default=str))
    elif not quiet:
        bound = max([max_batch] + [int(str(d).rpartition("<=")[2]) for d in dynamic if str(d).rpartition("<=")[2].isdigit()])
        for line in compile_summary(output, len(data), r.stats, dt, r.hit, bound):
            click.echo(line)


def _summary(name, a):
    """Shape, dtype, min/max/mean (of the finite elements where some are not), a line of NaN / +Inf /
    -Inf counts where there are any, and the top-5 of a score vector."""
    import numpy as np
    from gpuc import nonfinite
    line = f"{name}: shape {list(a.shape)} {a.dtype}"
    bad = nonfinite.total(c := nonfinite.counts(a))
    vals = a[np.isfinite(a)] if bad else a
    if vals.size and a.dtype.kind in "fiub":
        line += f" {'finite ' if bad else ''}min {vals.min():.6g} max {vals.max():.6g} mean {vals.astype(np.float64).mean():.6g}"
    if bad:
        line += f"\n  non-finite: {nonfinite.describe(c)} (of {a.size} elements)"
    flat = a.reshape(-1)
    if a.size > 1 and a.ndim >= 1 and a.size == a.shape[-1] and a.dtype.kind in "fiu":
        top = np.argsort(-flat, kind="stable")[:5]
        line += "\n  top-5: " + ", ".join(f"{int(i)} ({flat[i]:.5g})" for i in top)
    return line


def _input_option(fn):
    return click.option("-i", "--input", "inputs", multiple=True, metavar="[NAME=]PATH",
                        help="input array (repeatable): PATH.npy in model order, NAME=PATH.npy by name, one "
                             ".npz holding every input (keys: input names, or arr_0.. in model order), or a "
                             "generated tensor: 1x224x224x3xf32=0 (IREE style; =zeros, =ones, =random too), "
                             "NAME=zeros|ones|random at the input's shape and dtype, or zeros|ones|random "
                             "alone (the next input in model order; random is seeded)")(fn)


def _cast_option(fn):
    return click.option("--cast", is_flag=True,
                        help="convert an input of another dtype where every value fits (integers in range, "
                             "integral floats into integers, no float overflow); without it a dtype "
                             "mismatch is an error, as in LiteRT")(fn)


@main.command("run")
@click.argument("bundle", type=click.Path(dir_okay=False))
@_input_option
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="save the outputs: .npz (every output, by name) or .npy (a model with one output); "
                   "its folder is created")
@_cast_option
@click.option("--device", default=None, help="Vulkan device: index, UUID, PCI bus id, name substring or auto (default: GPUC_DEVICE, "
                                               "else the first discrete GPU)")
@_timeout_option
@_robust_option
@click.option("--signature", default=None, metavar="NAME",
              help="run this signature of a multi-signature bundle (default: its first; gpuc inspect lists them)")
@click.option("--json", "as_json", is_flag=True,
              help="print one JSON object: device, run_ms and each output's name, shape, dtype, min, max, mean")
@guarded
def run_cmd(bundle, inputs, output, cast, device, robust, signature, as_json):
    """Run BUNDLE on inputs and print a summary of the outputs."""
    import gpuc
    gpuc.prewarm(device)          # the driver starts while numpy and the runtime import
    from gpuc import io_files
    plan = io_files.output_plan(output)        # checked, and its folder made, before anything runs
    shown = progress.reporting(progress.terminal(not as_json))     # pipelines N of M on a first run, a terminal only
    with shown, gpuc.load(bundle, device=device, robust=robust) as top:
        m = top if signature is None else top.signature(signature)
        if plan:
            plan.check_count(len(m.outputs))
        from gpuc import generated_inputs
        arrays = generated_inputs.resolve(io_files.read_inputs(inputs, [s.name for s in m.inputs]), m.inputs)
        t0 = time.perf_counter()
        outs = m.run(arrays, cast=cast)
        dt = time.perf_counter() - t0
        names = [s.name for s in m.outputs]
        dev = m.device.name
    if plan:
        plan.write(names, outs)
    if as_json:
        click.echo(json.dumps({"device": dev, "run_ms": round(dt * 1e3, 3), "outputs": [_stats(n, a) for n, a in
                                                                                     zip(names, outs)],
                               "saved": output if plan else None}))
        return
    click.echo(f"device: {dev}; run {dt * 1e3:.2f} ms")
    for n, a in zip(names, outs):
        click.echo(_summary(n, a))
    if plan:
        click.echo(f"saved {len(outs)} output(s) to {output}")


def _stats(name, a) -> dict:
    """An output for --json: name, shape, dtype and min / max / mean of its finite values (None if none)."""
    import numpy as np
    vals = a[np.isfinite(a)] if a.dtype.kind == "f" else a
    ok = vals.size and a.dtype.kind in "fiub"
    return {"name": name, "shape": list(a.shape), "dtype": a.dtype.name,
            "min": float(vals.min()) if ok else None, "max": float(vals.max()) if ok else None,
            "mean": float(vals.astype(np.float64).mean()) if ok else None,
            "nonfinite": int(a.size - vals.size)}


@main.command("generate")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--prompt-ids", default=None, metavar="IDS", help="the prompt's token ids, comma-separated: 1,2,3")
@click.option("--prompt", default=None, metavar="TEXT",
              help="the prompt as text (a tokenizer: the .litertlm's, --tokenizer, or the one `gpuc compile` wrote "
                   "beside the bundle); the generated text streams out")
@click.option("--tokenizer", default=None, type=click.Path(dir_okay=False),
              help="HuggingFace tokenizer.json or SentencePiece .model for --prompt")
@click.option("--no-template", is_flag=True, help="--prompt as is, without the model's prompt template")
@click.option("--ids", "show_ids", is_flag=True, help="with --prompt: print the prompt's and the new token ids on stderr")
@click.option("-n", "--max-new-tokens", "--max-tokens", default=16, show_default=True, type=click.IntRange(0),
              help="stop after this many new tokens")
@click.option("--temperature", default=0.0, show_default=True, type=float, help="0: greedy")
@click.option("--top-k", default=0, show_default=True, type=click.IntRange(0), help="0: no cut")
@click.option("--top-p", default=1.0, show_default=True, type=float,
              help="sample from the smallest set of tokens whose probability reaches this (1: no cut)")
@click.option("--seed", default=None, type=int, help="random seed of the sampler (default: a fresh one each time)")
@click.option("--stop-ids", default="", metavar="IDS",
              help="token ids that end the generation (comma-separated; with the model's own stop tokens)")
@click.option("--device", default=None, help="Vulkan device index or name substring")
@_timeout_option
@guarded
def generate_cmd(model, prompt_ids, prompt, tokenizer, no_template, show_ids, max_new_tokens, temperature, top_k,
                 top_p, seed, stop_ids, device):
    """Generate with an LLM: MODEL is a bundle (prefill_N / decode signatures), a litert-torch .tflite
    export or a LiteRT-LM .litertlm file (its tokenizer and stop tokens used). Tokens stream out as made."""
    import gpuc
    from gpuc import litertlm
    from gpuc.runtime.generate import Sampler
    from gpuc.tokenizer import TextStream, Tokenizer

    def ids(text, what):
        try:
            return [int(x) for x in text.replace(" ", "").split(",") if x]
        except ValueError:
            raise click.BadParameter(f"{text!r} is not a comma-separated list of integers", param_hint=what) from None
    if (prompt is None) == (prompt_ids is None):
        raise click.UsageError("give exactly one of --prompt TEXT and --prompt-ids IDS")
    lm = litertlm.LitertLm(model) if _is_litertlm(model) else None
    meta = lm.llm_metadata() if lm else litertlm.read_sidecar_metadata(model)

    def find_tokenizer():
        if tokenizer:
            return Tokenizer.from_file(tokenizer)
        if lm and lm.tokenizer():
            return Tokenizer(*lm.tokenizer(), name=f"{model} (tokenizer section)")
        near = [p for k, p in litertlm.sidecars(model).items() if k != "meta" and os.path.exists(p)]
        return Tokenizer.from_file(near[0]) if near else None
    tok = None
    if prompt is not None:
        tok = find_tokenizer()
        if tok is None:
            near = litertlm.sidecars(model)
            raise click.UsageError(f"--prompt needs a tokenizer: {model} has none beside it "
                                   f"({near['hf']} or {near['sentencepiece']}); give --tokenizer FILE")
        prompt_list = litertlm.prompt_ids(tok, meta, prompt, template=not no_template)
        stops = litertlm.stop_sequences(tok, meta)
    else:
        prompt_list = ids(prompt_ids, "--prompt-ids")
        named = [t for t in meta.stop_tokens if isinstance(t, str) and t]
        vocab = find_tokenizer() if named else None     # stop tokens given as text need the vocabulary
        if named and vocab is None:
            click.echo(f"gpuc: warning: stop tokens {named} ignored: no tokenizer to look them up "
                       "(give --tokenizer FILE)", err=True)
        stops = litertlm.stop_sequences(vocab, meta) if vocab else \
            [tuple(t) for t in meta.stop_tokens if isinstance(t, list) and t]
    stops += [(i,) for i in ids(stop_ids, "--stop-ids")]
    single = [s[0] for s in stops if len(s) == 1]
    sampler = Sampler(temperature, top_k, top_p, seed)
    if lm:
        require_compiler("gpuc generate of a .litertlm file")
        source = gpuc.compile(lm.tflite())              # through the compile cache
    else:
        source = model
    out, stream = [], TextStream(tok) if tok else None
    if show_ids and tok:
        click.echo("prompt ids: " + " ".join(map(str, prompt_list)), err=True)
    with gpuc.load(source, device=device) as m:
        t0 = time.perf_counter()
        for t in m.generate(prompt_list, max_new_tokens, sampler, single):
            out.append(t)
            if not stream:
                click.echo(str(t) + " ", nl=False)
            elif t not in single:              # a stop token ends the text without showing itself
                click.echo(stream.push(t), nl=False)
            if any(len(s) > 1 and tuple(out[-len(s):]) == s for s in stops):
                break
        click.echo()
        if show_ids and tok:
            click.echo("ids: " + " ".join(map(str, out)), err=True)
        click.echo(f"{len(out)} token(s) in {time.perf_counter() - t0:.3f} s (prefill included)", err=True)


@main.command("inspect")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@guarded
def inspect_cmd(path, as_json):
    """Show a model's ops and whether gpuc supports them, or a bundle's contents."""
    from gpuc.inspect import inspect_path
    report, text = inspect_path(path)           # a .tflite model needs the compiler (gpuc.inspect)
    click.echo(json.dumps(report, indent=1) if as_json else text)


@main.command("verify")
@click.argument("model", type=click.Path(dir_okay=False))
@_input_option
@_cast_option
@click.option("--per-op", is_flag=True, help="compare every intermediate tensor and name the first op that diverges")
@click.option("--device", default=None, help="Vulkan device: index, UUID, PCI bus id, name substring or auto (default: GPUC_DEVICE, else the first discrete GPU)")
@click.option("--precision", type=click.Choice(["fp32", "fp16"]), default="fp32", show_default=True,
              help="compile precision (fp16 is judged with tolerance 2e-2 * max|ref|)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object: per output its errors and pass, and pass")
@_timeout_option
@guarded
def verify_cmd(model, inputs, cast, per_op, device, precision, as_json):
    """Compile MODEL, run it with gpuc and with LiteRT's CPU interpreter, and compare (on random
    inputs unless --input gives them)."""
    require_compiler("gpuc verify")
    from gpuc.io_files import read_inputs
    from gpuc.verify import verify
    from gpuc import generated_inputs
    xs = generated_inputs.resolve(read_inputs(inputs), []) if inputs else None
    with progress.reporting(progress.terminal(not as_json)):
        r = verify(model, xs, per_op=per_op, device=device, precision=precision, cast=cast)
    if as_json:
        click.echo(json.dumps(r))
    else:
        for line in _verify_lines(r, per_op):
            click.echo(line)
    sys.exit(0 if r["pass"] and not (per_op and r["first_divergent_op"]) else 3)


def _verify_lines(r, per_op):
    """The text report of `gpuc verify`."""
    from gpuc import nonfinite
    for row in r["outputs"]:
        err = f"max abs {row['max_abs']:.3g}" if row["max_abs"] is not None else "shapes differ"
        yield (f"{row['output']}: {err}, max rel {row['max_rel']:.3g} "
               f"({'ok' if row['pass'] else 'FAIL'}, tolerance {r['tolerance']}"
               + (" or one quantization step" if row.get("integer") else "") + ")")
        if nonfinite.total(row["nonfinite"]) or nonfinite.total(row["ref_nonfinite"]):
            yield "  " + _nonfinite_line(row)
    if per_op:
        bad = [x for x in r["per_op"] if not x["pass"]]
        yield (f"per-op: {len(r['per_op'])} tensors compared, {len(bad)} diverge"
               + (f"; first: {r['first_divergent_op']} ({bad[0]['tensor']}, rel {bad[0]['max_rel']:.3g})" if bad else ""))
    yield from _first_nonfinite_lines(r)
    yield "PASS" if r["pass"] else "FAIL"


def _nonfinite_line(row) -> str:
    from gpuc import nonfinite
    gpu, ref = (nonfinite.describe(c) if c else "-" for c in (row["nonfinite"], row["ref_nonfinite"]))
    n = row["finiteness_mismatch"]
    return (f"non-finite: gpuc {gpu}; LiteRT {ref}; "
            + (f"{n} element(s) differ in finiteness, {row['turned_nonfinite']} of them finite in LiteRT" if n
               else "same places"))


def _first_nonfinite_lines(r):
    """The op where a tensor finite in LiteRT first turns non-finite in gpuc, or why it is not named."""
    first = r.get("first_nonfinite_op")
    turned = sum(row["turned_nonfinite"] or 0 for row in r["outputs"])
    if first:
        yield (f"first op turning non-finite: {first['op']} (tensor {first['tensor']}: {first['elements']} "
               "element(s) finite in LiteRT are not in gpuc)")
    elif turned:
        why = (f"the per-op walk could not run: {r['per_op_error']}" if "per_op_error" in r else
               "the per-op walk (unfused) found no op turning non-finite")
        yield f"{turned} output element(s) non-finite where LiteRT's are finite; {why}"


@main.command("profile")
@click.argument("bundle", type=click.Path(dir_okay=False))
@_input_option
@_cast_option
@click.option("--runs", default=10, show_default=True, help="runs timed; each dispatch's median is shown")
@click.option("--device", default=None, help="Vulkan device: index, UUID, PCI bus id, name substring or auto (default: GPUC_DEVICE, else the first discrete GPU)")
@click.option("--json", "as_json", is_flag=True, help="print the table as one JSON object")
@click.option("--csv", "as_csv", is_flag=True, help="print the table as CSV")
@click.option("--signature", default=None, metavar="NAME",
              help="profile this signature of a multi-signature bundle (default: its first; gpuc inspect lists them)")
@_timeout_option
@_robust_option
@guarded
def profile_cmd(bundle, inputs, cast, runs, device, as_json, as_csv, signature, robust):
    """Time every dispatch with GPU timestamps; a table sorted by time (on random inputs unless
    --input gives them)."""
    import gpuc
    from gpuc.io_files import read_inputs
    from gpuc.runtime import iospec
    from gpuc.runtime.profile import profile
    from gpuc.verify import random_inputs
    with gpuc.load(bundle, device=device, robust=robust) as top:
        from gpuc import generated_inputs
        m = top if signature is None else top.signature(signature)
        xs = generated_inputs.resolve(read_inputs(inputs, [s.name for s in m.inputs]), m.inputs) if inputs \
            else random_inputs(m.inputs)
        r = profile(m, iospec.cast_all(m.inputs, xs) if cast else xs, runs)
    if as_json:
        click.echo(json.dumps(r))
        return
    if as_csv:
        click.echo("index,op,shader,us,raw_us,percent,gb_per_s,gflop_per_s")
        for x in r["rows"]:
            click.echo(f"{x['index']},\"{x['op']}\",{x['shader']},{x['us']:.3f},{x['raw_us']:.3f},{x['percent']:.2f},"
                       f"{x['gb_per_s'] or ''},{x['gflop_per_s'] or ''}")
        return
    batch = f" for {r['items']} items ({r['recorded_dispatches']} recorded)" if r["items"] > 1 else ""
    sig = f"signature {r['signature']}: " if r.get("signature") else ""
    click.echo(f"{sig}device {r['device']}: {r['dispatches']} dispatches{batch}, sum {r['sum_dispatch_ms']:.3f} ms; "
               f"GPU time of a plain run {r['run_gpu_ms']:.3f} ms (raw timestamp sum {r['raw_sum_dispatch_ms']:.3f} ms, "
               f"{r['probe_us']:.2f} us per timestamp taken off each row)")
    click.echo(f"{'#':>4} {'us':>9} {'%':>6} {'GB/s':>8} {'GFLOP/s':>9}  shader / op / shapes")
    for x in r["rows"]:
        gb = f"{x['gb_per_s']:.1f}" if x["gb_per_s"] else "-"
        gf = f"{x['gflop_per_s']:.1f}" if x["gflop_per_s"] else "-"
        click.echo(f"{x['index']:>4} {x['us']:>9.1f} {x['percent']:>6.1f} {gb:>8} {gf:>9}  "
                   f"{x['shader']} / {x['op']} / {x['shapes'][0]}")
    click.echo("per shader:")
    for g in r["by_shader"]:
        click.echo(f"{g['dispatches']:>4} x {g['us']:>9.1f} us {g['percent']:>6.1f} %  {g['shader']}")


@main.command("bench")
@click.argument("bundle", type=click.Path(dir_okay=False, exists=True))
@click.option("--runs", default=100, show_default=True, help="timed run() calls")
@click.option("--device", default=None, help="Vulkan device index or name substring")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object: load times and run time statistics")
@_timeout_option
@guarded
def bench_cmd(bundle, runs, device, as_json):
    """Time loading (cold and with the pipeline cache, each in a fresh process) and running BUNDLE."""
    from gpuc.bench import bench
    from gpuc.runtime import load
    load(bundle, device=device).close()          # fail fast, in this process, on a bad bundle or device
    with progress.reporting(progress.terminal(not as_json)):     # its stages and runs, on a terminal only
        r = bench(bundle, runs, device)
    if as_json:
        click.echo(json.dumps(r))
    else:
        for k, v in r.items():
            click.echo(f"{k:>18}: {v}")


@main.group("cache")
def cache_group():
    """Inspect or clear the compile and pipeline caches."""


@cache_group.command("info")
@guarded
def cache_info():
    """Where the cache is, its size and its cap."""
    from gpuc.runtime import cachedir
    for sub in ("bundles", "pipelines"):
        ents = cachedir.entries(sub)
        click.echo(f"{sub}: {len(ents)} entries, {sum(s for _, s, _ in ents)} bytes")
    click.echo(f"location: {cachedir.cache_dir()}  (cap {cachedir.max_bytes()} bytes per folder; "
               "GPUC_CACHE_DIR, GPUC_CACHE_MAX_BYTES)")


@cache_group.command("list")
@guarded
def cache_list():
    """Cached bundles, least recently used first."""
    require_compiler("gpuc cache list")
    from gpuc.compiler.cache import list_entries
    for e in list_entries():
        click.echo(f"{e['key']}  {e['bytes']:>12} B  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(e['last_used']))}")


@cache_group.command("clear")
@guarded
def cache_clear():
    """Remove every cached bundle and pipeline cache."""
    require_compiler("gpuc cache clear")
    from gpuc.compiler.cache import clear
    click.echo(f"removed {clear()} entries")


@main.command("ops")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object: every op with where it runs, and counts")
@guarded
def ops_cmd(as_json):
    """List every builtin of the TFLite schema and every custom op gpuc knows: GPU, CPU or refused (why)."""
    require_compiler("gpuc ops")
    from gpuc.compiler.passes.fold import FOLDABLE
    from gpuc.op_listing import lines, listing
    data = listing()
    data["folded_when_constant"] = sorted(FOLDABLE)
    if as_json:
        click.echo(json.dumps(data))
        return
    for line in lines(data):
        click.echo(line)
    click.echo(f"folded at compile time when their inputs are constant: {', '.join(sorted(FOLDABLE))}")


@main.command("serve")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--replicas", default=1, type=click.IntRange(1), help="Serve replicas (one GPU each where Ray sees GPUs)")
@click.option("--max-batch", default=None, type=click.IntRange(1, 4096),
              help="batch up to this many requests (default: the bundle's --max-batch; a .tflite is compiled with it)")
@click.option("--batch-wait-ms", default=5.0, type=click.FloatRange(0), help="how long a batch waits to fill")
@click.option("--host", default="127.0.0.1", show_default=True, help="address the HTTP server listens on")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="HTTP port")
@click.option("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else a local cluster)")
@click.option("--num-gpus", default=None, type=click.FloatRange(0), help="GPUs per replica (default: 1 if Ray sees GPUs, else 0)")
@click.option("--direct-ingress", is_flag=True,
              help="each replica serves HTTP on its own port (Ray Serve direct ingress; no proxy hop)")
@guarded
def serve_cmd(model, replicas, max_batch, batch_wait_ms, host, port, address, num_gpus, direct_ingress):
    """Serve a bundle (or .tflite) with Ray Serve over HTTP: dynamic batching, one replica per GPU
    (needs pip install 'gpuc[serve]'; gpuc/serve.py)."""
    from gpuc.serve import serve_forever
    serve_forever(model, replicas, max_batch, batch_wait_ms, host, port, address, num_gpus, echo=click.echo,
                  direct_ingress=direct_ingress)


@main.command("devices")
@click.option("--json", "as_json", is_flag=True, help="index, name, type, uuid and pci_bus_id of each device")
@guarded
def devices_cmd(as_json):
    """List Vulkan devices (any of index, UUID, PCI bus id, name substring, or "auto" is a --device)."""
    from gpuc.runtime.vk_instance import list_devices
    devs = list_devices()
    if as_json:
        click.echo(json.dumps(devs))
        return
    for d in devs:
        click.echo(f"{d['index']}: {d['name']} ({d['type']})  uuid {d['uuid'] or '-'}  pci {d['pci_bus_id'] or '-'}")


if __name__ == "__main__":
    main()
