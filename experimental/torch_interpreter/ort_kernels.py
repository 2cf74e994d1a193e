"""What onnxruntime's kernels take, in ONE place: the element types of the CPU's kernels, the ops with a float16
kernel on the CPU, the ops with a float16 or bfloat16 kernel on CUDA, read by the converters (``ops/_common/kernels.py``
computes an op in a type it has), the half-precision rewrites and the tests that check the tables against
onnxruntime's kernel registry. Where a provider's kernels give other numbers than PyTorch is :mod:`.providers`'s.
"""

from __future__ import annotations

import onnx_ir as ir

FLOAT, F16, BF16, BOOL, INT64 = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.BOOL,
                                 ir.DataType.INT64)

D = ir.DataType
_F = frozenset({D.FLOAT16, FLOAT, D.DOUBLE})
_I = frozenset({D.INT32, INT64})
_I8 = frozenset({D.INT8, D.UINT8})
_ALL = _F | _I | _I8 | {BF16, BOOL, D.INT16, D.UINT16, D.UINT32, D.UINT64}


#: the integer types some arithmetic kernels of the CPU take (the others take none)
INTEGERS = _I | _I8


def _all_but(*missing: ir.DataType) -> frozenset:
    return _ALL - set(missing)


#: element types onnxruntime's CPU kernels take, for the op types that miss some (onnxruntime computes float16 in
#: float32 by itself where a kernel lacks it); op types not listed take every type. A key ``Op.mode`` is the op
#: with that attribute (``ScatterElements.add`` for reduction="add")
CPU_TYPES: dict[str, frozenset] = {
    # arithmetic and comparisons
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Mod", "Abs"), _F | _I | _I8 | {D.INT16}),
    **dict.fromkeys(("Less", "LessOrEqual", "Greater", "GreaterOrEqual"), _F | _I | _I8 | {D.INT16}),
    "Equal": _F | _I | _I8 | {D.INT16, BOOL},
    "Neg": _F | _I | {D.INT8, D.INT16},
    **dict.fromkeys(("Max", "Min", "Clip", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin"), _F | _I | _I8),
    **dict.fromkeys(("Pow", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "CumSum"), _F | _I),
    # math functions
    **dict.fromkeys(("Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tanh", "Floor", "Ceil", "Round"), _F),
    **dict.fromkeys(("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Erf"), frozenset({D.FLOAT16, FLOAT})),
    **dict.fromkeys(("Asinh", "Acosh", "Atanh"), frozenset({D.FLOAT16, FLOAT})),
    "IsNaN": _F,
    "IsInf": frozenset({FLOAT, D.DOUBLE}),
    # activations, convolution, pooling, normalization (no DOUBLE Conv, no FLOAT16 Celu...)
    "Relu": _F | _I | {D.INT8},
    "PRelu": _F | _I,
    **dict.fromkeys(
        ("Sigmoid", "Softplus", "Elu", "Selu", "HardSigmoid", "HardSwish", "LeakyRelu", "Softmax", "LogSoftmax"), _F
    ),
    **dict.fromkeys(("Mish", "Shrink", "LayerNormalization", "BatchNormalization", "RMSNormalization"), _F),
    "Celu": frozenset({FLOAT}),
    **dict.fromkeys(
        ("Conv", "ConvTranspose", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "InstanceNormalization"),
        frozenset({D.FLOAT16, FLOAT}),
    ),
    "Gelu": frozenset({D.FLOAT16, FLOAT}),
    **dict.fromkeys(("MaxPool", "DepthToSpace"), _F | _I8),
    "GridSample": _F,
    # region-of-interest ops and deformable convolution (torchvision's ops, ops/torchvision/)
    **dict.fromkeys(("RoiAlign", "DeformConv"), frozenset({FLOAT, D.DOUBLE})),
    **dict.fromkeys(("MaxRoiPool", "NonMaxSuppression"), frozenset({FLOAT})),
    # matrix products and determinants
    **dict.fromkeys(("MatMul", "Einsum"), _F | _I),
    "Gemm": _F,
    "Det": frozenset({D.FLOAT16, FLOAT}),
    # data movement: every type but a few
    **dict.fromkeys(("Expand", "Tile", "Pad", "Compress"), _all_but(BF16)),
    "Where": _all_but(BOOL, D.INT16, D.UINT16, BF16),
    "Trilu": _all_but(D.UINT8, D.INT8, D.INT16, D.UINT16, BF16),
    "EyeLike": _all_but(BOOL, D.UINT8, D.INT8, D.INT16, D.UINT16, BF16),
    # ScatterElements / ScatterND with a reduction
    **dict.fromkeys(("ScatterElements.add", "ScatterElements.mul"), _all_but(F16, BF16)),
    **dict.fromkeys(("ScatterElements.max", "ScatterElements.min"), _all_but(BOOL, BF16)),
}

#: the last opset at which onnxruntime's CPU has a kernel for these ops (1.32 has none for their version 22): a model
#: of a later opset does not load
LAST_OPSET = {"RoiAlign": 21, "MaxRoiPool": 21}

#: op types of ``optimize.half_precision``'s ``JUMPS`` and ``SELECTIONS`` onnxruntime's CPU has a float16 kernel for
#: (1.32); the others it computes in float32 between casts it inserts (checked against onnxruntime's kernel
#: registry by ``_unittests/test_half_rounding.py``)
CPU_FLOAT16 = frozenset(
    {
        *("Max", "Min", "Clip", "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice"),
        *("Split", "Concat", "Expand", "Gather", "GatherElements", "GatherND", "Round", "Mod"),
    }
)

#: op types with a bfloat16 kernel on onnxruntime's CUDA provider, registered at the op's latest ONNX version (an
#: open-ended registration matches that version only): the same kernel at every opset from 18 on, or from the op's first
#: version (``Gelu``: 20, ``Attention`` and ``RotaryEmbedding``: 23). Read from onnxruntime's kernel registrations
#: (``cuda_execution_provider.cc``, main of February 2026; ``tensor/gelu.cc``, ``llm/attention.cc``), and the bfloat16
#: kernel classes of ``Gelu``, ``Attention`` and ``RotaryEmbedding`` seen in onnxruntime-gpu 1.31.1's CUDA provider
#: library; ops whose bfloat16 kernel came with a later ONNX version (Conv-22, AveragePool-22...) are left out: at opset
#: 18 their older CUDA kernel has no bfloat16. A model made for CUDA only computes these in bfloat16 (CUDA computes each
#: in float32 and rounds once), the others as on the CPU.
CUDA_BFLOAT16 = frozenset(
    {
        *("Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt", "Exp", "Tanh", "Erf", "Sigmoid", "Relu"),
        *("Max", "Min", "Sum", "Mod", "Where", "IsNaN", "ReduceSum", "MatMul", "Gemm", "Softmax"),
        *("LayerNormalization", "Gelu", "Attention", "RotaryEmbedding", "Expand", "Tile", "Trilu"),
    }
)

#: op types moving or selecting elements: kernels of every type on both providers
MOVES = frozenset(
    {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Split", "Concat", "Gather", "Identity"}
)

#: op types onnxruntime's CUDA provider has a float16 kernel for (those of :data:`CUDA_BFLOAT16` and :data:`MOVES`
#: a bfloat16 one too): what an island of ``optimize.half_islands`` may hold
CUDA_FLOAT16 = MOVES | frozenset(
    {
        *("Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Tanh", "Erf", "Sigmoid"),
        *("Relu", "Max", "Min", "Sum", "Where", "Expand", "Tile", "MatMul", "Gemm", "Softmax"),
        *("LayerNormalization", "Gelu", "Attention", "ReduceSum"),
    }
)

#: onnxruntime's fused kernels with a bfloat16 kernel on CUDA that the onnxruntime level emits, read from their
#: registrations (contrib_ops/cuda) and from the kernel classes of onnxruntime-gpu 1.31.1's CUDA provider library
#: (SkipLayerNorm<BFloat16>, LayerNorm<BFloat16, float, BFloat16, true> for SimplifiedLayerNormalization, which
#: onnxruntime registers in the ONNX domain, BiasGeluKernel<BFloat16>, FastGelu<BFloat16>, RotaryEmbedding<BFloat16>,
#: Attention<BFloat16>, MultiHeadAttention<BFloat16>, GroupQueryAttention<BFloat16>; FusedMatMul is MatMul<BFloat16>,
#: registered for CUDA 11 and later); the ONNX ops: :data:`CUDA_BFLOAT16` and the moves of any type
CUDA_BFLOAT16_FUSED = frozenset({
    ("", "SimplifiedLayerNormalization"),
    *(("com.microsoft", op) for op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "BiasGelu",
                                       "FastGelu", "FusedMatMul", "RotaryEmbedding", "Attention",
                                       "MultiHeadAttention", "GroupQueryAttention")),
})
#: moves CUDA registers for every fixed-size type, bfloat16 included (gather_elements.cc: AllFixedSizeTensorTypes),
#: beside :data:`MOVES`
CUDA_ANY_TYPE_MOVES = frozenset({"GatherElements"})

#: the types of ONNX's ``Attention`` on onnxruntime's CPU (opset 23)
ATTENTION_TYPES = frozenset({FLOAT, F16, ir.DataType.DOUBLE})

_CUDA_FLOATS = frozenset({BF16, D.DOUBLE, FLOAT, F16})
_CUDA_NUMBERS = _CUDA_FLOATS | {D.INT8, D.INT16, D.INT32, INT64, D.UINT8, D.UINT16, D.UINT32, D.UINT64}
_CUDA_COMPARED = frozenset({D.DOUBLE, FLOAT, F16, D.INT32, INT64, D.UINT32, D.UINT64})
_MS = "com.microsoft"

#: the element types of its first input (``Where``: of its values) each op takes on onnxruntime's CUDA provider, in a
#: model of opset 23 (ONNX ops) and version 1 of com.microsoft; ``None``: every type. Read from onnxruntime's table of
#: registered kernels (``docs/OperatorKernels.md``, CUDAExecutionProvider, main of 2026) for the ops a model made for
#: CUDA holds (a language model's decoder, its cache and its last-token selection), and from the kernel classes in
#: onnxruntime-gpu 1.31.1's CUDA provider library (``ArgMax<float>``, ``GroupQueryAttention<BFloat16, ...>``...). An op
#: not listed has not been checked: :func:`~experimental.torch_interpreter.testing.check.nodes_without_cuda_kernel`
#: reports it.
CUDA_TYPES: dict[tuple[str, str], frozenset | None] = {
    **{("", op): None for op in (*MOVES, "GatherElements", "Expand", "Shape", "Cast", "ConstantOfShape", "Trilu",
                                 "ScatterND", "ScatterElements", "GatherND", "Size")},
    **{("", op): _CUDA_NUMBERS for op in ("Add", "Sub", "Mul", "Div", "Abs", "Sign")},
    ("", "Neg"): _CUDA_FLOATS | {D.INT8, D.INT16, D.INT32, INT64},
    ("", "Pow"): _CUDA_FLOATS | {D.INT32, INT64},
    **{("", op): _CUDA_FLOATS for op in ("Sigmoid", "Tanh", "Relu", "Sqrt", "Erf", "Exp", "Softmax", "MatMul", "Gemm",
                                         "Gelu", "Sum", "IsNaN", "IsInf", "LayerNormalization",
                                         "SimplifiedLayerNormalization", "HardSigmoid", "HardSwish")},
    **{("", op): frozenset({D.DOUBLE, FLOAT, F16}) for op in ("ArgMax", "ArgMin", "Cos", "Sin", "Log", "Reciprocal",
                                                               "Floor", "Ceil", "Round", "LogSoftmax", "Softplus")},
    **{("", op): frozenset({BF16, FLOAT, F16}) for op in ("Attention", "RotaryEmbedding")},
    ("", "ReduceMax"): frozenset({D.DOUBLE, FLOAT, F16, D.INT32, INT64}),
    ("", "ReduceMin"): frozenset({D.DOUBLE, FLOAT, F16, D.INT32, INT64, D.INT8, D.UINT8}),
    ("", "ReduceSum"): _CUDA_FLOATS | {D.INT32, INT64},
    ("", "ReduceMean"): frozenset({D.DOUBLE, FLOAT, F16, D.INT32}),
    ("", "Range"): frozenset({D.DOUBLE, FLOAT, D.INT16, D.INT32, INT64}),
    ("", "Where"): _CUDA_FLOATS | {D.INT32, INT64, D.UINT8},
    ("", "Equal"): _CUDA_COMPARED | {BOOL},
    **{("", op): _CUDA_COMPARED for op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual")},
    **{("", op): frozenset({BOOL}) for op in ("And", "Or", "Not", "Xor")},
    **{("", op): _CUDA_FLOATS | {D.INT32, INT64, D.UINT32, D.UINT64} for op in ("Max", "Min", "Mod")},
    ("", "Tile"): _CUDA_FLOATS | {D.INT32, INT64},
    ("", "CumSum"): frozenset({D.DOUBLE, FLOAT, F16, D.INT32, INT64, D.UINT32, D.UINT64}),
    ("", "TopK"): frozenset({D.DOUBLE, FLOAT, F16, D.INT32, INT64}),
    ("", "Clip"): frozenset({D.DOUBLE, FLOAT, F16, INT64, D.INT8, D.UINT64, D.UINT8}),
    **{(_MS, op): _CUDA_FLOATS for op in ("FusedMatMul", "Gelu", "FastGelu", "BiasGelu", "QuickGelu")},
    **{(_MS, op): frozenset({BF16, FLOAT, F16}) for op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
                                                           "RotaryEmbedding", "Attention", "MultiHeadAttention",
                                                           "MatMulNBits")},
    (_MS, "GroupQueryAttention"): frozenset({BF16, F16}),
}

#: the (input, scale) element types of ``SimplifiedLayerNormalization`` on CUDA: ``LayerNorm<T, float, V, true>``
#: kernels of onnxruntime-gpu 1.31.1 (float16 -> float32, no bfloat16 -> float32); the other normalizations take one
#: type
CUDA_SIMPLIFIED_NORM_TYPES = frozenset({(FLOAT, FLOAT), (D.DOUBLE, D.DOUBLE), (F16, F16), (F16, FLOAT), (FLOAT, F16),
                                        (BF16, BF16)})
