"""
.. _l-detection:

8. A detection model at every image size
========================================

torchvision's detection models keep a number of boxes that depends on the image (``torch.where(scores >
threshold)``, ``nms``) and resize each image by a factor computed with Python's ``min``: ``torch.export`` stops on
the first (``Could not guard on data-dependent expression``) and fixes the image size on the second.
``bypass_export_some_errors(patch_torchvision=True)`` replaces those few functions by the same computation
written for ``torch.export`` (:doc:`/patches` lists them); the ONNX graph then takes any image size and returns
any number of detections, zero included.

This page exports SSD300 (VGG-16, random weights: no model hub here, so the boxes mean nothing, but they are the
model's), runs the graph in ONNX Runtime on images of two sizes and draws its boxes over eager PyTorch's.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from torchvision.models import detection

from experimental.torch_interpreter import InferenceSession, bypass_export_some_errors, metadata, to_onnx

torch.manual_seed(0)
model = detection.ssd300_vgg16(weights=None, weights_backbone=None, num_classes=3).eval()
with torch.no_grad():  # random weights saturate the softmax (many scores of 1.0); smaller logits keep them apart
    for parameter in model.head.classification_head.parameters():
        parameter.mul_(0.05)

# %%
# The export
# ----------
#
# The model takes a list of images ``3 x height x width``; the height and width are declared dynamic.

height = torch.export.Dim("height", min=32, max=1024)
width = torch.export.Dim("width", min=32, max=1024)
begin = time.perf_counter()
with bypass_export_some_errors(patch_torchvision=True):
    onx = to_onnx(model, ([torch.rand(3, 160, 200)],), dynamic_shapes=([{1: height, 2: width}],))
print(f"exported in {time.perf_counter() - begin:.1f} s, {len(onx.graph.node)} nodes")
print("inputs:", [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]) for i in onx.graph.input])
print("outputs:", [o.name for o in onx.graph.output])

# %%
# The model's metadata says which patches were applied while it was captured.

print(metadata.read(onx)[metadata.CAPTURE_PATCHES])

# %%
# Two images
# ----------
#
# Two synthetic scenes of different sizes and shapes (one wide, one tall), neither of the exported size.


def scene(height: int, width: int, seed: int) -> torch.Tensor:
    """A grey background with a few coloured rectangles and a disc, under noise (on flat regions a network of
    random weights gives the same score everywhere: ties, which ``topk`` and ``nms`` may break either way)."""
    generator = torch.Generator().manual_seed(seed)
    image = torch.full((3, height, width), 0.5)
    for _ in range(4):
        y, x = int(torch.randint(0, height - 20, (1,), generator=generator)), int(
            torch.randint(0, width - 20, (1,), generator=generator)
        )
        h, w = (int(v) for v in torch.randint(15, 60, (2,), generator=generator))
        image[:, y : y + h, x : x + w] = torch.rand(3, 1, 1, generator=generator)
    yy, xx = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    image[:, (yy - height / 2) ** 2 + (xx - width / 3) ** 2 < (min(height, width) / 6) ** 2] = 0.9
    return 0.6 * image + 0.4 * torch.rand(3, height, width, generator=generator)


images = [scene(180, 260, 1), scene(240, 150, 2)]

# %%
# ONNX Runtime and eager PyTorch
# ------------------------------
#
# Both return the boxes sorted by decreasing score. The detections are compared as sets: each of eager's is
# matched to the closest of ONNX Runtime's (a random VGG-16 drifts in float32: eager float32 and float64 differ
# by about as much as ONNX Runtime and eager do).

session = InferenceSession(onx)
results = []
for image in images:
    with torch.no_grad():
        expected = model([image])[0]
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"images_0": image.numpy()})))
    boxes, scores = got["output_0.boxes"], got["output_0.scores"]
    results.append((expected, boxes, scores))
    want = np.concatenate([expected["scores"].numpy()[:, None], expected["boxes"].numpy()], axis=1)
    have = np.concatenate([scores[:, None], boxes], axis=1)
    closest = np.abs(have[None, :, :] - want[:, None, :]).max(axis=2).min(axis=1)
    print(
        f"image {tuple(image.shape[1:])}: {len(scores)} detections (eager {len(want)}), each of eager's "
        f"within {closest.max():.1e} of one of ONNX Runtime's (score and pixels)"
    )

# %%
# The ten best boxes of each, drawn over the image: eager's in white, ONNX Runtime's dashed in red on top.

fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
for ax, image, (expected, boxes, scores) in zip(axes, images, results):
    ax.imshow(image.permute(1, 2, 0).clamp(0, 1).numpy())
    for x1, y1, x2, y2 in expected["boxes"][:10].tolist():
        ax.add_patch(plt.Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, color="white", linewidth=3))
    for x1, y1, x2, y2 in boxes[:10].tolist():
        ax.add_patch(plt.Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, color="red", linewidth=1.2,
                                   linestyle="--"))
    ax.set_title(f"image {image.shape[1]} x {image.shape[2]}")
    ax.axis("off")
fig.suptitle("the ten best boxes: eager PyTorch (white), ONNX Runtime (dashed red)")
fig.tight_layout()

# %%
# Faster R-CNN and Mask R-CNN export the same way (Mask R-CNN's masks are pasted into the image at any size), as
# do RetinaNet and FCOS; :doc:`/patches` gives the status of each.
