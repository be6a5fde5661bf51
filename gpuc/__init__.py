"""gpuc: ahead-of-time TensorFlow Lite -> Vulkan compiler and its thin runtime.

`gpuc.load` needs only the runtime (numpy, vulkan, flatbuffers, xxhash); `gpuc.compile`
imports the compiler (glslang) on first use.
"""
from gpuc.version import __version__  # noqa: F401


def load(bundle, device=None, timeout_s=None, robust=False):
    """Load a compiled bundle (path or bytes) onto a Vulkan device; returns a LoadedModel.
    A .tflite model or a LiteRT-LM .litertlm file (its LLM section; path or bytes) is compiled first,
    through the compile cache (the compiler
    install; gpuc.compile's default options; the runtime-only install refuses it with CompilerMissing).
    timeout_s: how long one run may take on the GPU before GpuTimeoutError (0: no limit); default
    GPUC_GPU_TIMEOUT_S, else 60 s on a GPU and no limit on a CPU implementation (lavapipe).
    robust=True: for bundles from untrusted sources, a device whose every buffer access is bounded to
    its binding (robustBufferAccess, and robustBufferAccess2 where present; README: Trust and safety)."""
    from gpuc.runtime import load as _load
    from gpuc.runtime import read_bundle_file
    data = read_bundle_file(bundle, map_large=True)        # a big bundle file: mapped, not read
    if len(data) >= 8 and bytes(data[:8]) == b"LITERTLM":  # a LiteRT-LM file: its LLM's .tflite section
        require_compiler("gpuc.load of a .litertlm file")
        from gpuc.litertlm import LitertLm
        data = compile(LitertLm(bytes(data[:]), name=str(bundle) if isinstance(bundle, str) else "").tflite())
    elif len(data) >= 8 and data[4:8] == b"TFL3":          # a .tflite: compile it (cached)
        require_compiler("gpuc.load of a .tflite model")
        data = compile(data if isinstance(data, (bytes, bytearray, memoryview)) else data[:])
    return _load(data, device=device, timeout_s=timeout_s, robust=robust)


_LITERT_NAMES = {"Interpreter": "gpuc.interpreter", "SignatureRunner": "gpuc.interpreter",
                 "CompiledModel": "gpuc.compiled_model", "TensorBuffer": "gpuc.compiled_model",
                 "HardwareAccelerator": "gpuc.compiled_model"}


def __getattr__(name):
    """gpuc.Interpreter, gpuc.CompiledModel ... (LiteRT's APIs on gpuc), imported on first use."""
    if name in _LITERT_NAMES:
        import importlib
        return getattr(importlib.import_module(_LITERT_NAMES[name]), name)
    raise AttributeError(f"module 'gpuc' has no attribute {name!r}")


def prewarm(device=None):
    """Start opening the shared Vulkan device in the background (the driver's start-up overlaps
    whatever the program does next); the next `load` uses it.  Returns at once."""
    from gpuc.runtime import prewarm as _prewarm
    _prewarm(device)


def open_device(select=None, robust=False):
    """A Vulkan device (index or name substring; default GPUC_DEVICE, else the best GPU) to load
    several bundles on, e.g. to pass DeviceTensors between them.  Close it after its models.
    robust=True: robust buffer access (see load)."""
    from gpuc.runtime.device import Device
    return Device(select, robust=robust)


def to_device(array, device, name: str = "tensor"):
    """Upload a host array to `device` as a DeviceTensor (an input any bundle on that device takes)."""
    from gpuc.runtime.device_tensor import DeviceTensor
    return DeviceTensor.from_numpy(device, array, name)


def compile(model, output=None, **options):  # noqa: A001 - public API name
    """Compile a .tflite model (path or bytes). Returns bundle bytes, or writes `output`."""
    require_compiler("gpuc.compile")
    from gpuc.compiler import compile_model
    return compile_model(model, output=output, **options)


def has_compiler() -> bool:
    """False in the runtime-only install (the gpuc-runtime distribution), which loads and runs bundles."""
    import importlib.util
    return importlib.util.find_spec("gpuc.compiler") is not None


def require_compiler(what: str) -> None:
    """Raise CompilerMissing (exit 2 in the CLI) naming what to install, where the compiler is absent."""
    if not has_compiler():
        from gpuc.errors import CompilerMissing
        raise CompilerMissing(f"{what} needs the compiler, and this is the runtime-only install (gpuc-runtime), "
                              "which loads and runs bundles; for the compiler install the gpuc wheel in its place "
                              "(built from the source tree with `make wheels`): pip uninstall gpuc-runtime && "
                              "pip install dist/gpuc-*.whl (or pip install /path/to/gpuc-source)")
