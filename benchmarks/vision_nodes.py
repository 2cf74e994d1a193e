"""Node counts of torchvision CNNs: ``to_onnx`` (default optimization) against ``torch.onnx.export(..., dynamo=True)``.

Random weights, eval mode, dynamic batch, height and width, exported on a ``[2, 3, 224, 224]`` image by both
exporters in the same run; each model is then run by onnxruntime's CPU provider on that size and on a second one
(``--second``, default ``1x3x160x192``) and compared with eager PyTorch (max abs difference; the largest eager
value beside it for scale). Nodes are counted in every graph, the branches of ``If`` included (in parentheses:
the main graph alone), for the default ``providers="any"`` and for a model made for CUDA (``providers="cuda"``,
without the guards only the CPU needs: onnxruntime's CPU MaxPool skips NaN)::

    python benchmarks/vision_nodes.py                          # the six models, markdown table
    python benchmarks/vision_nodes.py --models resnet18,googlenet --second 1x3x256x200

Needs torchvision (README: on a CPU build of torch, ``bash ../shared/vision/torchvision_cpu.sh``).
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.testing.check import count_nodes

MODELS = ("resnet18", "squeezenet1_0", "googlenet", "mobilenet_v3_small", "densenet121", "efficientnet_b0")


def build(name: str) -> torch.nn.Module:
    """A torchvision classifier with random weights, in eval mode (GoogLeNet without its auxiliary heads)."""
    torch.manual_seed(0)
    extra = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    return getattr(torchvision.models, name)(weights=None, **extra).eval()


def max_diff(onx: onnx.ModelProto, model: torch.nn.Module, image: torch.Tensor) -> float:
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: image.numpy()})[0]
    with torch.no_grad():
        expected = model(image).numpy()
    return float(np.abs(got - expected).max())


def measure(name: str, sizes: list[tuple[int, ...]]) -> dict:
    model = build(name)
    image = torch.randn(*sizes[0], generator=torch.Generator().manual_seed(0))
    images = [image] + [torch.randn(*s, generator=torch.Generator().manual_seed(1)) for s in sizes[1:]]
    ours_axes = ({0: "batch", 2: "height", 3: "width"},)
    begin = time.perf_counter()
    ours = to_onnx(model, (image,), dynamic_shapes=ours_axes)
    t_ours = time.perf_counter() - begin
    for_cuda = to_onnx(model, (image,), dynamic_shapes=ours_axes, providers="cuda")
    # Dim.DYNAMIC: named Dims make torch.export fail on SqueezeNet's ceil-mode pools (a guard it cannot solve)
    axes = dict.fromkeys((0, 2, 3), torch.export.Dim.DYNAMIC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        begin = time.perf_counter()
        official = torch.onnx.export(model, (image,), dynamic_shapes=(axes,), dynamo=True, verbose=False).model_proto
        t_official = time.perf_counter() - begin
    return {
        "model": name,
        "ours": count_nodes(ours.graph), "ours top": len(ours.graph.node),
        "cuda": count_nodes(for_cuda.graph), "cuda top": len(for_cuda.graph.node),
        "official": count_nodes(official.graph), "official top": len(official.graph.node),
        "ours s": t_ours, "official s": t_official,
        "ours diff": [max_diff(ours, model, x) for x in images],
        "official diff": [max_diff(official, model, x) for x in images],
        "scale": max(float(model(x).abs().max()) for x in images),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--second", default="1x3x160x192", help="the second input size, NxCxHxW")
    args = parser.parse_args()
    logging.getLogger("torch.fx.experimental.symbolic_shapes").setLevel(logging.ERROR)
    sizes = [(2, 3, 224, 224), tuple(int(v) for v in args.second.split("x"))]
    shown = " / ".join("x".join(map(str, s)) for s in sizes)
    print(f"| model | nodes ours (top) | ours, providers='cuda' | official (top) | export s ours | "
          f"export s official | max abs diff ours ({shown}) | official | max abs eager |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        with torch.no_grad():
            r = measure(name, sizes)
        diffs = [" / ".join(f"{d:.1e}" for d in r[k]) for k in ("ours diff", "official diff")]
        print(f"| {name} | {r['ours']} ({r['ours top']}) | {r['cuda']} ({r['cuda top']}) | {r['official']} "
              f"({r['official top']}) | {r['ours s']:.1f} | {r['official s']:.1f} | {diffs[0]} | {diffs[1]} | "
              f"{r['scale']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
