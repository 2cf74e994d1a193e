"""torchvision's detection models through ``to_onnx`` under ``bypass_export_some_errors(patch_torchvision=True)``
(``patches/torchvision_detection.py``): ONNX Runtime against eager torchvision, unpatched, on images of two sizes
and with no detection at all.

Random weights give near-equal scores and ``nms`` then keeps boxes by the order of ties: the models are built
with 3 classes (scores about 1/3 apart from each other) and the detections compared as sets (sorted by score,
label and box). The image size is static (see ``_doc/patches.rst``): each size is exported on its own.
"""

import time

import numpy as np
import pytest
import torch

from experimental.torch_interpreter import InferenceSession, bypass_export_some_errors, to_onnx

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


def canonical(boxes: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The detections as rows ``score, label, x1, y1, x2, y2`` sorted, so that two sets compare row by row."""
    rows = np.concatenate([np.asarray(scores, np.float64)[:, None], np.asarray(labels, np.float64)[:, None],
                           np.asarray(boxes, np.float64).reshape(-1, 4)], axis=1)
    return rows[np.lexsort(rows.T[::-1])]


def assert_same_detections(have: np.ndarray, want: np.ndarray, tol: float = 1e-4) -> None:
    """Every row of ``want`` matches one row of ``have`` (each used once) within ``tol`` (relative to the
    value): rows of scores equal to a few ulps may come in either order."""
    free = np.ones(len(have), dtype=bool)
    for row in want:
        close = free & np.all(np.abs(have - row) <= tol * (1 + np.abs(row)), axis=1)
        assert close.any(), f"no ONNX detection matches eager's {row.tolist()}"
        free[np.argmax(close)] = False


def export_and_compare(model: torch.nn.Module, size: tuple[int, int], tmp_path, seeds=(1, 2)) -> list[np.ndarray]:
    """Exports the model on a ``3 x size`` image, runs it on images of ``seeds`` and checks each against eager;
    returns the detections."""
    example = torch.rand(3, *size, generator=torch.Generator().manual_seed(0))
    path = str(tmp_path / "model.onnx")
    begin = time.perf_counter()
    with bypass_export_some_errors(patch_torchvision=True):
        to_onnx(model, ([example],), filename=path)
    print(f"export {type(model).__name__} {size}: {time.perf_counter() - begin:.1f} s")
    sess = InferenceSession(path)
    names = [o.name for o in sess.get_outputs()]
    assert sorted(names) == ["output_0.boxes", "output_0.labels", "output_0.scores"]
    found = []
    for seed in seeds:
        image = torch.rand(3, *size, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            expected = model([image])[0]
        got = dict(zip(names, sess.run(None, {sess.get_inputs()[0].name: image.numpy()})))
        want = canonical(expected["boxes"].numpy(), expected["labels"].numpy(), expected["scores"].numpy())
        have = canonical(got["output_0.boxes"], got["output_0.labels"], got["output_0.scores"])
        assert have.shape == want.shape
        assert_same_detections(have, want)
        found.append(have)
    return found


@pytest.mark.parametrize("size", [(128, 160), (160, 128)])
def test_fasterrcnn_mobilenet(size, tmp_path):
    found = export_and_compare(build("fasterrcnn_mobilenet_v3_large_fpn"), size, tmp_path)
    assert all(len(f) > 0 for f in found)


def test_fasterrcnn_mobilenet_no_detection(tmp_path):
    found = export_and_compare(build("fasterrcnn_mobilenet_v3_large_fpn", score_thresh=1.0), (128, 160), tmp_path)
    assert all(f.shape == (0, 6) for f in found)


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["retinanet_resnet50_fpn", "fcos_resnet50_fpn"])
@pytest.mark.parametrize("size", [(128, 160), (160, 128)])
def test_one_stage_resnet50(name, size, tmp_path):
    found = export_and_compare(build(name), size, tmp_path)
    assert all(len(f) > 0 for f in found)


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["retinanet_resnet50_fpn", "fcos_resnet50_fpn"])
def test_one_stage_resnet50_no_detection(name, tmp_path):
    found = export_and_compare(build(name, score_thresh=1.0), (128, 160), tmp_path)
    assert all(f.shape == (0, 6) for f in found)


def test_patches_undone():
    from torchvision.ops import boxes, poolers

    before = boxes.batched_nms, poolers._multiscale_roi_align
    with bypass_export_some_errors(patch_torchvision=True):
        assert boxes.batched_nms is not before[0] and poolers._multiscale_roi_align is not before[1]
    assert (boxes.batched_nms, poolers._multiscale_roi_align) == before
