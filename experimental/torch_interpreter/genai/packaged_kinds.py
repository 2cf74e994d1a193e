"""Which models a GenAI package holds: decoder-only text models. A folder of another kind is refused before
anything is exported, naming its type: transformers builds a causal LM from some of them all the same (Whisper's
and BART's decoder alone, without the encoder whose states its cross-attention reads; the text half of a
vision-language model), and their package would run, generate, and not be the model the folder holds.
"""

from __future__ import annotations

from typing import Any

from ..errors import GenAIError

#: the sub-configs of a model taking more than text (images, audio, video): a vision-language model's package
#: would hold its text decoder alone
NON_TEXT_CONFIGS = ("vision_config", "audio_config", "speech_config", "vision_tower_config", "video_config")


def check_packaged_kind(config: Any, source: str) -> None:
    """Raises :class:`~experimental.torch_interpreter.GenAIError` when ``config`` (the folder's or the model's
    transformers config; ``source`` names it in the message) is not a decoder-only text model.

    Example::

        >>> import transformers
        >>> cfg = transformers.WhisperConfig(d_model=32, encoder_layers=1, decoder_layers=1)
        >>> try:
        ...     check_packaged_kind(cfg, "'whisper-tiny'")
        ... except GenAIError as e:
        ...     print(str(e)[:75])
        'whisper-tiny' holds a 'whisper' model, an encoder-decoder: a GenAI package
    """
    model_type = getattr(config, "model_type", None) or type(config).__name__
    architectures = ", ".join(getattr(config, "architectures", None) or []) or "no architecture named"
    if getattr(config, "is_encoder_decoder", False):
        raise GenAIError(
            f"{source} holds a {model_type!r} model, an encoder-decoder: a GenAI package holds a decoder-only text "
            f"model ({architectures}); the causal LM transformers builds from it is the decoder alone, whose "
            "cross-attention would never see the encoder's states")
    others = [name for name in NON_TEXT_CONFIGS if getattr(config, name, None) is not None]
    if others:
        raise GenAIError(
            f"{source} holds a {model_type!r} model taking more than text ({', '.join(others)}): a GenAI package "
            f"holds a decoder-only text model ({architectures}); its package would hold the text decoder alone "
            "and take no image or audio")
