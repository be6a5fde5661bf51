"""TFLite flatbuffer -> IR (`load_tflite`), safe on hostile input.

Every offset, index, length and shape is checked before use; any defect raises ModelFormatError
with a one-line message naming the field ("invalid model: subgraphs[0].operators[5].inputs: ...").
No other exception escapes for any byte string.  Constant data are read-only numpy arrays (one
copy per buffer, shared by the tensors that use it).  Nodes come out in topological order.
"""
from __future__ import annotations

import heapq
import os
import struct

import numpy as np

from gpuc.compiler import ir
from gpuc.compiler.frontend import blockwise
from gpuc.compiler.frontend.composite import inline_composites
from gpuc.compiler.frontend.fbreader import Reader, fail
from gpuc.compiler.frontend.tflite_schema import ENUMS, TABLES
from gpuc.compiler.ops import litert_versions
from gpuc.errors import GpucError, ModelFormatError

NUMPY_TYPES = {"FLOAT32": "float32", "FLOAT16": "float16", "INT32": "int32", "UINT8": "uint8",
               "INT64": "int64", "BOOL": "bool", "INT16": "int16", "INT8": "int8", "FLOAT64": "float64",
               "UINT64": "uint64", "UINT32": "uint32", "UINT16": "uint16", "COMPLEX64": "complex64",
               "COMPLEX128": "complex128"}
TYPE_NAMES = {v: k for k, v in ENUMS["TensorType"].items()}
OP_NAMES = {v: k for k, v in ENUMS["BuiltinOperator"].items()}
OPTIONS = {v: k for k, v in ENUMS["BuiltinOptions"].items()}
OPTIONS2 = {v: k for k, v in ENUMS["BuiltinOptions2"].items()}
INDEX_VECTORS = {v: k for k, v in ENUMS["SparseIndexVector"].items()}
CUSTOM = ENUMS["BuiltinOperator"]["CUSTOM"]
SPARSE_CSR = ENUMS["DimensionType"]["SPARSE_CSR"]
MAX_ELEMENTS = 1 << 31
MAX_RANK = 64
SCHEMA_VERSION = 3
_MAGIC = {b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"PK\x03\x04": "a ZIP archive",
          b"\x1f\x8b": "a gzip file", b"\x89HDF": "an HDF5 file", b"\x7fELF": "an ELF binary",
          b"GPUC": "a gpuc bundle", b"%PDF": "a PDF document", b"\x08\x01\x12": "an ONNX/protobuf file"}


def load_tflite(data) -> ir.Model:
    """Parse a .tflite model (bytes, or a path to read) into the IR."""
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise GpucError(f"cannot read model {path}: {e.strerror or e}") from None
    elif isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    elif not isinstance(data, bytes):
        raise TypeError(f"load_tflite expects bytes or a path, not {type(data).__name__}")
    _check_header(data)
    try:
        return _Importer(data).run()
    except ModelFormatError:
        raise
    except (struct.error, IndexError, KeyError, ValueError, TypeError, OverflowError, MemoryError,
            RecursionError, ZeroDivisionError) as e:
        raise ModelFormatError(f"invalid model: malformed flatbuffer ({type(e).__name__}: {e})") from None


def _check_header(data: bytes) -> None:
    if len(data) < 8:
        raise ModelFormatError("not a TFLite model (file is empty)" if not data else
                               f"not a TFLite model (only {len(data)} bytes)")
    ident = data[4:8]
    if ident != b"TFL3":
        kind = next((k for m, k in _MAGIC.items() if data.startswith(m)), None)
        raise ModelFormatError(f"not a TFLite model (file identifier is {ident!r}, expected b'TFL3'"
                               + (f"; this looks like {kind})" if kind else ")"))
    if len(data) < 16:
        raise ModelFormatError(f"invalid model: truncated ({len(data)} bytes)")


def _int_list(v, where: str, lo: int, hi: int) -> list[int]:
    out = [] if v is None else v.tolist()
    for i in out:
        if not (lo <= i < hi):
            fail(where, f"tensor index {i} out of range ({hi} tensors)")
    return out


_ZP_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}

class _Importer:
    def __init__(self, data: bytes):
        self.data = data
        self.r = Reader(data, TABLES)
        self.buffer_cache: dict[int, tuple[int, int] | None] = {}
        self.array_cache: dict[tuple, np.ndarray] = {}
        self.const_bytes = 0
        self.dense_budget = max(64 << 20, 16 * len(data))   # densified sparse constants

    def run(self) -> ir.Model:
        m = self.r.root("Model")
        version = m["version"]
        if version != SCHEMA_VERSION:
            fail("version", f"schema version {version} is not supported (gpuc reads version 3)")
        self.buffers = m["buffers"] or []
        codes = m["operator_codes"] or []
        self.opcodes = [self._opcode(i, codes[i]) for i in range(len(codes))]
        sgs = m["subgraphs"]
        if not sgs:
            fail("subgraphs", "model has no subgraphs")
        graphs = [self._subgraph(gi, sgs[gi]) for gi in range(len(sgs))]
        sigs = []
        sdefs = m["signature_defs"] or []
        for si in range(len(sdefs)):
            s, where = sdefs[si], f"signature_defs[{si}]"
            g = s["subgraph_index"]
            if g >= len(graphs):
                fail(where + ".subgraph_index", f"subgraph {g} out of range ({len(graphs)} subgraphs)")
            entry = {"key": s["signature_key"] or "", "subgraph": g}
            for side in ("inputs", "outputs"):
                maps, tms = {}, s[side] or []
                for j in range(len(tms)):
                    ti = tms[j]["tensor_index"]
                    if ti >= len(graphs[g].tensors):
                        fail(f"{where}.{side}[{j}].tensor_index",
                             f"tensor {ti} out of range ({len(graphs[g].tensors)} tensors)")
                    maps[tms[j]["name"] or f"{side[:-1]}{j}"] = ti
                entry[side] = maps
            sigs.append(entry)
        model = ir.Model(graphs, m["description"] or "", version, sigs)
        inline_composites(model)            # STABLEHLO_COMPOSITE: its decomposition's plain ops
        from gpuc.compiler.ops.stablehlo import lower_stablehlo
        lower_stablehlo(model)              # the other StableHLO builtins: gpuc's builtins (compiler/ops/stablehlo.py)
        from gpuc.compiler.ops import lower_at_import
        lower_at_import(model)              # builtins rewritten into others (ops' lowered_at_import: ADD_N ...)
        return model

    # -- operator codes -------------------------------------------------------------------------
    def _opcode(self, i: int, oc) -> tuple[str, int]:
        code = max(int(oc["builtin_code"]), int(oc["deprecated_builtin_code"]))
        if code == CUSTOM:
            return "CUSTOM:" + (oc["custom_code"] or ""), oc["version"]
        if code not in OP_NAMES or OP_NAMES[code] == "PLACEHOLDER_FOR_GREATER_OP_CODES":
            fail(f"operator_codes[{i}].builtin_code", f"unknown builtin operator code {code}")
        name, version = OP_NAMES[code], oc["version"]
        lo_hi = litert_versions.VERSIONS.get(name)       # LiteRT refuses other versions as it loads
        if lo_hi is not None and not lo_hi[0] <= version <= lo_hi[1]:
            runs = f"versions {lo_hi[0]}..{lo_hi[1]}" if lo_hi[0] < lo_hi[1] else f"version {lo_hi[0]}"
            fail(f"operator_codes[{i}].version", f"{name} version {version} is not one LiteRT runs (it runs {runs})")
        return name, version

    # -- buffers and tensors --------------------------------------------------------------------
    def _buffer(self, idx: int, where: str):
        """(file offset, length) of buffer idx's bytes, or None when it is empty."""
        if idx in self.buffer_cache:
            return self.buffer_cache[idx]
        if idx >= len(self.buffers):
            if idx == 0:
                return None
            fail(where + ".buffer", f"buffer {idx} out of range ({len(self.buffers)} buffers)")
        b = self.buffers[idx]
        span = b.span("data")
        if not span or not span[1]:
            off, size = b["offset"], b["size"]
            span = None
            if off > 1 and size:
                if off + size > len(self.data):
                    fail(f"buffers[{idx}]", f"offset {off} + size {size} is beyond the end of the file "
                                            f"({len(self.data)} bytes)")
                span = (off, size)
        if span:
            self.const_bytes += span[1]
            if self.const_bytes > len(self.data):
                fail(f"buffers[{idx}]", "constant data add up to more than the file size")
        self.buffer_cache[idx] = span
        return span

    def _array(self, span, dtype: str) -> np.ndarray:
        """Buffer bytes as a read-only 1-D array of dtype (one copy per buffer and dtype)."""
        key = (span, dtype)
        arr = self.array_cache.get(key)
        if arr is None:
            dt = np.dtype(dtype)
            arr = np.frombuffer(self.data, dt.newbyteorder("<") if dtype != "bool" else np.uint8,
                                span[1] // dt.itemsize, span[0])
            arr = arr != 0 if dtype == "bool" else arr.astype(dt)    # copy: aligned, native order
            arr.flags.writeable = False
            self.array_cache[key] = arr
        return arr

    def _tensor(self, gi: int, ti: int, t) -> ir.Tensor:
        where = f"subgraphs[{gi}].tensors[{ti}]"
        name = t["name"] or f"t{ti}"
        shape_v = t["shape"]
        shape = () if shape_v is None else tuple(shape_v.tolist())
        if len(shape) > MAX_RANK:
            fail(where + ".shape", f"tensor {name!r} has rank {len(shape)} (at most {MAX_RANK})")
        if any(d < 0 for d in shape):
            fail(where + ".shape", f"tensor {name!r} has a negative dimension in {list(shape)}")
        count = 1
        for d in shape:
            count *= d
        if count > MAX_ELEMENTS:
            fail(where + ".shape", f"tensor {name!r} shape {list(shape)} has more than 2^31 elements")
        sig_v = t["shape_signature"]
        sig = None if sig_v is None else tuple(sig_v.tolist())
        if sig is not None and any(d < -1 for d in sig):
            fail(where + ".shape_signature", f"tensor {name!r} has an invalid dimension in {list(sig)}")
        tname = TYPE_NAMES.get(t["type"])
        if tname is None:
            fail(where + ".type", f"tensor {name!r} has unknown type {t['type']}")
        dtype = NUMPY_TYPES.get(tname, tname.lower())
        data = None
        span = self._buffer(t["buffer"], where)
        if span is not None:
            sparsity = t["sparsity"]
            if dtype not in NUMPY_TYPES.values():
                data = self._array(span, "uint8")            # string / resource / int4 ...: raw bytes
            elif sparsity is not None:
                data = self._densify(sparsity, self._array(span, dtype), shape, dtype, where, name)
            else:
                need = count * np.dtype(dtype).itemsize
                if span[1] != need:
                    fail(where, f"tensor {name!r} buffer has {span[1]} bytes, but shape {list(shape)} "
                                f"of {dtype} needs {need}")
                data = self._array(span, dtype).reshape(shape)
        return ir.Tensor(ti, name, shape, dtype, data, self._quant(t, shape, where, name, dtype),
                         bool(t["is_variable"]), sig)

    def _quant(self, t, shape, where: str, name: str, dtype: str = ""):
        q = t["quantization"]
        if q is None:
            return None
        scale = q["scale"]
        if scale is None or not scale.size:
            return None
        zp = q["zero_point"]
        if zp is None or not zp.size:
            zp = np.zeros(scale.size, np.int64)
        elif zp.size != scale.size:
            fail(where + ".quantization", f"tensor {name!r} has {scale.size} scales but {zp.size} zero points")
        if not np.isfinite(scale).all():
            fail(where + ".quantization.scale", f"tensor {name!r} has a non-finite scale")
        lo, hi = _ZP_RANGE.get(dtype, (None, None))
        if lo is not None and ((zp < lo) | (zp > hi)).any():
            fail(where + ".quantization.zero_point", f"tensor {name!r}: zero point {int(zp[(zp < lo) | (zp > hi)][0])} "
                                                     f"outside the {dtype} range [{lo}, {hi}]")
        axis = int(q["quantized_dimension"])
        if scale.size > 1 and not (0 <= axis < len(shape) and shape[axis] == scale.size):
            fail(where + ".quantization", f"tensor {name!r}: {scale.size} per-channel scales on axis {axis} "
                                          f"do not match shape {list(shape)}")
        return ir.Quant(scale.astype(np.float32), zp.astype(np.int64), axis)

    def _densify(self, sp, values: np.ndarray, shape, dtype: str, where: str, name: str) -> np.ndarray:
        """Expand a sparse constant (TFLite SparsityParameters, CSR levels) into a dense array."""
        where += ".sparsity"
        order = [] if sp["traversal_order"] is None else sp["traversal_order"].tolist()
        bmap = [] if sp["block_map"] is None else sp["block_map"].tolist()
        dims = sp["dim_metadata"] or []
        n, k = len(shape), len(bmap)
        if len(dims) != n + k or sorted(order) != list(range(n + k)) or sorted(order[:n]) != list(range(n)) \
                or any(not 0 <= d < n for d in bmap) or len(set(bmap)) != k:
            fail(where, f"tensor {name!r}: inconsistent traversal_order/block_map/dim_metadata")
        block = [dims[order.index(n + b)]["dense_size"] for b in range(k)]
        size = []
        for lv in range(n + k):
            d = order[lv]
            if d >= n:
                size.append(block[d - n])
            else:
                bs = block[bmap.index(d)] if d in bmap else 1
                if bs <= 0 or shape[d] % bs:
                    fail(where, f"tensor {name!r}: block size {bs} does not divide dimension {d}")
                size.append(shape[d] // bs)
        dense_count = max(1, int(np.prod(shape, dtype=np.float64)))
        self.dense_budget -= dense_count * values.itemsize
        if self.dense_budget < 0:
            fail(where, f"tensor {name!r}: densified sparse constants are too large")
        pos = np.zeros(1, np.int64)
        cols: list[np.ndarray] = []
        for lv in range(n + k):
            dm, lw = dims[lv], f"{where}.dim_metadata[{lv}]"
            if dm["format"] != SPARSE_CSR:
                ds = dm["dense_size"]
                if ds != size[lv] or len(pos) * ds > dense_count:
                    fail(lw, f"tensor {name!r}: dense_size {ds} does not match dimension size {size[lv]}")
                cols = [np.repeat(c, ds) for c in cols] + [np.tile(np.arange(ds, dtype=np.int64), len(pos))]
                pos = (pos[:, None] * ds + np.arange(ds, dtype=np.int64)).ravel()
                continue
            seg, idx = (self._index_vector(dm, f, lw) for f in ("array_segments", "array_indices"))
            if len(seg) < int(pos.max(initial=0)) + 2 or (len(seg) and (seg[0] < 0 or np.any(np.diff(seg) < 0)
                                                                         or seg[-1] > len(idx))):
                fail(lw, f"tensor {name!r}: array_segments inconsistent with array_indices")
            if idx.size and (idx.min() < 0 or idx.max() >= size[lv]):
                fail(lw, f"tensor {name!r}: array_indices out of range for dimension size {size[lv]}")
            starts, counts = seg[pos], seg[pos + 1] - seg[pos]
            total = int(counts.sum())
            if total > dense_count:
                fail(lw, f"tensor {name!r}: more stored elements than the dense shape holds")
            cols = [np.repeat(c, counts) for c in cols]
            pos = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total, dtype=np.int64)
            cols.append(idx[pos])
        if len(pos) != values.size:
            fail(where, f"tensor {name!r}: sparsity describes {len(pos)} values, buffer holds {values.size}")
        orig = [None] * n
        for lv in range(n):
            orig[order[lv]] = cols[lv]
        for lv in range(n, n + k):
            b = order[lv] - n
            orig[bmap[b]] = orig[bmap[b]] * block[b] + cols[lv]
        dense = np.zeros(shape, dtype)
        if n:
            dense[tuple(orig)] = values
        elif values.size:
            dense[()] = values[0]
        dense.flags.writeable = False
        return dense

    def _index_vector(self, dm, field: str, where: str) -> np.ndarray:
        tname = INDEX_VECTORS.get(dm[field + "_type"])
        tbl = dm.union(field, tname) if tname not in (None, "NONE") else None
        if tbl is None:
            fail(f"{where}.{field}", "missing or of unknown type")
        v = tbl["values"]
        return np.zeros(0, np.int64) if v is None else v.astype(np.int64)

    # -- operators and subgraphs ----------------------------------------------------------------
    def _attrs(self, op, where: str) -> dict:
        attrs = {}
        for tfield, vfield, names in (("builtin_options_type", "builtin_options", OPTIONS),
                                      ("builtin_options2_type", "builtin_options2", OPTIONS2)):
            typ = op[tfield]
            if not typ:
                continue
            table = names.get(typ)
            if table is None or table not in TABLES:
                fail(f"{where}.{tfield}", f"unknown options type {typ}")
            opts = op.union(vfield, table)
            if opts is None:
                attrs.update({f: (list(d) if isinstance(d, (list, tuple)) else d)
                              for f, (_, _, d) in TABLES[table].items()})
            else:
                attrs.update(opts.to_dict())
        if op["large_custom_options_size"]:
            off, size = op["large_custom_options_offset"], op["large_custom_options_size"]
            if off + size > len(self.data):
                fail(f"{where}.large_custom_options_offset",
                     f"offset {off} + size {size} is beyond the end of the file ({len(self.data)} bytes)")
            attrs["custom_options"] = self.data[off:off + size]
        else:
            span = op.span("custom_options")
            if span is not None:
                attrs["custom_options"] = self.data[span[0]:span[0] + span[1]]
        return attrs

    def _subgraph(self, gi: int, sg) -> ir.Graph:
        where = f"subgraphs[{gi}]"
        tvec = sg["tensors"] or []
        tensors = [self._tensor(gi, ti, tvec[ti]) for ti in range(len(tvec))]
        blockwise_weights = blockwise.dequantize(tensors, tvec, where)   # int4 blockwise weights as float32
        nt = len(tensors)
        nodes = []
        ops = sg["operators"] or []
        for oi in range(len(ops)):
            op, ow = ops[oi], f"{where}.operators[{oi}]"
            code = op["opcode_index"]
            if code >= len(self.opcodes):
                fail(ow + ".opcode_index", f"operator code {code} out of range ({len(self.opcodes)} codes)")
            name, version = self.opcodes[code]
            nodes.append(ir.Node(name, _int_list(op["inputs"], ow + ".inputs", -1, nt),
                                 _int_list(op["outputs"], ow + ".outputs", 0, nt),
                                 self._attrs(op, ow), version, oi))
        g = ir.Graph(sg["name"] or ("main" if gi == 0 else f"subgraph{gi}"), tensors, nodes,
                     _int_list(sg["inputs"], where + ".inputs", 0, nt),
                     _int_list(sg["outputs"], where + ".outputs", 0, nt))
        g.nodes = _topo_order(g, where)
        blockwise.dynamic_fcs(g, blockwise_weights)      # their FCs quantize activations as LiteRT's do
        return g


def _topo_order(g: ir.Graph, where: str) -> list[ir.Node]:
    """The nodes in execution order: as stored when that is already valid, else topologically
    sorted (stable: ties keep the stored order)."""
    producer: dict[int, int] = {}
    for k, n in enumerate(g.nodes):
        for o in n.outputs:
            if o in producer:
                fail(where, f"tensor {g.tensors[o].name!r} is produced by two operators "
                            f"(#{g.nodes[producer[o]].index} and #{n.index})")
            producer[o] = k
    ready = set(g.inputs)
    ready.update(t.id for t in g.tensors if t.is_const or t.is_variable)
    ready.update(t for t in range(len(g.tensors)) if t not in producer)    # produced by nobody
    deps = [{producer[i] for i in n.inputs if i >= 0 and i not in ready} for n in g.nodes]
    if all(all(p < k for p in d) for k, d in enumerate(deps)):
        return g.nodes
    users: dict[int, list[int]] = {}
    for k, d in enumerate(deps):
        for p in d:
            users.setdefault(p, []).append(k)
    missing = [len(d) for d in deps]
    heap = [k for k, c in enumerate(missing) if c == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        k = heapq.heappop(heap)
        order.append(k)
        for u in users.get(k, ()):
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(heap, u)
    if len(order) < len(g.nodes):
        left = {k for k, c in enumerate(missing) if c}
        seen, k = {}, min(left)
        while k not in seen:                   # walk back through unfinished producers to a cycle
            seen[k] = len(seen)
            k = min(p for p in deps[k] if p in left)
        p = min(p for p in deps[k] if p in left)
        tensor = next(i for i in g.nodes[k].inputs if i >= 0 and i not in ready and producer[i] == p)
        fail(where, f"operators form a cycle through tensor {g.tensors[tensor].name!r}")
    return [g.nodes[k] for k in order]
