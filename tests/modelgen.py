"""Build tiny TFLite models with the flatbuffers Builder, for per-op tests.

Written from the schema table (compiler/frontend/tflite_schema.py) through the same generic
writer the bundle uses; every model a test builds is also loaded by LiteRT, which is the proof
that this writer produces valid TFLite.

    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 3])
    w = mb.const("w", np.ones((4, 3, 3, 3), np.float32))
    y = mb.tensor("y", [1, 8, 8, 4])
    mb.op("CONV_2D", [x, w, -1], [y], padding="SAME", stride_w=1, stride_h=1)
    mb.output(y)
    data = mb.finish()
"""
from __future__ import annotations

import flatbuffers
import numpy as np

from gpuc.compiler.frontend.tflite_schema import ENUMS, TABLES
from gpuc.runtime import flatbuf

TYPES = {"float32": "FLOAT32", "float16": "FLOAT16", "int32": "INT32", "uint8": "UINT8", "int64": "INT64",
         "bool": "BOOL", "int16": "INT16", "int8": "INT8"}
ENUM_FIELDS = {"padding": "Padding", "fused_activation_function": "ActivationFunctionType", "mode": "MirrorPadMode"}
# ops whose options table is not simply <CamelCase name>Options
OPTIONS = {
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "CONV_3D": "Conv3DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions", "L2_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions", "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "CONCATENATION": "ConcatenationOptions",
    "RESHAPE": "ReshapeOptions", "SOFTMAX": "SoftmaxOptions", "PAD": "PadOptions", "PADV2": "PadV2Options",
    "ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
    "SQUEEZE": "SqueezeOptions", "EXPAND_DIMS": "ExpandDimsOptions", "TRANSPOSE": "TransposeOptions",
    "STRIDED_SLICE": "StridedSliceOptions", "GATHER": "GatherOptions", "LEAKY_RELU": "LeakyReluOptions",
}


class ModelBuilder:
    def __init__(self):
        self.tensors, self.buffers, self.ops, self.opcodes = [], [{}], [], []
        self.inputs, self.outputs = [], []

    def tensor(self, name, shape, dtype="float32", quant=None, data=None) -> int:
        t = {"name": name, "shape": np.asarray(shape, np.int32), "type": ENUMS["TensorType"][TYPES[dtype]],
             "buffer": 0}
        if data is not None:
            self.buffers.append({"data": np.ascontiguousarray(data).view(np.uint8).reshape(-1)})
            t["buffer"] = len(self.buffers) - 1
        if quant is not None:
            scale, zp, *axis = quant
            t["quantization"] = {"scale": np.atleast_1d(np.asarray(scale, np.float32)),
                                 "zero_point": np.atleast_1d(np.asarray(zp, np.int64)),
                                 "quantized_dimension": axis[0] if axis else 0}
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, name, shape, dtype="float32", quant=None) -> int:
        i = self.tensor(name, shape, dtype, quant)
        self.inputs.append(i)
        return i

    def const(self, name, array, quant=None) -> int:
        array = np.asarray(array)
        return self.tensor(name, array.shape, array.dtype.name, quant, array)

    def output(self, i) -> None:
        self.outputs.append(i)

    def op(self, name, inputs, outputs, version=1, **options) -> None:
        code = ENUMS["BuiltinOperator"][name]
        key = (code, version)
        if key not in self.opcodes:
            self.opcodes.append(key)
        entry = {"opcode_index": self.opcodes.index(key), "inputs": np.asarray(inputs, np.int32),
                 "outputs": np.asarray(outputs, np.int32)}
        table = OPTIONS.get(name) or "".join(w.capitalize() for w in name.split("_")) + "Options"
        if options or table in TABLES and table in ENUMS["BuiltinOptions"]:
            if table not in ENUMS["BuiltinOptions"]:
                raise KeyError(f"no options table for {name}")
            values = {}
            for k, v in options.items():
                if k not in TABLES[table]:
                    raise KeyError(f"{table} has no field {k!r}")
                if isinstance(v, str):
                    v = ENUMS[ENUM_FIELDS[k]][v]
                values[k] = v
            entry["builtin_options_type"] = ENUMS["BuiltinOptions"][table]
            entry["builtin_options"] = (table, values)
        self.ops.append(entry)

    def finish(self) -> bytes:
        b = flatbuffers.Builder(1024)
        model = {
            "version": 3,
            "operator_codes": [{"deprecated_builtin_code": min(c, 127), "builtin_code": c, "version": v}
                               for c, v in self.opcodes],
            "subgraphs": [{"tensors": self.tensors, "inputs": np.asarray(self.inputs, np.int32),
                           "outputs": np.asarray(self.outputs, np.int32), "operators": self.ops, "name": "main"}],
            "description": "gpuc test model",
            "buffers": self.buffers,
        }
        b.Finish(flatbuf.write(b, TABLES, "Model", model), file_identifier=b"TFL3")
        return bytes(b.Output())


def run_litert(model: bytes, inputs):
    """Reference outputs from LiteRT's CPU interpreter (plain builtin kernels)."""
    from ai_edge_litert.interpreter import Interpreter
    try:
        from ai_edge_litert.interpreter import OpResolverType
        it = Interpreter(model_content=model,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    except ImportError:
        it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
