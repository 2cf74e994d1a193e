"""Writes the ONNX graphs of a few tiny models, at each optimization level, and the forward and backward graphs the
``torch.compile`` backend translates for two of them, as text: two runs on two versions of the code, compared with
``diff -r``, show whether a refactoring changed any exported graph.

    python benchmarks/graph_snapshot.py snapshot_before/
    # ... change the code ...
    python benchmarks/graph_snapshot.py snapshot_after/
    diff -r snapshot_before snapshot_after && echo "same graphs"

The text is ``onnx.printer``'s (nodes, attributes, shapes, metadata), initializers by name, shape and a hash of
their bytes; the ONNX node names are numbered in graph order.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

import onnx
import onnx.printer
import torch



def _llama(use_cache: bool):
    import transformers

    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256,
                                   use_cache=use_cache)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def _bert():
    import transformers

    cfg = transformers.BertConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                  vocab_size=1000, max_position_embeddings=256)
    torch.manual_seed(0)
    return transformers.BertModel(cfg).eval()


def _padded(batch: int, seq: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, : seq // 3] = 0
    return {"input_ids": torch.randint(0, 1000, (batch, seq), generator=gen), "attention_mask": mask}


def cases():
    """``(name, model, args, kwargs, dynamic_shapes)`` of the snapshot."""
    from experimental.torch_interpreter.testing.llm_models import decoder_dynamic_shapes, decoder_inputs, decoder_model

    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    yield "llama", _llama(False), (), _padded(2, 8), dyn
    yield "bert", _bert(), (), _padded(2, 8), dyn
    for name in ("llama", "gpt2"):
        model = decoder_model(name)
        yield f"{name}_cache", model, (), decoder_inputs(model, 2, 3, 5), decoder_dynamic_shapes(model)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.LazyLinear(4)).eval()
    x = torch.randn(2, 3, 16, 16)
    cnn(x)
    yield "cnn", cnn, (x,), None, ({0: "batch"},)

    class Branches(torch.nn.Module):  # subgraphs: If, and a Python scalar and a weight read from the outer graph
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.linspace(-1, 1, 4))

        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: (t * self.w).relu(), lambda t: t - 2.5, (x,))

    yield "cond", Branches(), (torch.randn(3, 4),), None, ({0: "batch"},)


def training_cases():
    """``(name, model, inputs)`` trained one step through the ``torch.compile`` backend."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    yield "mlp", mlp, (torch.randn(4, 8),)
    yield "llama", _llama(False).train(), (torch.randint(0, 1000, (2, 8)),)


def training_graphs(folder: str) -> None:
    """Writes the forward and backward graphs of :func:`training_cases` (one step each)."""
    import tempfile

    from experimental.torch_interpreter.training import OrtBackend

    for name, model, inputs in training_cases():
        with tempfile.TemporaryDirectory() as dump:
            torch._dynamo.reset()
            compiled = torch.compile(model, backend=OrtBackend(dump_folder=dump, fallback="raise"))
            out = compiled(*inputs)
            (out.logits if hasattr(out, "logits") else out).float().pow(2).mean().backward()
            for file in sorted(os.listdir(dump)):
                path = os.path.join(folder, f"train_{name}.{file[:-len('.onnx')]}.txt")
                onx = onnx.load(os.path.join(dump, file))
                with open(path, "w") as f:
                    f.write(text(onx))
                print(f"{path}: {len(onx.graph.node)} nodes")


def text(model: onnx.ModelProto) -> str:
    """The model as text, initializers replaced by their name, shape and hash."""
    lines = []
    for init in model.graph.initializer:
        digest = hashlib.sha256(init.raw_data or onnx.numpy_helper.to_array(init).tobytes()).hexdigest()[:16]
        lines.append(f"initializer {init.name} {list(init.dims)} {init.data_type} {digest}")
    del model.graph.initializer[:]
    for i, node in enumerate(model.graph.node):
        node.name = f"n{i}"
    props = sorted((p.key, p.value) for p in model.metadata_props)
    lines += [f"metadata {k} = {v!r}" for k, v in props]
    return "\n".join(lines) + "\n" + onnx.printer.to_text(model)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    args = parser.parse_args(argv)
    from experimental.torch_interpreter import to_onnx

    os.makedirs(args.folder, exist_ok=True)
    for name, model, margs, kwargs, dyn in cases():
        for level in (False, True, "onnxruntime"):
            onx = to_onnx(model, margs, kwargs, dynamic_shapes=dyn, optimize=level)
            path = os.path.join(args.folder, f"{name}.{level}.txt")
            with open(path, "w") as f:
                f.write(text(onx))
            print(f"{path}: {len(onx.graph.node)} nodes")
    training_graphs(args.folder)


if __name__ == "__main__":
    main()
