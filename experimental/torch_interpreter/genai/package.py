"""``export_genai``: a transformers causal LM as an onnxruntime-genai package (``model.onnx`` and its external data,
``genai_config.json``, the tokenizer files), written whole or not at all."""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir
import torch

from ..capture.range_constraints import RangeConstraintWarning
from ..checkpoint import Checkpoint
from ..convert import to_onnx
from ..errors import GenAIError
from ..logs import verbosity
from ..onnx_export_errors import bypass_export_some_errors
from ..optimize.onnxscript_adapter import fuse_skip_norms
from ..saving import save, staging_folder
from .config import context_length, genai_config, special_tokens
from .float32_twin import float32_twin
from .group_query_attention import fuse_group_query_attention
from .inputs import decoder_inputs
from .last_token import LastTokenLogits
from .quantize import quantize_int4
from .shared_buffer_check import check_shared_buffer
from .source import CausalLM, check_weights_used, load_causal_lm
from .tokenizer_files import tokenizer_folder, write_tokenizer
from .twin import twin_model

logger = logging.getLogger(__name__)

#: the precisions of ``export_genai(precision=...)``: the dtype the model computes in (int4: the weights of the
#: products in int4, the rest in float32 on the CPU, float16 on CUDA)
PRECISIONS = ("fp32", "fp16", "bf16", "int4")
PROVIDERS = ("cpu", "cuda")
_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

#: a folder whose safetensors files hold more bytes than this is read on the meta device: each weight converted as
#: it is written, ``GroupQueryAttention`` checked on a twin (:mod:`.twin`); a smaller one is loaded and checked on
#: its own weights (int4 always loads: onnxruntime's quantizer reads the whole model)
META_ABOVE_BYTES = 2**30

#: the decoder's file name in the package (its weights in ``MODEL_FILE + ".data"``)
MODEL_FILE = "model.onnx"


@dataclass
class GenAIPackage:
    """What :func:`export_genai` wrote: the folder, its files, the ``genai_config.json`` content, the precision
    and provider, the time it took and the decoder's op counts."""

    folder: str
    files: list[str]
    config: dict[str, Any]
    precision: str
    provider: str
    seconds: float
    op_counts: dict[str, int] = field(default_factory=dict)
    #: ``"GroupQueryAttention"`` (the cache written in place), or ``"Attention (why not)"``
    attention: str = ""


def export_genai(
    model: torch.nn.Module | str | os.PathLike,
    folder: str | os.PathLike,
    precision: str = "fp32",
    provider: str = "cpu",
    *,
    tokenizer: Any = None,
    overwrite: bool = False,
    verbose: int = 0,
    trust_remote_code: bool = False,
) -> GenAIPackage:
    """Exports a transformers causal language model as a package onnxruntime-genai generates text with:
    ``onnxruntime_genai.Model(folder)`` loads it.

    :param model: a transformers causal LM (``*ForCausalLM``), or the folder ``save_pretrained`` wrote
        (``config.json``, the weights, the tokenizer files); a folder of more than :data:`META_ABOVE_BYTES` is
        read on the meta device, each weight converted as it is written (a checkpoint larger than memory fits),
        except for ``int4``
    :param folder: the package's folder, which must not exist (see ``overwrite``); it is written in a temporary
        folder beside it and renamed when complete, so a failure leaves nothing
    :param precision: ``"fp32"``; ``"fp16"`` or ``"bf16"`` (for CUDA); ``"int4"`` (the weights of every product
        quantized by onnxruntime's ``MatMulNBits`` quantizer, blocks of 32)
    :param provider: ``"cpu"`` or ``"cuda"``: the execution provider the package is made for (graph and
        ``genai_config.json``)
    :param tokenizer: a transformers tokenizer or a folder holding its files; default: the files of ``model``'s
        folder (for a model object, the local folder its ``name_or_path`` names, as ``from_pretrained`` left it)
    :param overwrite: replace ``folder`` when it exists
    :param verbose: 0 silent, 1 logs the steps
    :param trust_remote_code: run the code a folder's ``config.json`` names (``auto_map``); refused by default
    :return: a :class:`GenAIPackage`

    The decoder takes ``input_ids``, ``attention_mask``, ``position_ids`` (when the model takes them) and the cache
    as ``past_key_values.%d.key`` / ``.value`` (``cache.%d.key`` from transformers 5.2x), and returns ``logits``
    (of the last token of each row only: :mod:`.last_token`) and ``present.%d.key`` / ``.value``.
    A model without a key-value cache (Mamba, RWKV, hybrids) raises
    :class:`~experimental.torch_interpreter.GenAIError`, and so does an unknown precision or provider.

    Example::

        >>> import tempfile, os, transformers
        >>> from experimental.torch_interpreter import export_genai
        >>> cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        ...                                num_attention_heads=2, vocab_size=100, bos_token_id=1, eos_token_id=2)
        >>> folder = os.path.join(tempfile.mkdtemp(), "llama")
        >>> package = export_genai(transformers.LlamaForCausalLM(cfg), folder)
        >>> package.files, package.config["model"]["type"]
        (['genai_config.json', 'model.onnx'], 'llama')
    """
    begin = time.perf_counter()
    folder = os.path.abspath(os.fspath(folder))
    dtype = _check_arguments(folder, precision, provider, overwrite)
    with verbosity(verbose):
        meta = precision != "int4" and _checkpoint_bytes(model) > META_ABOVE_BYTES
        lm = load_causal_lm(model, dtype, meta=meta, trust_remote_code=trust_remote_code)
        context_length(lm.config)  # a context length out of bounds refused before the export
        logger.info("exporting %s for onnxruntime-genai (%s, %s)", type(lm.model).__name__, precision, provider)
        inputs = decoder_inputs(lm.model)
        check_weights_used(lm)
        onx = _decoder(lm.model, inputs, provider, lm.weights)
        generation = getattr(lm.model, "generation_config", None)
        onx, attention = _group_query_attention(onx, lm, inputs, generation, provider, dtype)
        if precision == "int4":
            onx = ir.from_proto(quantize_int4(ir.to_proto(onx), provider))
        shared = attention == "GroupQueryAttention"
        inputs.has_position_ids = any(v.name == "position_ids" for v in onx.graph.inputs)
        config = genai_config(lm.config, generation, inputs, provider=provider, filename=MODEL_FILE,
                              share_buffer=shared)
        files = _write_package(onx, config, lm.folder or tokenizer_folder(lm.model), tokenizer, folder, overwrite)
    counts = Counter(n.op_type for n in onx.graph)
    seconds = time.perf_counter() - begin
    logger.info("package written in %s (%.1f s): %s", folder, seconds, ", ".join(files))
    return GenAIPackage(folder, files, config, precision, provider, seconds, dict(counts.most_common()), attention)


def _checkpoint_bytes(model: Any) -> int:
    """The size of the safetensors files of the folder ``model`` (0 for a model object or another path)."""
    if not isinstance(model, (str, os.PathLike)) or not os.path.isdir(model):
        return 0
    return sum(entry.stat().st_size for entry in os.scandir(model) if entry.name.endswith(".safetensors"))


def _decoder(module: torch.nn.Module, inputs: Any, provider: str, weights: str | None) -> ir.Model:
    """The decoder exported: the logits of the last token of each row, the weights of a meta model read from the
    checkpoint of the folder ``weights``."""
    with bypass_export_some_errors(patch_transformers=True) as adapt, warnings.catch_warnings():
        # torch.export's ranges start at 2 (a size of 0 or 1 would be specialized); the decoder runs with an
        # empty past and one new token, which the package tests check by generating
        warnings.simplefilter("ignore", RangeConstraintWarning)
        onx = to_onnx(LastTokenLogits(module), (), adapt(inputs.kwargs), dynamic_shapes=inputs.dynamic_shapes,
                      optimize="onnxruntime", providers=provider, as_ir=True,
                      weights=Checkpoint(weights, prefix="lm.") if weights else None)
    # a decoder runs one token a step: the fused residual + norm kernels cost the same there as Add + norm (the
    # CPU pipeline gives back those whose sum is read again, slower over a long prompt), one node less per pair
    fused = fuse_skip_norms(onx)
    if fused:
        logger.info("%d residual + normalization pairs fused for decoding", fused)
    return onx


def _group_query_attention(onx: ir.Model, lm: CausalLM, inputs: Any, generation: Any, provider: str,
                           dtype: torch.dtype) -> tuple[ir.Model, str]:
    """The decoder with ``GroupQueryAttention`` and the cache written in place when the rewrite applies and gives
    PyTorch's logits (checked on the CPU; for a model on the meta device, on its twin: :mod:`.twin`; in half
    precision, the graph's float32 twin against the model in float32: :mod:`.float32_twin`), else the decoder as
    exported; and which attention it has (with the reason when it is not ``GroupQueryAttention``)."""
    if provider == "cuda" and dtype == torch.float32:
        return onx, ("Attention (onnxruntime's CUDA GroupQueryAttention takes float16 and bfloat16 only: a float32 "
                     "package for CUDA keeps Attention)")
    candidate = onx.clone()
    fusion = fuse_group_query_attention(candidate, context_length(lm.config))
    if not fusion.layers:
        logger.info("GroupQueryAttention not used: %s", fusion.reason)
        return onx, f"Attention ({fusion.reason})"
    checked, checked_inputs, checked_candidate = lm.model, inputs, candidate
    if lm.weights is not None:  # no weights to run: the same rewrite checked on a twin with real weights
        checked = twin_model(lm.config, dtype)
        checked_inputs = decoder_inputs(checked)
        checked_candidate = _decoder(checked, checked_inputs, provider, None)
        twin_fusion = fuse_group_query_attention(checked_candidate, context_length(lm.config))
        if not twin_fusion.layers:
            return onx, f"Attention (GroupQueryAttention did not apply to the model's twin: {twin_fusion.reason})"
    if dtype != torch.float32:  # the rewrite's form checked in float32, not half precision's rounding
        checked_candidate = float32_twin(checked_candidate)
        checked = copy.deepcopy(checked).to(torch.float32)
    pad = special_tokens(lm.config.get_text_config(decoder=True), generation)[2]
    problem = check_shared_buffer(checked_candidate, checked, checked_inputs.cache_argument, pad,
                                  checked_inputs.kv_heads, checked_inputs.head_size)
    if problem:
        logger.warning("GroupQueryAttention not used, the decoder keeps Attention: the rewritten decoder does not "
                       "give PyTorch's logits (%s)", problem)
        return onx, f"Attention (GroupQueryAttention gave other logits: {problem})"
    return candidate, "GroupQueryAttention"


def _check_arguments(folder: str, precision: str, provider: str, overwrite: bool) -> torch.dtype:
    if precision not in PRECISIONS:
        raise GenAIError(f"unknown precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if provider not in PROVIDERS:
        raise GenAIError(f"unknown provider {provider!r}: expected one of {', '.join(PROVIDERS)}")
    if precision in ("fp16", "bf16") and provider != "cuda":
        raise GenAIError(
            f"precision {precision!r} is made for CUDA (provider='cuda'): onnxruntime's CPU has no {precision} "
            "kernel for most of a decoder's ops; on the CPU, use precision 'fp32' or 'int4'")
    if os.path.exists(folder) and not overwrite:
        raise GenAIError(f"{folder!r} exists: export_genai writes a new folder (give another one, or "
                         "overwrite=True / --overwrite to replace it)")
    if precision == "int4":
        return torch.float32 if provider == "cpu" else torch.float16
    return _DTYPES[precision]


def _write_package(onx: ir.Model, config: dict, source: str | None, tokenizer: Any, folder: str,
                   overwrite: bool) -> list[str]:
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    tmp = staging_folder(parent, ".genai_")
    try:
        save(onx, os.path.join(tmp, MODEL_FILE), external_data=None)
        with open(os.path.join(tmp, "genai_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=4)
        write_tokenizer(source, tokenizer, tmp)
        if os.path.exists(folder) and overwrite:
            shutil.rmtree(folder)
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sorted(os.listdir(folder))
