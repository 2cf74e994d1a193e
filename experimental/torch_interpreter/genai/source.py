"""What :func:`~experimental.torch_interpreter.export_genai` packages: a transformers causal language model, given
as a model or as a folder written by ``save_pretrained``, checked to have a key-value cache onnxruntime-genai can
drive, in the precision the package computes in.
"""

from __future__ import annotations

import copy
import logging
import os
from dataclasses import dataclass, field

import torch

from ..checkpoint import empty_weights
from ..checkpoint.source import index_shards
from ..errors import CheckpointError, GenAIError
from .inputs import cache_argument
from .packaged_kinds import check_packaged_kind

logger = logging.getLogger(__name__)

#: the cache layers of ``transformers.DynamicCache`` that hold keys and values (the others hold a recurrent state)
KV_LAYERS = ("DynamicLayer", "DynamicSlidingWindowLayer")


@dataclass
class CausalLM:
    """A causal language model ready to export: the module (eval mode, in the package's dtype), its config and
    the folder it was read from (None for a model object)."""

    model: torch.nn.Module
    config: object
    folder: str | None
    #: the folder whose checkpoint holds the weights of a model built on the meta device (None: in memory)
    weights: str | None = None
    #: transformers' loading information of a folder's model (its missing and unexpected weights)
    loading: dict = field(default_factory=dict)


def load_causal_lm(
    model: torch.nn.Module | str | os.PathLike, dtype: torch.dtype, meta: bool = False, trust_remote_code: bool = False
) -> CausalLM:
    """The causal LM ``model`` names (a folder written by ``save_pretrained``, or a transformers model), in eval
    mode and in ``dtype``; a model object in another dtype is copied first, the caller's model is left as it is.
    With ``meta=True`` a folder's model is built on the meta device (:func:`~..checkpoint.empty_weights`), its
    weights left in the folder's checkpoint (``CausalLM.weights``). A folder whose ``config.json`` names code of its
    own (``auto_map``) is refused unless ``trust_remote_code`` (transformers would otherwise ask on standard input
    and run it on "y").
    Raises :class:`~experimental.torch_interpreter.GenAIError` when it is not a causal LM with a key-value cache.

    Example::

        >>> import torch, transformers
        >>> cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        ...                                num_attention_heads=2, vocab_size=100)
        >>> lm = load_causal_lm(transformers.LlamaForCausalLM(cfg), torch.float32)
        >>> type(lm.model).__name__, lm.folder
        ('LlamaForCausalLM', None)
    """
    if isinstance(model, (str, os.PathLike)):
        folder = os.fspath(model)
        module, loading = _from_folder(folder, dtype, meta, trust_remote_code)
    elif isinstance(model, torch.nn.Module):
        folder, loading = None, {}
        module = model
        if not hasattr(module, "config") or not callable(getattr(module, "generate", None)):
            raise GenAIError(
                f"export_genai takes a transformers causal language model (a *ForCausalLM) or the folder "
                f"save_pretrained wrote, not a {type(model).__name__}: onnxruntime-genai drives a decoder with a "
                "key-value cache")
        check_packaged_kind(module.config, f"the {type(module).__name__}")
        if _dtype_of(module) != dtype:
            logger.info("the model is copied into %s (the caller's model is left as it is)", dtype)
            module = copy.deepcopy(module).to(dtype)
    else:
        raise GenAIError(f"export_genai takes a model or a folder, not {type(model).__name__}")
    check_kv_cache(module)
    return CausalLM(module.eval(), module.config, folder, folder if meta else None, loading)


def _from_folder(
    folder: str, dtype: torch.dtype, meta: bool, trust_remote_code: bool = False
) -> tuple[torch.nn.Module, dict]:
    """The causal LM of ``folder`` and transformers' loading information (missing and unexpected weights)."""
    import transformers

    if not os.path.isdir(folder):
        raise GenAIError(f"{folder!r} is not a folder; export_genai takes the folder save_pretrained wrote "
                         "(config.json, the weights, the tokenizer files) or a transformers model")
    if not os.path.exists(os.path.join(folder, "config.json")):
        raise GenAIError(f"{folder!r} has no config.json: it is not a folder written by save_pretrained "
                         f"(it holds {sorted(os.listdir(folder))[:8]})")
    try:  # transformers joins the index's shard names to the folder: '../x' or an absolute name reads elsewhere
        index_shards(folder)
    except CheckpointError as e:
        raise GenAIError(str(e)) from e
    try:
        config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except Exception as e:  # noqa: BLE001  (reading the user's file: whatever transformers raises refuses it)
        if "trust_remote_code" in str(e):
            raise GenAIError(
                f"{folder!r} names code of its own in config.json (auto_map): it is not run unless "
                "trust_remote_code=True is given (export_genai(..., trust_remote_code=True))") from e
        raise GenAIError(f"transformers cannot read {folder}/config.json: {type(e).__name__}: {str(e)[:500]}") from e
    check_packaged_kind(config, repr(folder))
    try:
        if not meta:
            return transformers.AutoModelForCausalLM.from_pretrained(
                folder, dtype=dtype, trust_remote_code=trust_remote_code, output_loading_info=True
            )
        with empty_weights():
            module = transformers.AutoModelForCausalLM.from_config(
                config, dtype=dtype, trust_remote_code=trust_remote_code
            )
        if os.path.exists(os.path.join(folder, "generation_config.json")):
            module.generation_config = transformers.GenerationConfig.from_pretrained(folder)
        return module, {}  # the weights are matched by name as they are read (CheckpointError when one lacks)
    except Exception as e:  # noqa: BLE001  (the folder's weights and generation config, read by transformers)
        if "Unrecognized configuration class" in str(e):
            raise GenAIError(
                f"{folder!r} holds a {config.model_type!r} model, which transformers has no causal language model "
                "class for: onnxruntime-genai generates with decoders (AutoModelForCausalLM)") from e
        raise GenAIError(
            f"transformers cannot load the causal LM of {folder!r}: {type(e).__name__}: {str(e)[:500]}"
        ) from e


def check_weights_used(lm: CausalLM) -> None:
    """Raises :class:`~experimental.torch_interpreter.GenAIError` when the causal LM of a folder leaves weights of
    its checkpoint out (the package would not be the folder's model) or initializes some at random (the checkpoint
    lacks them): transformers only logs both. Called once the model is known to return a cache (an encoder's
    folder is refused for that first)."""
    folder, info = lm.folder, lm.loading
    for key, what in (("missing_keys", "has no value in the checkpoint (it would be random)"),
                      ("unexpected_keys",
                       "is not a weight of the causal LM transformers builds (it would be left out)")):
        names = sorted(info.get(key) or ())
        if names:
            raise GenAIError(
                f"{len(names)} weight(s) of {folder!r}: {', '.join(names[:4])}{', ...' if len(names) > 4 else ''} "
                f"{what}; the package would not be the folder's model")


def _dtype_of(module: torch.nn.Module) -> torch.dtype | None:
    floats = {p.dtype for p in module.parameters() if p.is_floating_point()}
    return floats.pop() if len(floats) == 1 else None


def check_kv_cache(module: torch.nn.Module) -> None:
    """Raises :class:`~experimental.torch_interpreter.GenAIError` when ``module`` keeps no key-value cache
    onnxruntime-genai can hold: no ``cache`` (or ``past_key_values``) argument, or cache layers with a recurrent state
    (Mamba, RWKV, xLSTM, hybrids of attention and recurrences)."""
    import transformers

    name = type(module).__name__
    if cache_argument(module) is None:
        raise GenAIError(
            f"{name} keeps no key-value cache (its forward takes no cache): onnxruntime-genai generates "
            "with a decoder whose cache is keys and values per layer; a recurrent state (Mamba, RWKV, xLSTM) is "
            "not one")
    try:
        cache = transformers.DynamicCache(config=module.config)
    except Exception as e:  # noqa: BLE001  (any failure says the config describes no cache transformers knows)
        raise GenAIError(f"{name}: transformers builds no DynamicCache from its config ({e})") from e
    others = sorted({type(layer).__name__ for layer in cache.layers} - set(KV_LAYERS))
    if others:
        raise GenAIError(
            f"{name} keeps a recurrent state in its cache ({', '.join(others)}), not only keys and values: "
            "onnxruntime-genai's decoder cache holds keys and values per layer, so it cannot drive this model")
