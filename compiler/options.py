"""CompileOptions: every switch that changes what the compiler emits, in one frozen record.

Read once, at the API boundary (gpuc.compiler.compile / compile_model, the CLI): `resolve(...)`
builds the record from the environment and the explicit arguments, the compile runs inside
`using(options)`, and the code below asks `current()` -- it never reads the environment itself.
All fields enter the compile-cache key (`key_text`), so two compiles that may emit different bundles
never share an entry.

Precedence in `resolve`: keyword arguments, else `options=` (taken whole; the environment is not
consulted), else the environment variables below that are set, else the options `using` made active
around the call, else the defaults.  Code that runs outside any `using` (a test lowering one graph,
`gpuc inspect`) gets `current()` = the environment's options, rebuilt only when those variables change.

The plan overrides (dw_plan, cm2_plan, split_k, split_k_conv, reg_factor, coopmat_*, attention_prefetch,
attention_split,
int8_measured, ew_vectors, copy_words) replace what used to be module globals that benchmarks and tests assigned; None keeps the
planner's own choice (the module's default).

Imports only `os` and `contextvars` (the compile cache's fast path, gpuc/launch.py, builds the key
through here): so CompileOptions is a runtime.settings.Record, not a dataclass (see there).
"""
from __future__ import annotations

import contextvars
import os

from gpuc.errors import GpucError
from gpuc.runtime.settings import OFF, Record

# the options the bundle itself records (its header's `options`; gpuc.compiler.normalize_options)
BUNDLE_FIELDS = ("precision", "disable_passes", "max_batch", "input_shapes", "dynamic", "max_binding_bytes")


class CompileOptions(Record):
    # (name, default, environment variable or None, meaning); the README's configuration table lists them
    FIELDS = (
        ("precision", "fp32", None, "fp32, or fp16 (float16 storage and arithmetic where the device has it)"),
        ("disable_passes", (), None, "IR passes to skip, by name (--disable-pass)"),
        ("max_batch", 1, None, "the bundle runs any batch 1..N (--max-batch)"),
        ("input_shapes", (), None, "concrete shapes for -1 input dims: ((name, dims), ...) (--input-shape)"),
        ("dynamic", (), None, "bounded dynamic dims NAME:AXIS<=MAX (--dynamic)"),
        ("max_binding_bytes", (1 << 32) - 1, None, "the largest tensor a kernel may bind (--max-binding-bytes)"),
        ("verify_passes", False, "GPUC_VERIFY_PASSES", "check the graph between passes (debugging; slower)"),
        ("break_op", None, "GPUC_TEST_BREAK_OP", "tests: miscompile every kernel of this op on purpose"),
        ("coopmat_emulate", False, "GPUC_TEST_COOPMAT_EMULATE", "tests: every fp16 gemm gets the emulated "
                                                                "cooperative-matrix variant (runs on lavapipe)"),
        ("int8_emulate", False, None, "tests: the int8 cooperative-matrix kernels' scalar (EMU) forms, first, "
                                      "every tile plan offered (runs on lavapipe)"),
        ("fp16_plain_gemms", False, "GPUC_FP16_PLAIN_GEMMS", "fp16: gemms without a coopmat variant keep "
                                                             "float16 tensors too (default: float32)"),
        ("dynamic_debug", 0, "GPUC_DYNAMIC_DEBUG", "--dynamic: 1 raises a lowering's SymbolicSize as is, 2 also "
                                                   "a pass's (instead of a clear error / undoing the pass)"),
        ("dw_plan", None, None, "plan override: every depthwise layer with this depthwise_plan.DwPlan"),
        ("cm2_plan", None, None, "plan override: every eligible gemm with this gemm_cm2.Cm2Plan"),
        ("cm2_act_candidates", 2, None, "fp16 gemms with a ReLU-family activation: gemm_cm2 tile plans each carries "
                                        "as `measured` variants (0: none, 1: the rule's plan, 2: every tile)"),
        ("split_k", None, None, "plan override: this split-K factor where it applies (1: none)"),
        ("split_k_conv", None, None, "implicit-GEMM convolutions split K across workgroups too (False: one "
                                     "dispatch each; default gemm_split.CONV)"),
        ("blockwise_kernel", True, None, "int4 blockwise FCs on their own kernel (ops/gemm_qb.py; False: the "
                                         "plain-op rewrite of compiler/ops/blockwise_fc.py)"),
        ("reg_factor", None, None, "planner model: register factor of in-workgroup split-K plans "
                                   "(default ops/gemm_plan.py REG_FACTOR)"),
        ("coopmat_vec8", None, None, "coopmat gemms: 16-byte loads where aligned (default gemm_coopmat.VEC8)"),
        ("coopmat_direct", None, None, "coopmat gemms: register epilogue for full tiles (default gemm_coopmat.DIRECT)"),
        ("coopmat_reg_chain", None, None, "coopmat gemms: fused chains in the register epilogue too "
                                          "(default gemm_coopmat.REG_CHAIN)"),
        ("coopmat_small_m", None, None, "fp16 gemms of few rows: small-M coopmat tiles as measured candidates "
                                        "(default gemm_candidates.SMALL_M)"),
        ("coopmat_mid_candidates", None, None, "fp16 gemms of few rows: how many mid-size coopmat tiles each "
                                               "carries (default gemm_candidates.MID_CANDIDATES)"),
        ("attention_prefetch", None, None, "attention_wide.comp: the next stage's loads in flight (PF) "
                                           "(default ops/attention.py WIDE_PREFETCH)"),
        ("attention_split", None, None, "attention.comp: key tiles split this many ways across workgroups (1: "
                                        "none; default ops/attention.py key_split)"),
        ("ew_vectors", None, None, "fused elementwise kernels: vec4 groups per invocation (0: the scalar form, "
                                   "1 or 2; default ops/ew_fused.py VECS)"),
        ("copy_words", None, None, "gather copies: 4-element words per invocation tried, in order of preference "
                                   "(a tuple from {1, 2}; (): scalar only; default ops/gather_copy.py WIDE)"),
        ("int8_measured", None, None, "int8 tile plans as measured variants (False: each a first choice, to "
                                      "check one plan; default int8_conv.CM_MEASURED)"),
        ("tune_candidates", 2, None, "fp16 coopmat gemms: other tile plans each carries as `measured` variants, "
                                     "timed on the device at first load (runtime/tuning.py; 0: none)"),
    )
    __slots__ = tuple(f[0] for f in FIELDS)

    def bundle_options(self) -> dict:
        """The options the bundle records, as gpuc.compiler.normalize_options gives them."""
        return {"precision": self.precision, "disable_passes": list(self.disable_passes),
                "max_batch": self.max_batch, "input_shapes": dict(self.input_shapes),
                "dynamic": list(self.dynamic), "max_binding_bytes": self.max_binding_bytes}

    def key_text(self) -> str:
        """The canonical text of every field, for the compile-cache key."""
        return repr(self.items())


ENV_FIELDS = tuple((f[0], f[2]) for f in CompileOptions.FIELDS if f[2])
DEFAULT = CompileOptions()
_active: contextvars.ContextVar = contextvars.ContextVar("gpuc_compile_options", default=None)
_env_memo: list = [None, None]           # [environment snapshot, options parsed from it]


def _env_value(name: str, text: str):
    if name == "break_op":
        return text
    if name == "dynamic_debug":
        return 2 if text == "2" else 0 if text in OFF else 1
    return text not in OFF


def from_environ(environ=None, base: CompileOptions | None = None) -> CompileOptions:
    """`base` (default: the defaults) with the compile-time variables set in `environ` (default: this
    process's environment)."""
    env = os.environ if environ is None else environ
    changes = {name: _env_value(name, env[var]) for name, var in ENV_FIELDS if env.get(var, "") != ""}
    return (base or DEFAULT).replace(**changes) if changes else (base or DEFAULT)


def _environ_default() -> CompileOptions:
    snap = tuple(os.environ.get(var) for _, var in ENV_FIELDS)
    if _env_memo[0] != snap:
        _env_memo[:] = [snap, from_environ()]
    return _env_memo[1]


def current() -> CompileOptions:
    """The options of the compile running now (inside `using`), else the environment's."""
    return _active.get() or _environ_default()


class using:
    """`with using(options):` -- the compiler below asks current() and gets `options` (this thread /
    context only; compiles in other threads keep theirs)."""

    def __init__(self, options: CompileOptions):
        if not isinstance(options, CompileOptions):
            raise GpucError(f"options must be a CompileOptions, got {type(options).__name__}")
        self.options = options

    def __enter__(self):
        self._token = _active.set(self.options)
        return self.options

    def __exit__(self, *exc):
        _active.reset(self._token)
        return False


def _check(o: CompileOptions) -> None:
    def bad(name, want):
        raise GpucError(f"compile option {name}: {want}, got {getattr(o, name)!r}")
    for name in ("verify_passes", "coopmat_emulate", "int8_emulate", "fp16_plain_gemms", "blockwise_kernel"):
        if not isinstance(getattr(o, name), bool):
            bad(name, "must be True or False")
    for name in ("coopmat_vec8", "coopmat_direct", "coopmat_reg_chain", "coopmat_small_m", "attention_prefetch",
                 "int8_measured", "split_k_conv"):
        if getattr(o, name) is not None and not isinstance(getattr(o, name), bool):
            bad(name, "must be None, True or False")
    if o.break_op is not None and (not isinstance(o.break_op, str) or not o.break_op):
        bad("break_op", "must be None or an op name")
    if o.dynamic_debug not in (0, 1, 2) or isinstance(o.dynamic_debug, bool):
        bad("dynamic_debug", "must be 0, 1 or 2")
    if isinstance(o.tune_candidates, bool) or not isinstance(o.tune_candidates, int) or o.tune_candidates < 0:
        bad("tune_candidates", "must be an integer >= 0")
    if isinstance(o.cm2_act_candidates, bool) or o.cm2_act_candidates not in (0, 1, 2):
        bad("cm2_act_candidates", "must be 0, 1 or 2")
    if o.coopmat_mid_candidates is not None and (isinstance(o.coopmat_mid_candidates, bool) or
                                                 not isinstance(o.coopmat_mid_candidates, int)
                                                 or o.coopmat_mid_candidates < 0):
        bad("coopmat_mid_candidates", "must be None or an integer >= 0")
    if o.ew_vectors is not None and (isinstance(o.ew_vectors, bool) or o.ew_vectors not in (0, 1, 2)):
        bad("ew_vectors", "must be None, 0, 1 or 2")
    if o.copy_words is not None and (not isinstance(o.copy_words, tuple) or len(set(o.copy_words)) != len(o.copy_words)
                                     or any(isinstance(w, bool) or w not in (1, 2) for w in o.copy_words)):
        bad("copy_words", "must be None or a tuple of distinct words per invocation from {1, 2} (() for scalar only)")
    for name in ("split_k", "attention_split"):
        v = getattr(o, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            bad(name, "must be None or an integer >= 1")
    if o.reg_factor is not None and (isinstance(o.reg_factor, bool) or not isinstance(o.reg_factor, (int, float))
                                     or not o.reg_factor > 0):
        bad("reg_factor", "must be None or a number > 0")
    if o.dw_plan is not None and not all(hasattr(o.dw_plan, a) for a in ("tile", "ry", "px", "scalar")):
        bad("dw_plan", "must be None or a depthwise_plan.DwPlan")
    if o.cm2_plan is not None and type(o.cm2_plan).__name__ != "Cm2Plan":
        bad("cm2_plan", "must be None or a gemm_cm2.Cm2Plan")


def normalized(o: CompileOptions) -> CompileOptions:
    """`o` with its bundle options normalized (gpuc.compiler.normalize_options: sorted, checked) and
    every other field checked; bad values raise GpucError naming the field."""
    from gpuc.compiler.compile_inputs import normalize_options   # (lazy: start-up time of the CLI's fast path)
    given = {k: getattr(o, k) for k in BUNDLE_FIELDS}
    shapes = given["input_shapes"]
    if isinstance(shapes, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in shapes):
        given["input_shapes"] = dict(shapes)           # (the normalized form: ((name, dims), ...))
    b = normalize_options(given)
    o = o.replace(disable_passes=tuple(b["disable_passes"]), max_batch=b["max_batch"],
                  input_shapes=tuple(sorted(b["input_shapes"].items())), dynamic=tuple(b["dynamic"]),
                  precision=b["precision"], max_binding_bytes=b["max_binding_bytes"])
    if isinstance(o.copy_words, list):                 # (the key's form: a tuple)
        o = o.replace(copy_words=tuple(o.copy_words))
    _check(o)
    return o


def resolve(options: CompileOptions | None = None, environ=None, **kwargs) -> CompileOptions:
    """The API boundary: the CompileOptions of one compile (precedence: see the module docstring).
    kwargs: any field, None meaning "not given"; unknown names raise GpucError."""
    unknown = set(kwargs) - set(CompileOptions.field_names())
    if unknown:
        raise GpucError(f"unknown compile option(s): {sorted(unknown)}")
    if options is None:
        base = from_environ(environ, _active.get())
    elif isinstance(options, CompileOptions):
        base = options
    else:
        raise GpucError(f"options must be a CompileOptions, got {type(options).__name__}")
    given = {k: v for k, v in kwargs.items() if v is not None}
    return normalized(base.replace(**given))
