"""Errors shared by the compiler and the runtime.

`GpucError` (and subclasses) mean "the user's input is bad or unsupported": the CLI prints the
one-line message and exits with code 2 (GpuTimeoutError: 4).  Anything else escaping is an internal
error (exit 1).
"""


class GpucError(Exception):
    """Bad or unsupported input; message is one line naming the op, tensor or field."""

    exit_code = 2


class ModelFormatError(GpucError):
    """The .tflite file is not a valid TFLite model (truncated, inconsistent, out of range)."""


class UnsupportedError(GpucError):
    """The model is valid but uses an op / attribute / dtype gpuc cannot compile."""


class BundleError(GpucError):
    """A bundle is corrupt, truncated, from another format version, or fails its checksum."""


class ShaderCompileError(Exception):
    """Generated GLSL failed to compile: a compiler bug (exit 1), message shows the GLSL line."""


class DeviceError(GpucError):
    """No usable Vulkan device, out of device memory, device lost."""


class GpuTimeoutError(DeviceError):
    """The GPU did not finish a run within the model's timeout (runtime/device.py: gpu_timeout_s).
    The run stays in flight: the model waits for it before reusing what it uses, and close() waits
    for it (or, should it never end, leaves its objects to the process's exit)."""

    exit_code = 4


class CompilerMissing(GpucError):
    """The compiler is not installed (the runtime-only distribution, gpuc-runtime)."""


class RunError(GpucError):
    """A run failed where LiteRT's invoke fails: a kernel met an input value it must refuse (an index
    out of range, runtime/status.py); the message names the op, its operator index and the tensor."""
