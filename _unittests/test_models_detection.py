"""torchvision's detection models through ``to_onnx`` under ``bypass_export_some_errors(patch_torchvision=True)``
(``patches/torchvision_detection.py``): ONNX Runtime against eager torchvision, unpatched, on images of two sizes
and with no detection at all.

Random weights give near-equal scores and ``nms`` then keeps boxes by the order of ties: the models are built
with 3 classes (scores about 1/3 apart from each other) and the detections compared as sets (sorted by score,
label and box). The height and width are dynamic: one graph is checked at several image sizes.
"""

import time

import numpy as np
import pytest
import torch

from experimental.torch_interpreter import InferenceSession, bypass_export_some_errors, metadata, to_onnx

try:
    torchvision = pytest.importorskip(
        "torchvision", reason="torchvision is not installed: pip install --no-deps 'torchvision==0.28.*' (README)"
    )
    from torchvision.models import detection
except RuntimeError as e:  # the CUDA wheel beside a CPU torch: its kernels do not load
    pytest.skip(f"torchvision is installed but its ops do not load ({e}); on a CPU build of torch run "
                "bash ../shared/vision/torchvision_cpu.sh", allow_module_level=True)


def build(name: str, score_thresh: float = 0.0) -> torch.nn.Module:
    """A detection model with random weights (fixed seed), 3 classes, small images (128 to 160 pixels)."""
    torch.manual_seed(0)
    ctor = getattr(detection, name)
    thresh = "box_score_thresh" if "rcnn" in name else "score_thresh"
    return ctor(weights=None, weights_backbone=None, num_classes=3, min_size=128, max_size=160,
                **{thresh: score_thresh}).eval()


def _rows(boxes: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(scores, np.float64)[:, None], np.asarray(labels, np.float64)[:, None],
                           np.asarray(boxes, np.float64).reshape(-1, 4)], axis=1)


def order(boxes: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The permutation that sorts the detections by score, label and box."""
    rows = _rows(boxes, labels, scores)
    return np.lexsort(rows.T[::-1])


def canonical(boxes: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The detections as rows ``score, label, x1, y1, x2, y2`` sorted, so that two sets compare row by row."""
    return _rows(boxes, labels, scores)[order(boxes, labels, scores)]


def assert_same_detections(have: np.ndarray, want: np.ndarray, tol: float = 1e-4) -> list[int]:
    """Every row of ``want`` matches one row of ``have`` (each used once) within ``tol`` (relative to the
    value): rows of scores equal to a few ulps may come in either order. Returns the row of ``have`` matched
    to each row of ``want``."""
    free = np.ones(len(have), dtype=bool)
    matched = []
    for row in want:
        close = free & np.all(np.abs(have - row) <= tol * (1 + np.abs(row)), axis=1)
        assert close.any(), f"no ONNX detection matches eager's {row.tolist()}"
        matched.append(int(np.argmax(close)))
        free[matched[-1]] = False
    return matched


def assert_same_masks(have: np.ndarray, want: np.ndarray) -> None:
    """Masks of matched detections: probabilities pasted at their box's pixels. A box corner a few
    thousandths of a pixel away from eager's can fall on the other side of an integer and move a row or
    column of the pasted mask by one pixel: the masks agree where both have the same support, and that is
    all but a few edge pixels."""
    assert have.shape == want.shape
    if have.size == 0:
        return
    differ = np.abs(have - want) > 1e-3
    assert differ.mean() < 2e-3, f"{differ.mean():.2%} of the mask pixels differ"


def export(model: torch.nn.Module, tmp_path, size: tuple[int, int] = (128, 160)) -> InferenceSession:
    """Exports the model on a ``3 x size`` image, height and width dynamic (32 to 1024)."""
    example = torch.rand(3, *size, generator=torch.Generator().manual_seed(0))
    path = str(tmp_path / "model.onnx")
    dims = {1: torch.export.Dim("height", min=32, max=1024), 2: torch.export.Dim("width", min=32, max=1024)}
    begin = time.perf_counter()
    with bypass_export_some_errors(patch_torchvision=True):
        to_onnx(model, ([example],), dynamic_shapes=([dims],), filename=path)
    print(f"export {type(model).__name__}: {time.perf_counter() - begin:.1f} s")
    return InferenceSession(path)


def compare(model: torch.nn.Module, sess: InferenceSession, sizes, tol: float = 1e-4) -> list[np.ndarray]:
    """Runs the ONNX model and eager (unpatched) on an image of each size and checks the detections (and
    masks) as sets; returns the detections."""
    names = [o.name for o in sess.get_outputs()]
    found = []
    for seed, size in enumerate(sizes, 1):
        image = torch.rand(3, *size, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            expected = model([image])[0]
        got = dict(zip(names, sess.run(None, {sess.get_inputs()[0].name: image.numpy()})))
        want_order = order(expected["boxes"].numpy(), expected["labels"].numpy(), expected["scores"].numpy())
        want = canonical(expected["boxes"].numpy(), expected["labels"].numpy(), expected["scores"].numpy())
        have_order = order(got["output_0.boxes"], got["output_0.labels"], got["output_0.scores"])
        have = canonical(got["output_0.boxes"], got["output_0.labels"], got["output_0.scores"])
        assert have.shape == want.shape, f"{size}: {len(have)} detections, eager {len(want)}"
        matched = assert_same_detections(have, want, tol)
        if "masks" in expected:
            assert got["output_0.masks"].shape == tuple(expected["masks"].shape)
            assert_same_masks(got["output_0.masks"][have_order[matched]],
                              expected["masks"].numpy()[want_order])
        found.append(have)
    return found


SIZES = [(128, 160), (160, 128), (97, 131), (200, 300)]


def test_fasterrcnn_mobilenet_dynamic_size(tmp_path):
    """One graph for every image size: exported on 128x160, equal to eager on 160x128 (the other side is the
    shorter), 97x131 (not multiples of 32: resized and padded differently) and 200x300 (resized down)."""
    model = build("fasterrcnn_mobilenet_v3_large_fpn")
    found = compare(model, export(model, tmp_path), SIZES)
    assert all(len(f) > 0 for f in found)
    assert "detection images resized with symbolic sizes" in metadata.read(str(tmp_path / "model.onnx"))[
        metadata.CAPTURE_PATCHES].splitlines()


@pytest.mark.heavy
def test_fasterrcnn_mobilenet_no_detection(tmp_path):
    model = build("fasterrcnn_mobilenet_v3_large_fpn", score_thresh=1.0)
    found = compare(model, export(model, tmp_path), SIZES[:2])
    assert all(f.shape == (0, 6) for f in found)


def test_maskrcnn_dynamic_size(tmp_path):
    """Mask R-CNN (ResNet-50 FPN): boxes, labels, scores and the masks pasted into the image, at several
    image sizes. Random weights make the ResNet's float32 values drift: eager float32 and float64 differ by
    up to 3.5e-3 (relative score, pixels), as much as onnxruntime and eager do (measured on the first image),
    hence the tolerance."""
    model = build("maskrcnn_resnet50_fpn")
    found = compare(model, export(model, tmp_path), SIZES[:3], tol=1e-2)
    assert all(len(f) > 0 for f in found)


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["retinanet_resnet50_fpn", "fcos_resnet50_fpn"])
def test_one_stage_resnet50(name, tmp_path):
    model = build(name)
    found = compare(model, export(model, tmp_path), SIZES[:3])
    assert all(len(f) > 0 for f in found)


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["retinanet_resnet50_fpn", "fcos_resnet50_fpn", "maskrcnn_resnet50_fpn"])
def test_resnet50_no_detection(name, tmp_path):
    model = build(name, score_thresh=1.0)
    found = compare(model, export(model, tmp_path), SIZES[:2])
    assert all(f.shape == (0, 6) for f in found)


def test_patches_undone():
    from torchvision.ops import boxes, poolers

    from torchvision.models.detection import transform

    def current():
        return (boxes.batched_nms, poolers._multiscale_roi_align, transform._resize_image_and_masks,
                transform.GeneralizedRCNNTransform.batch_images, transform.paste_masks_in_image)

    before = current()
    with bypass_export_some_errors(patch_torchvision=True):
        assert all(now is not then for now, then in zip(current(), before))
    assert current() == before


def test_resized_size_is_torchvisions():
    """The symbolic resize gives torchvision's size for 2000 random images and the sizes of the models."""
    from torchvision.models.detection.transform import _resize_image_and_masks

    from experimental.torch_interpreter.patches.torchvision_image_sizes import resized_size

    rng = np.random.default_rng(0)
    for _ in range(2000):
        height, width = (int(v) for v in rng.integers(32, 2000, size=2))
        low, high = [(800, 1333), (128, 160), (320, 320), (512, 700)][int(rng.integers(4))]
        image, _ = _resize_image_and_masks(torch.zeros(1, height, width), low, high)
        assert resized_size(height, width, low, high) == list(image.shape[-2:]), (height, width, low, high)


def test_batch_images_is_torchvisions():
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    from experimental.torch_interpreter.patches.torchvision_image_sizes import batch_images

    images = [torch.rand(3, 20, 47), torch.rand(3, 33, 8), torch.rand(3, 64, 64)]
    transform = GeneralizedRCNNTransform(128, 160, [0.0] * 3, [1.0] * 3)
    for group in (images[:1], images[:2], images):
        torch.testing.assert_close(batch_images(group), transform.batch_images(group), rtol=0, atol=0)


@pytest.mark.parametrize("count", [0, 1, 7])
def test_paste_masks_is_torchvisions(count):
    """All masks pasted at once against torchvision's loop: boxes inside the image (as the model clips them),
    thin boxes of one or two pixels, boxes on the image's edges; equal within float32 rounding."""
    from torchvision.models.detection.roi_heads import paste_masks_in_image as torchvisions

    from experimental.torch_interpreter.patches.torchvision_image_sizes import paste_masks_in_image

    generator = torch.Generator().manual_seed(count)
    for trial in range(40):
        height, width = (int(v) for v in torch.randint(5, 90, (2,), generator=generator))
        masks = torch.rand(count, 1, 28, 28, generator=generator)
        size = torch.tensor([width, height], dtype=torch.float32)
        a, b = torch.rand(count, 2, generator=generator) * size, torch.rand(count, 2, generator=generator) * size
        if trial % 4 == 0:
            b = a + torch.rand(count, 2, generator=generator) * 2
        boxes = torch.cat([torch.minimum(a, b), torch.maximum(a, b).clamp(max=size)], dim=1)
        if trial % 5 == 0 and count:
            boxes[0] = torch.tensor([0.0, 0.0, width, height])
        want = torchvisions(masks, boxes, (height, width))
        got = paste_masks_in_image(masks, boxes, (height, width))
        assert got.shape == want.shape == (count, 1, height, width)
        torch.testing.assert_close(got, want, rtol=0, atol=2e-6)


def test_ssd300_dynamic_size(tmp_path):
    """SSD300 VGG-16 resizes every image to 300x300 (``fixed_size``) and scales the boxes back to the image's
    size. With random weights its softmax saturates (scores of 1.0 tie and ``topk`` keeps either member): the
    classification head is scaled down so that the 200 scores differ. Eager float32 and float64 differ by up to
    1.4e-3 (a random VGG-16's drift; onnxruntime is within 6e-4 of float64), hence the tolerance."""
    torch.manual_seed(0)
    model = detection.ssd300_vgg16(weights=None, weights_backbone=None, num_classes=3, score_thresh=0.0).eval()
    with torch.no_grad():
        for parameter in model.head.classification_head.parameters():
            parameter.mul_(0.05)
    found = compare(model, export(model, tmp_path), SIZES, tol=1e-2)
    assert all(len(f) == 200 for f in found)


def test_ssd300_no_detection(tmp_path):
    """No score above the threshold: empty boxes, labels and scores at every image size (a 5-second export; the
    two-stage models' zero-detection tests are marked heavy)."""
    torch.manual_seed(0)
    model = detection.ssd300_vgg16(weights=None, weights_backbone=None, num_classes=3, score_thresh=1.0).eval()
    found = compare(model, export(model, tmp_path), SIZES[:2])
    assert all(f.shape == (0, 6) for f in found)
