"""Export time of to_onnx against torch.export.export alone and torch.onnx.export(dynamo=True).

Run: ``python benchmarks/bench_export_time.py [--repeat 5]``. Prints one table; ratios are relative to
``torch.export.export`` on the same model and inputs, measured in the same process.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
import transformers

from experimental.torch_interpreter import to_onnx


def tiny_llama():
    cfg = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256, use_cache=False,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


def tiny_gpt2():
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=256,
                                  use_cache=False, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _time(fn, repeat):
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - begin)
    return statistics.median(times), result


def bench(name, model, repeat):
    kwargs = {"input_ids": torch.randint(0, 1000, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.int64)}
    B, S = torch.export.Dim("batch"), torch.export.Dim("seq")
    ds_torch = {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}
    ds_ours = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    t_export, _ = _time(lambda: torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=ds_torch, strict=False), repeat)
    t_ours, onx = _time(lambda: to_onnx(model, (), kwargs, dynamic_shapes=ds_ours), repeat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_dynamo, prog = _time(
            lambda: torch.onnx.export(model, (), kwargs=kwargs, dynamic_shapes=ds_torch, dynamo=True, verbose=False),
            repeat,
        )
    n_dynamo = len(prog.model_proto.graph.node)
    rows = [
        ("torch.export.export", t_export, None),
        ("to_onnx (ours)", t_ours, len(onx.graph.node)),
        ("torch.onnx.export(dynamo=True)", t_dynamo, n_dynamo),
    ]
    print(f"\n{name} (median of {repeat})")
    print(f"{'':34} {'seconds':>8} {'/export':>8} {'nodes':>6}")
    for label, t, nodes in rows:
        print(f"{label:34} {t:8.3f} {t / t_export:8.2f} {nodes if nodes is not None else '':>6}")
    return t_ours / t_export


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    bench("tiny LlamaForCausalLM", tiny_llama(), args.repeat)
    bench("tiny GPT2LMHeadModel", tiny_gpt2(), args.repeat)


if __name__ == "__main__":
    main()
