"""TFLite flatbuffer -> IR.  Every index, offset, length and shape is checked before use; any
defect raises ModelFormatError naming the field ("subgraphs[0].operators[5].inputs: ...")."""
from __future__ import annotations

import os

import numpy as np

from gpuc.compiler import ir
from gpuc.compiler.frontend.tflite_schema import ENUMS, TABLES
from gpuc.errors import GpucError, ModelFormatError
from gpuc.runtime import flatbuf

DTYPES = {"FLOAT32": "float32", "FLOAT16": "float16", "INT32": "int32", "UINT8": "uint8", "INT64": "int64",
          "BOOL": "bool", "INT16": "int16", "INT8": "int8", "FLOAT64": "float64", "UINT64": "uint64",
          "UINT32": "uint32", "UINT16": "uint16", "COMPLEX64": "complex64", "COMPLEX128": "complex128"}
TYPE_NAMES = {v: k for k, v in ENUMS["TensorType"].items()}
OP_NAMES = {v: k for k, v in ENUMS["BuiltinOperator"].items()}
OPTION_TABLES = {v: k for k, v in ENUMS["BuiltinOptions"].items()}
OPTION2_TABLES = {v: k for k, v in ENUMS["BuiltinOptions2"].items()}
MAX_ELEMENTS = 1 << 31
CUSTOM = ENUMS["BuiltinOperator"]["CUSTOM"]


def _bad(msg):
    raise ModelFormatError(f"invalid model: {msg}")


def _pyval(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, list):
        return [_pyval(x) for x in v]
    return v


class _Importer:
    def __init__(self, data: bytes):
        self.data = data
        self.reader = flatbuf.Reader(data, TABLES)

    def run(self) -> ir.Model:
        m = self.reader.root("Model")
        if m["version"] != 3:
            _bad(f"schema version {m['version']} (gpuc reads version 3)")
        self.buffers = m["buffers"] or []
        self.opcodes = [self._opcode(i, oc) for i, oc in enumerate(m["operator_codes"] or [])]
        if not m["subgraphs"]:
            _bad("no subgraphs")
        graphs = [self._subgraph(i, sg) for i, sg in enumerate(m["subgraphs"])]
        sigs = []
        for i, s in enumerate(m["signature_defs"] or []):
            if not 0 <= s["subgraph_index"] < len(graphs):
                _bad(f"signature_defs[{i}].subgraph_index {s['subgraph_index']} out of range")
            nt = len(graphs[s["subgraph_index"]].tensors)
            maps = {}
            for side in ("inputs", "outputs"):
                maps[side] = {}
                for tm in s[side] or []:
                    if not 0 <= tm["tensor_index"] < nt:
                        _bad(f"signature_defs[{i}].{side}: tensor index {tm['tensor_index']} out of range")
                    maps[side][tm["name"] or ""] = tm["tensor_index"]
            sigs.append({"key": s["signature_key"] or "", "subgraph": s["subgraph_index"], **maps})
        return ir.Model(graphs, m["description"] or "", m["version"], sigs)

    def _opcode(self, i, oc):
        code = max(int(oc["builtin_code"]), int(oc["deprecated_builtin_code"]))
        if code == CUSTOM:
            return f"CUSTOM:{oc['custom_code'] or ''}", oc["version"]
        if code not in OP_NAMES:
            _bad(f"operator_codes[{i}]: unknown builtin code {code}")
        return OP_NAMES[code], oc["version"]

    def _buffer(self, idx, where):
        if not 0 <= idx < max(len(self.buffers), 1):
            _bad(f"{where}: buffer index {idx} out of range ({len(self.buffers)} buffers)")
        if not self.buffers:
            return None
        b = self.buffers[idx]
        if b["data"] is not None and len(b["data"]):
            return np.frombuffer(b["data"], np.uint8)
        if b["offset"] > 1 and b["size"]:
            if b["offset"] + b["size"] > len(self.data):
                _bad(f"buffers[{idx}]: offset/size beyond the end of the file")
            return np.frombuffer(self.data, np.uint8, b["size"], b["offset"])
        return None

    def _tensor(self, gi, ti, t):
        where = f"subgraphs[{gi}].tensors[{ti}] ({t['name']!r})"
        shape = tuple(int(d) for d in (t["shape"] if t["shape"] is not None else ()))
        if any(d < 0 for d in shape):
            _bad(f"{where}: negative dimension in shape {list(shape)}")
        n = int(np.prod(shape, dtype=np.float64)) if shape else 1
        if n > MAX_ELEMENTS:
            _bad(f"{where}: shape {list(shape)} has more than 2^31 elements")
        tname = TYPE_NAMES.get(t["type"])
        if tname is None:
            _bad(f"{where}: unknown tensor type {t['type']}")
        dtype = DTYPES.get(tname, tname.lower())
        raw = self._buffer(t["buffer"], where)
        data = None
        if raw is not None and dtype in DTYPES.values():
            item = np.dtype(dtype).itemsize
            if raw.size != n * item:
                _bad(f"{where}: buffer has {raw.size} bytes, shape {list(shape)} of {dtype} needs {n * item}")
            data = np.frombuffer(raw.tobytes(), dtype).reshape(shape)
        elif raw is not None:
            data = np.array(raw, np.uint8)
        q = t["quantization"]
        quant = None
        if q is not None and q["scale"] is not None and len(q["scale"]):
            zp = q["zero_point"] if q["zero_point"] is not None else np.zeros(len(q["scale"]), np.int64)
            axis = int(q["quantized_dimension"])
            if len(q["scale"]) > 1 and not (0 <= axis < len(shape) and shape[axis] == len(q["scale"])):
                _bad(f"{where}: per-channel quantization on axis {axis} does not match shape {list(shape)}")
            quant = ir.Quant(np.array(q["scale"], np.float32), np.array(zp, np.int64), axis)
        sig = t["shape_signature"]
        return ir.Tensor(ti, t["name"] or f"t{ti}", shape, dtype, data, quant, bool(t["is_variable"]),
                         None if sig is None else tuple(int(d) for d in sig))

    def _options(self, op, where):
        attrs = {}
        for tkey, vkey, names in (("builtin_options_type", "builtin_options", OPTION_TABLES),
                                  ("builtin_options2_type", "builtin_options2", OPTION2_TABLES)):
            typ = op[tkey]
            if not typ:
                continue
            tname = names.get(typ)
            if tname is None or tname not in TABLES:
                _bad(f"{where}: unknown options type {typ}")
            if op[vkey] is not None:
                values = self.reader.table(op[vkey], tname, f"{where}.{vkey}", 1)
            else:
                values = {k: d for k, (_, _, d) in TABLES[tname].items()}
            attrs.update({k: _pyval(v) for k, v in values.items() if not isinstance(v, dict)})
        if op["custom_options"] is not None:
            attrs["custom_options"] = bytes(op["custom_options"])
        return attrs

    def _subgraph(self, gi, sg):
        tensors = [self._tensor(gi, ti, t) for ti, t in enumerate(sg["tensors"] or [])]
        nt = len(tensors)

        def idx_list(v, where, allow_optional):
            out = [int(i) for i in (v if v is not None else [])]
            for i in out:
                if not (0 <= i < nt or (allow_optional and i == -1)):
                    _bad(f"{where}: tensor index {i} out of range ({nt} tensors)")
            return out

        nodes = []
        for oi, op in enumerate(sg["operators"] or []):
            where = f"subgraphs[{gi}].operators[{oi}]"
            if not 0 <= op["opcode_index"] < len(self.opcodes):
                _bad(f"{where}: opcode_index {op['opcode_index']} out of range")
            name, version = self.opcodes[op["opcode_index"]]
            nodes.append(ir.Node(name, idx_list(op["inputs"], where + ".inputs", True),
                                 idx_list(op["outputs"], where + ".outputs", False),
                                 self._options(op, where), version, oi))
        g = ir.Graph(sg["name"] or f"subgraph{gi}", tensors, nodes,
                     idx_list(sg["inputs"], f"subgraphs[{gi}].inputs", False),
                     idx_list(sg["outputs"], f"subgraphs[{gi}].outputs", False))
        g.nodes = _topo_sort(g, gi)
        return g


def _topo_sort(g: ir.Graph, gi: int) -> list:
    producer = {}
    for n in g.nodes:
        for o in n.outputs:
            if o in producer:
                _bad(f"subgraphs[{gi}]: tensor {g.t(o).name!r} is produced by two operators")
            producer[o] = n
    ready = set(g.inputs) | {t.id for t in g.tensors if t.is_const or t.is_variable or t.id not in producer}
    order, pending = [], list(g.nodes)
    while pending:
        rest = [n for n in pending if not all(i < 0 or i in ready for i in n.inputs)]
        now = [n for n in pending if all(i < 0 or i in ready for i in n.inputs)]
        if not now:
            blocked = next(i for i in rest[0].inputs if i >= 0 and i not in ready)
            _bad(f"subgraphs[{gi}]: operators form a cycle through tensor {g.t(blocked).name!r}")
        for n in now:
            order.append(n)
            ready.update(n.outputs)
        pending = rest
    return order


def load_tflite(data) -> ir.Model:
    """Parse .tflite bytes (or a path) into the IR."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        path = os.fspath(data)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise GpucError(f"cannot read model {path!r}: {e.strerror}") from None
    data = bytes(data)
    if len(data) < 16:
        raise ModelFormatError(f"not a TFLite model: only {len(data)} bytes")
    if data[4:8] != b"TFL3":
        raise ModelFormatError(f"not a TFLite model: file identifier is {data[4:8]!r}, expected b'TFL3'")
    try:
        return _Importer(data).run()
    except flatbuf.FlatbufferError as e:
        raise ModelFormatError(f"invalid model: {e}") from None
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, MemoryError, RecursionError) as e:
        raise ModelFormatError(f"invalid model: {type(e).__name__}: {e}") from None
