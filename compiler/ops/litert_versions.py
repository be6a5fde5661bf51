"""The operator versions LiteRT's interpreter runs: builtin op -> (lowest, highest) version its builtin op
resolver registers (LiteRT 2.3; the default resolver, XNNPACK's, resolves the same).  An operator code with a
version outside its range makes LiteRT refuse the model as it loads ("Didn't find op for builtin opcode"), and
the importer refuses it the same way (compiler/frontend/importer.py).  Ops LiteRT has no kernel for (most
StableHLO ops, CALL, CONCAT_EMBEDDINGS) are not listed: gpuc's own lowerings take their versions.

Written by scripts/litert_versions.py (one one-op model per op and version); do not edit.
"""
from __future__ import annotations

VERSIONS: dict[str, tuple[int, int]] = {
    "ABS": (1, 5), "ADD": (1, 6), "ADD_N": (1, 1), "ARG_MAX": (1, 3), "ARG_MIN": (1, 3), "ASSIGN_VARIABLE": (1, 1),
    "ATAN2": (1, 1), "AVERAGE_POOL_2D": (1, 3), "BATCH_MATMUL": (1, 4), "BATCH_TO_SPACE_ND": (1, 4),
    "BIDIRECTIONAL_SEQUENCE_LSTM": (1, 3), "BIDIRECTIONAL_SEQUENCE_RNN": (1, 3), "BITCAST": (1, 1),
    "BITWISE_XOR": (1, 1), "BROADCAST_ARGS": (1, 1), "BROADCAST_TO": (2, 4), "BUCKETIZE": (1, 1),
    "CALL_ONCE": (1, 1), "CAST": (1, 9), "CEIL": (1, 1), "COMPLEX_ABS": (1, 1), "CONCATENATION": (1, 7),
    "CONV_2D": (1, 8), "CONV_3D": (1, 1), "CONV_3D_TRANSPOSE": (1, 1), "COS": (1, 2), "CUMSUM": (1, 1),
    "DENSIFY": (1, 1), "DEPTHWISE_CONV_2D": (1, 7), "DEPTH_TO_SPACE": (1, 2), "DEQUANTIZE": (1, 9),
    "DILATE": (1, 1), "DIV": (1, 2), "DYNAMIC_UPDATE_SLICE": (1, 6), "ELU": (1, 1), "EMBEDDING_LOOKUP": (1, 5),
    "EMBEDDING_LOOKUP_SPARSE": (1, 1), "EQUAL": (1, 5), "EXP": (1, 2), "EXPAND_DIMS": (1, 1), "FAKE_QUANT": (1, 2),
    "FILL": (1, 5), "FLOOR": (1, 1), "FLOOR_DIV": (1, 3), "FLOOR_MOD": (1, 2), "FULLY_CONNECTED": (1, 14),
    "GATHER": (1, 8), "GATHER_ND": (1, 6), "GELU": (1, 3), "GREATER": (1, 2), "GREATER_EQUAL": (1, 3),
    "HARD_SWISH": (1, 1), "HASHTABLE": (1, 1), "HASHTABLE_FIND": (1, 1), "HASHTABLE_IMPORT": (1, 1),
    "HASHTABLE_LOOKUP": (1, 1), "HASHTABLE_SIZE": (1, 1), "IF": (1, 1), "IMAG": (1, 1), "L2_NORMALIZATION": (1, 2),
    "L2_POOL_2D": (1, 1), "LEAKY_RELU": (1, 2), "LESS": (1, 3), "LESS_EQUAL": (1, 2),
    "LOCAL_RESPONSE_NORMALIZATION": (1, 1), "LOG": (1, 2), "LOGICAL_AND": (1, 1), "LOGICAL_NOT": (1, 1),
    "LOGICAL_OR": (1, 1), "LOGISTIC": (1, 3), "LOG_SOFTMAX": (1, 2), "LSH_PROJECTION": (1, 1), "LSTM": (1, 4),
    "MATRIX_DIAG": (1, 1), "MATRIX_SET_DIAG": (1, 1), "MAXIMUM": (1, 4), "MAX_POOL_2D": (1, 3), "MEAN": (1, 3),
    "MINIMUM": (1, 4), "MIRROR_PAD": (1, 3), "MUL": (1, 8), "MULTINOMIAL": (1, 1), "NEG": (1, 1),
    "NON_MAX_SUPPRESSION_V4": (1, 1), "NON_MAX_SUPPRESSION_V5": (1, 1), "NOT_EQUAL": (1, 4), "ONE_HOT": (1, 1),
    "PACK": (1, 5), "PAD": (1, 6), "PADV2": (1, 6), "POW": (1, 1), "PRELU": (1, 1), "QUANTIZE": (1, 6),
    "RANDOM_STANDARD_NORMAL": (1, 1), "RANDOM_UNIFORM": (1, 1), "RANGE": (1, 2), "RANK": (1, 1),
    "READ_VARIABLE": (1, 1), "REAL": (1, 1), "REDUCE_ALL": (1, 1), "REDUCE_ANY": (1, 1), "REDUCE_MAX": (1, 3),
    "REDUCE_MIN": (1, 3), "REDUCE_PROD": (1, 2), "REDUCE_WINDOW": (1, 1), "RELU": (1, 3), "RELU6": (1, 3),
    "RELU_0_TO_1": (1, 1), "RELU_N1_TO_1": (1, 1), "RESHAPE": (1, 1), "RESIZE_BILINEAR": (1, 4),
    "RESIZE_NEAREST_NEIGHBOR": (1, 4), "REVERSE_SEQUENCE": (1, 1), "REVERSE_V2": (1, 4), "RFFT2D": (1, 1),
    "RIGHT_SHIFT": (1, 1), "RNN": (1, 3), "ROUND": (1, 1), "RSQRT": (1, 3), "SCATTER_ND": (1, 1),
    "SEGMENT_SUM": (1, 1), "SELECT": (1, 4), "SELECT_V2": (1, 2), "SHAPE": (1, 1), "SIGN": (1, 2), "SIN": (1, 2),
    "SKIP_GRAM": (1, 1), "SLICE": (1, 8), "SOFTMAX": (1, 4), "SPACE_TO_BATCH_ND": (1, 4), "SPACE_TO_DEPTH": (1, 2),
    "SPARSE_TO_DENSE": (1, 3), "SPLIT": (1, 5), "SPLIT_V": (1, 3), "SQRT": (1, 2), "SQUARE": (1, 1),
    "SQUARED_DIFFERENCE": (1, 2), "SQUEEZE": (1, 2), "STABLEHLO_ADD": (1, 1), "STABLEHLO_AND": (1, 1),
    "STABLEHLO_CASE": (1, 1), "STABLEHLO_COMPOSITE": (1, 1), "STABLEHLO_GATHER": (1, 1),
    "STABLEHLO_MAXIMUM": (1, 1), "STABLEHLO_MINIMUM": (1, 1), "STABLEHLO_MULTIPLY": (1, 1), "STABLEHLO_PAD": (1, 1),
    "STABLEHLO_REDUCE_WINDOW": (1, 1), "STABLEHLO_RNG_BIT_GENERATOR": (1, 1), "STABLEHLO_SCATTER": (1, 1),
    "STABLEHLO_SHIFT_LEFT": (1, 1), "STRIDED_SLICE": (1, 8), "SUB": (1, 5), "SUM": (1, 2), "SVDF": (1, 4),
    "TANH": (1, 3), "TILE": (1, 3), "TOPK_V2": (1, 3), "TRANSPOSE": (1, 9), "TRANSPOSE_CONV": (1, 5),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (1, 4), "UNIDIRECTIONAL_SEQUENCE_RNN": (1, 3), "UNIQUE": (1, 1),
    "UNPACK": (1, 6), "UNSORTED_SEGMENT_MAX": (1, 1), "UNSORTED_SEGMENT_MIN": (1, 1),
    "UNSORTED_SEGMENT_PROD": (1, 1), "UNSORTED_SEGMENT_SUM": (1, 1), "VAR_HANDLE": (1, 1), "WHERE": (1, 2),
    "WHILE": (1, 1), "ZEROS_LIKE": (1, 1),
}
