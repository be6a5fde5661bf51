"""Write tiny TFLite models with the `flatbuffers` Builder, for per-op tests.

Two layers:

* `write_table(builder, "Table", {field: value})`: a generic flatbuffer table writer driven by the
  distilled schema in `gpuc.compiler.frontend.tflite_schema` (TABLES / ENUMS). Strings, nested tables,
  vectors of scalars / strings / tables and unions are written recursively; scalars go through the
  Prepend<Kind>Slot matching the field's struct format char. It is deliberately independent of the
  compiler's own reader, so the two check each other (and LiteRT checks both).

* `ModelBuilder`: single-subgraph models.

    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 3], "float32")
    w = mb.const("w", np.ones((4, 3, 3, 3), np.float32))
    y = mb.tensor("y", [1, 8, 8, 4], "float32")
    mb.op("CONV_2D", [x, w, -1], [y], padding="SAME", stride_w=1, stride_h=1,
          fused_activation_function="RELU6")
    mb.output(y)
    data = mb.finish()

Value conventions for `write_table`: scalar fields take python / numpy scalars (enum fields also
take member names, see ENUM_FIELDS); "[x]" vectors take any array-like; "table:T" fields a dict;
"[table:T]" a list of dicts; a "union" field a `(table_name, dict)` pair, its `<field>_type`
companion being filled in automatically when not given. Fields set to None are omitted.
"""
from __future__ import annotations

import flatbuffers
import numpy as np

from gpuc.compiler.frontend.tflite_schema import ENUMS, TABLES

# ---------------------------------------------------------------------------------------------------
# generic table writer

_PREPEND = {"b": "Int8", "B": "Uint8", "h": "Int16", "H": "Uint16", "i": "Int32", "I": "Uint32",
            "q": "Int64", "Q": "Uint64", "f": "Float32", "d": "Float64", "?": "Bool"}
_NP = {"b": np.int8, "B": np.uint8, "h": np.int16, "H": np.uint16, "i": np.int32, "I": np.uint32,
       "q": np.int64, "Q": np.uint64, "f": np.float32, "d": np.float64, "?": np.bool_}

# scalar fields whose values are enum members (names are accepted for these)
ENUM_FIELDS = {
    "padding": "Padding",
    "fused_activation_function": "ActivationFunctionType",
    "mode": "MirrorPadMode",
    "weights_format": "FullyConnectedOptionsWeightsFormat",
    "kernel_type": "LSTMKernelType",
    "combiner": "CombinerType",
    "type": "TensorType",                 # Tensor.type (LSHProjectionOptions.type also uses this name)
    "in_data_type": "TensorType", "out_data_type": "TensorType", "output_type": "TensorType",
    "idx_out_type": "TensorType", "index_type": "TensorType", "key_dtype": "TensorType",
    "value_dtype": "TensorType", "quantized_bias_type": "TensorType",
    "custom_options_format": "CustomOptionsFormat",
    "details_type": "QuantizationDetails",
}
# union field -> enum naming its member tables (the `<field>_type` companion takes these values)
UNION_ENUMS = {"builtin_options": "BuiltinOptions", "builtin_options2": "BuiltinOptions2",
               "details": "QuantizationDetails", "array_segments": "SparseIndexVector",
               "array_indices": "SparseIndexVector"}
_NON_FIELD_ENUMS = {"BuiltinOperator", "BuiltinOptions", "BuiltinOptions2"}


def enum_value(field: str, value, table: str = "") -> int:
    """An enum member name (or int) for scalar `field` -> its integer value."""
    if not isinstance(value, str):
        return int(value)
    if table == "LSHProjectionOptions" and field == "type":
        return ENUMS["LSHProjectionType"][value]
    if field in ENUM_FIELDS:
        members = ENUMS[ENUM_FIELDS[field]]
        if value not in members:
            raise KeyError(f"{table}.{field}: {value!r} is not a {ENUM_FIELDS[field]} member ({sorted(members)})")
        return members[value]
    hits = {e: m[value] for e, m in ENUMS.items() if e not in _NON_FIELD_ENUMS and value in m}
    if len(hits) != 1:
        raise KeyError(f"{table}.{field}: cannot resolve enum name {value!r} (candidates: {sorted(hits)})")
    return next(iter(hits.values()))


def _scalar(kind: str, value):
    if kind == "?":
        return bool(value)
    if kind in "fd":
        return float(value)
    return int(value)


def _table_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _scalar_vector(b: flatbuffers.Builder, inner: str, value, align: int = 0) -> int:
    arr = np.ascontiguousarray(np.asarray(value).reshape(-1), dtype=_NP[inner])
    if inner == "?":
        arr = arr.view(np.uint8)
    if align <= arr.itemsize:
        return b.CreateNumpyVector(arr)
    # byte vectors (tensor data) aligned like the TFLite converter does it
    raw = arr.tobytes()
    b.StartVector(arr.itemsize, arr.size, align)
    b.head = b.head - len(raw)
    b.Bytes[b.head:b.head + len(raw)] = raw
    return b.EndVector()


def write_table(b: flatbuffers.Builder, table: str, value: dict, align_bytes: int = 16) -> int:
    """Serialize dict `value` as schema table `table`; returns the table's offset."""
    if table not in TABLES:
        raise KeyError(f"unknown table {table!r}")
    fields = TABLES[table]
    value = {k: v for k, v in value.items() if v is not None}
    for name in value:
        if name not in fields:
            raise KeyError(f"{table} has no field {name!r} (fields: {sorted(fields)})")
    # union companions
    for name, v in list(value.items()):
        if fields[name][1] == "union":
            if not (isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)):
                raise TypeError(f"{table}.{name}: a union value is a (table_name, dict) pair, got {v!r}")
            tname = f"{name}_type"
            enum = ENUMS[UNION_ENUMS.get(name) or next(e for e, m in ENUMS.items() if v[0] in m)]
            if v[0] not in enum:
                raise KeyError(f"{table}.{name}: {v[0]!r} is not a member of its union")
            if tname in fields and tname not in value:
                value[tname] = enum[v[0]]
            elif tname in fields and enum_value(tname, value[tname], table) != enum[v[0]]:
                raise ValueError(f"{table}.{tname} disagrees with the union member {v[0]!r}")

    # children first: flatbuffers forbids nesting object construction
    children: dict[str, int] = {}
    for name, v in value.items():
        _, kind, _ = fields[name]
        if kind == "str":
            children[name] = b.CreateString(v)
        elif kind.startswith("table:"):
            children[name] = write_table(b, kind[6:], v, align_bytes)
        elif kind == "union":
            children[name] = write_table(b, v[0], v[1], align_bytes)
        elif kind.startswith("["):
            inner = kind[1:-1]
            if inner in _NP:
                align = align_bytes if (table, name) == ("Buffer", "data") else 0
                children[name] = _scalar_vector(b, inner, v, align)
            elif inner == "str":
                children[name] = _table_vector(b, [b.CreateString(s) for s in v])
            elif inner.startswith("table:"):
                children[name] = _table_vector(b, [write_table(b, inner[6:], x, align_bytes) for x in v])
            else:
                raise TypeError(f"{table}.{name}: unsupported vector kind {kind!r}")
        elif kind not in _PREPEND:
            raise TypeError(f"{table}.{name}: unsupported kind {kind!r}")

    b.StartObject(max((s for s, _, _ in fields.values()), default=-1) + 1)
    for name, v in value.items():
        slot, kind, default = fields[name]
        if name in children:
            b.PrependUOffsetTRelativeSlot(slot, children[name], 0)
        else:
            v = _scalar(kind, enum_value(name, v, table) if kind != "?" and kind not in "fd" else v)
            getattr(b, f"Prepend{_PREPEND[kind]}Slot")(slot, v, _scalar(kind, default or 0))
    return b.EndObject()


def write_root(table: str, value: dict, file_identifier: bytes | None = None, size: int = 1024) -> bytes:
    b = flatbuffers.Builder(size)
    b.Finish(write_table(b, table, value), file_identifier=file_identifier)
    return bytes(b.Output())


# ---------------------------------------------------------------------------------------------------
# TFLite models

DTYPES = {"float32": "FLOAT32", "float16": "FLOAT16", "float64": "FLOAT64", "int32": "INT32",
          "uint8": "UINT8", "int64": "INT64", "bool": "BOOL", "int16": "INT16", "int8": "INT8",
          "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "complex64": "COMPLEX64"}

# builtin operator -> its builtin options table (None: the op takes no options)
_NONE = ["LOGISTIC", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "TANH", "FLOOR", "CEIL", "ROUND",
         "PRELU", "ELU", "SIN", "LOG", "SQRT", "RSQRT", "EMBEDDING_LOOKUP", "HASHTABLE_LOOKUP",
         "BROADCAST_ARGS", "IMAG", "REAL", "COMPLEX_ABS", "CUSTOM", "DELEGATE"]
# ops whose table is <CamelCase(op)>Options
_CAMEL = ["ADD", "SUB", "MUL", "DIV", "CONCATENATION", "FULLY_CONNECTED", "RESHAPE", "SOFTMAX", "PAD",
          "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "DEQUANTIZE", "QUANTIZE", "LOCAL_RESPONSE_NORMALIZATION",
          "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "GATHER", "GATHER_ND", "TRANSPOSE", "SQUEEZE",
          "STRIDED_SLICE", "SLICE", "EXP", "SPLIT", "SPLIT_V", "LOG_SOFTMAX", "CAST", "ARG_MAX", "ARG_MIN",
          "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL", "NEG", "SELECT",
          "SELECT_V2", "TRANSPOSE_CONV", "TILE", "EXPAND_DIMS", "SHAPE", "POW", "PACK", "UNPACK",
          "LOGICAL_OR", "LOGICAL_AND", "LOGICAL_NOT", "ONE_HOT", "FLOOR_DIV", "FLOOR_MOD", "SQUARE",
          "ZEROS_LIKE", "FILL", "RANGE", "LEAKY_RELU", "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS",
          "UNIQUE", "REVERSE_V2", "ADD_N", "COS", "WHERE", "RANK", "REVERSE_SEQUENCE", "MATRIX_DIAG",
          "MATRIX_SET_DIAG", "HARD_SWISH", "SCATTER_ND", "CUMSUM", "BROADCAST_TO", "GELU", "SIGN",
          "DYNAMIC_UPDATE_SLICE", "BUCKETIZE", "SEGMENT_SUM", "UNSORTED_SEGMENT_SUM",
          "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN", "BITCAST",
          "BITWISE_XOR", "RIGHT_SHIFT", "FAKE_QUANT", "SPARSE_TO_DENSE", "DENSIFY",
          "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "IF", "WHILE", "CALL_ONCE", "SKIP_GRAM",
          "CONCAT_EMBEDDINGS", "EMBEDDING_LOOKUP_SPARSE", "CALL", "HASHTABLE", "HASHTABLE_FIND",
          "HASHTABLE_IMPORT", "HASHTABLE_SIZE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"]
OP_OPTIONS: dict[str, str | None] = {
    **{op: None for op in _NONE},
    **{op: "".join(w.capitalize() for w in op.split("_")) + "Options" for op in _CAMEL},
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "CONV_3D": "Conv3DOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions", "L2_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions", "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "PADV2": "PadV2Options", "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    "L2_NORMALIZATION": "L2NormOptions", "BATCH_MATMUL": "BatchMatMulOptions",
    "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions", "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions",
    "TOPK_V2": "TopKV2Options", "LSH_PROJECTION": "LSHProjectionOptions", "SVDF": "SVDFOptions",
    "RNN": "RNNOptions", "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions", "LSTM": "LSTMOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions", "RANDOM_UNIFORM": "RandomOptions",
    "MULTINOMIAL": "RandomOptions", "ATAN2": "ATan2Options", "RFFT2D": "Rfft2dOptions",
}
# StableHLO builtins -> their table in Operator.builtin_options2 (the others take none)
OP_OPTIONS2: dict[str, str] = {
    f"STABLEHLO_{k}": "Stablehlo" + "".join(w.capitalize() for w in k.split("_")) + "Options"
    for k in ("CONCATENATE", "BROADCAST_IN_DIM", "SLICE", "CONVOLUTION", "CUSTOM_CALL", "REDUCE", "SCATTER",
              "COMPARE", "DYNAMIC_SLICE", "PAD", "IOTA", "DOT_GENERAL", "REDUCE_WINDOW", "SORT", "WHILE", "GATHER",
              "TRANSPOSE", "RNG_BIT_GENERATOR", "SHIFT_LEFT", "CASE")}
OP_OPTIONS2["STABLEHLO_COMPOSITE"] = "StableHLOCompositeOptions"
OP_OPTIONS2["REDUCE_WINDOW"] = "ReduceWindowOptions"
OP_OPTIONS.update({op: None for op in ENUMS["BuiltinOperator"] if op.startswith("STABLEHLO_") and op not in OP_OPTIONS2})
for _op, _t in OP_OPTIONS2.items():
    assert _op in ENUMS["BuiltinOperator"] and _t in ENUMS["BuiltinOptions2"] and _t in TABLES, (_op, _t)
for _op, _t in OP_OPTIONS.items():          # the map is checked against the schema at import
    assert _op in ENUMS["BuiltinOperator"], _op
    assert _t is None or (_t in ENUMS["BuiltinOptions"] and _t in TABLES), (_op, _t)


def tensor_type(dtype) -> int:
    if isinstance(dtype, str) and dtype.upper() in ENUMS["TensorType"]:
        return ENUMS["TensorType"][dtype.upper()]
    return ENUMS["TensorType"][DTYPES[np.dtype(dtype).name]]


class ModelBuilder:
    """One-subgraph TFLite model; tensors are referred to by their index (-1: optional input absent)."""

    def __init__(self, description: str = "gpuc test model"):
        self.description = description
        self.tensors: list[dict] = []
        self.buffers: list[dict] = [{}]            # buffer 0: the empty sentinel
        self.operators: list[dict] = []
        self.opcodes: list[tuple] = []             # (builtin code, version[, custom code])
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    # tensors
    def tensor(self, name: str, shape, dtype="float32", quant=None, data: np.ndarray | None = None,
               shape_signature=None) -> int:
        """shape_signature: the model's declared shape with -1 for dynamic dimensions (default: none)."""
        t = {"name": name, "shape": np.asarray(list(shape), np.int32), "type": tensor_type(dtype)}
        if shape_signature is not None:
            t["shape_signature"] = np.asarray(list(shape_signature), np.int32)
        if data is not None:
            raw = np.ascontiguousarray(data)
            self.buffers.append({"data": raw.reshape(-1).view(np.uint8)})
            t["buffer"] = len(self.buffers) - 1
        if quant is not None:
            scale, zero_point, *axis = quant
            scale = np.atleast_1d(np.asarray(scale, np.float32))
            zero_point = np.atleast_1d(np.asarray(zero_point, np.int64))
            if zero_point.size == 1 and scale.size > 1:          # per-channel scales, one zero point
                zero_point = np.repeat(zero_point, scale.size)
            t["quantization"] = {"scale": scale, "zero_point": zero_point,
                                 "quantized_dimension": int(axis[0]) if axis else 0}
        self.tensors.append(t)
        return len(self.tensors) - 1

    def input(self, name: str, shape, dtype="float32", quant=None, shape_signature=None) -> int:
        i = self.tensor(name, shape, dtype, quant, shape_signature=shape_signature)
        self.inputs.append(i)
        return i

    def const(self, name: str, array, quant=None) -> int:
        array = np.asarray(array)
        return self.tensor(name, array.shape, array.dtype, quant, data=array)

    def output(self, index: int) -> None:
        self.outputs.append(index)

    # operators
    def opcode(self, op: str, version: int = 1) -> int:
        key = (ENUMS["BuiltinOperator"][op], int(version))
        if key not in self.opcodes:
            self.opcodes.append(key)
        return self.opcodes.index(key)

    def op(self, op: str, inputs, outputs, version: int = 1, **options) -> int:
        if op not in ENUMS["BuiltinOperator"]:
            raise KeyError(f"unknown builtin operator {op!r}")
        entry = {"opcode_index": self.opcode(op, version),
                 "inputs": np.asarray(list(inputs), np.int32), "outputs": np.asarray(list(outputs), np.int32)}
        table = OP_OPTIONS.get(op, "?")
        if op in OP_OPTIONS2:
            for k in options:
                if k not in TABLES[OP_OPTIONS2[op]]:
                    raise KeyError(f"{op}: {OP_OPTIONS2[op]} has no field {k!r}")
            entry["builtin_options2"] = (OP_OPTIONS2[op], dict(options))
        elif table == "?":
            if options:
                raise KeyError(f"no options table is known for {op}; add it to OP_OPTIONS")
        elif table is None:
            if options:
                raise KeyError(f"{op} takes no builtin options, got {sorted(options)}")
        else:
            for k in options:
                if k not in TABLES[table]:
                    raise KeyError(f"{op}: {table} has no field {k!r} (fields: {sorted(TABLES[table])})")
            entry["builtin_options"] = (table, dict(options))
        self.operators.append(entry)
        return len(self.operators) - 1

    def custom(self, code: str, inputs, outputs, options: bytes = b"", version: int = 1) -> int:
        """A CUSTOM operator `code` (e.g. "TFLite_Detection_PostProcess") with raw custom_options bytes
        (a flexbuffer for most custom ops: tests/helpers/flex.py)."""
        key = (ENUMS["BuiltinOperator"]["CUSTOM"], int(version), str(code))
        if key not in self.opcodes:
            self.opcodes.append(key)
        entry = {"opcode_index": self.opcodes.index(key), "inputs": np.asarray(list(inputs), np.int32),
                 "outputs": np.asarray(list(outputs), np.int32)}
        if options:
            entry["custom_options"] = np.frombuffer(bytes(options), np.uint8)
        self.operators.append(entry)
        return len(self.operators) - 1

    # model
    def model_dict(self, signature_key: str | None = None) -> dict:
        subgraph = {"tensors": self.tensors, "inputs": np.asarray(self.inputs, np.int32),
                    "outputs": np.asarray(self.outputs, np.int32), "operators": self.operators, "name": "main"}
        model = {
            "version": 3,
            "operator_codes": [{"deprecated_builtin_code": min(c[0], 127), "builtin_code": c[0], "version": c[1],
                                **({"custom_code": c[2]} if len(c) > 2 else {})} for c in self.opcodes],
            "subgraphs": [subgraph],
            "description": self.description,
            "buffers": self.buffers,
        }
        if signature_key is not None:
            def tmap(ids):
                return [{"name": self.tensors[i]["name"], "tensor_index": i} for i in ids]
            model["signature_defs"] = [{"inputs": tmap(self.inputs), "outputs": tmap(self.outputs),
                                        "signature_key": signature_key, "subgraph_index": 0}]
        return model

    def finish(self, signature_key: str | None = None) -> bytes:
        if not self.outputs:
            raise ValueError("model has no outputs")
        size = 1024 + sum(len(b.get("data", ())) for b in self.buffers)
        return write_root("Model", self.model_dict(signature_key), file_identifier=b"TFL3", size=size)


def _merged(main: ModelBuilder, others, names) -> dict:
    """main's model dict with each other builder's subgraph 0 appended (operator codes and buffers merged)."""
    model = main.model_dict()
    for sb, name in zip(others, names):
        d = sb.model_dict()
        sg = d["subgraphs"][0]
        sg["name"] = name
        nb = len(model["buffers"])
        model["buffers"] += d["buffers"][1:]
        for t in sg["tensors"]:
            if t.get("buffer"):
                t["buffer"] += nb - 1
        codes = model["operator_codes"]
        for op in sg["operators"]:
            c = d["operator_codes"][op["opcode_index"]]
            if c not in codes:
                codes.append(c)
            op["opcode_index"] = codes.index(c)
        model["subgraphs"].append(sg)
    return model


def _write(model: dict) -> bytes:
    size = 4096 + sum(len(b.get("data", ())) for b in model["buffers"])
    return write_root("Model", model, file_identifier=b"TFL3", size=size)


def with_subgraphs(main: ModelBuilder, *others: ModelBuilder) -> bytes:
    """One model from several builders: main is subgraph 0, the others follow as subgraphs 1, 2, ...
    (operator codes and buffers merged), for CALL_ONCE / WHILE / IF models."""
    return _write(_merged(main, others, [f"sub{k}" for k in range(1, len(others) + 1)]))


def signature_model(parts) -> bytes:
    """One multi-signature model from [(signature key, builder, {"inputs": {name: tensor},
    "outputs": {name: tensor}}), ...]: signature k runs subgraph k (the later ones named by their key),
    as litert-torch writes prefill / decode signatures."""
    (_, main, _), rest = parts[0], parts[1:]
    model = _merged(main, [b for _, b, _ in rest], [key for key, _, _ in rest])
    model["signature_defs"] = [
        {"signature_key": key, "subgraph_index": gi,
         "inputs": [{"name": k, "tensor_index": v} for k, v in names["inputs"].items()],
         "outputs": [{"name": k, "tensor_index": v} for k, v in names["outputs"].items()]}
        for gi, (key, _, names) in enumerate(parts)]
    return _write(model)
