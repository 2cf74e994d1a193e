"""ultralytics YOLO through ``to_onnx`` with a dynamic batch and image size: ONNX Runtime against eager on other
batches and sizes than the example's.

The models are built from ultralytics' configuration files with random weights (no download) and run once in
eager mode before the export, as a user checking the model does: the heads then hold the example's size, which
the ``ultralytics_heads`` strategy makes harmless (``patches/ultralytics_heads.py``).
"""

import numpy as np
import pytest
import torch
from torch.utils._pytree import tree_leaves

from experimental.torch_interpreter import InferenceSession, metadata, to_onnx

_NUMPY_PRINT = np.get_printoptions()
ultralytics = pytest.importorskip("ultralytics", reason="ultralytics is not installed: pip install ultralytics")
# ultralytics sets numpy's and torch's print options when imported (11-character floats, 320 columns): put them
# back, the doctests of the package compare printed arrays
np.set_printoptions(**_NUMPY_PRINT)
torch.set_printoptions(profile="default")

EXAMPLE = (2, 3, 256, 320)
OTHERS = [(1, 3, 320, 224), (3, 3, 160, 160)]


def _leaves(value) -> list[np.ndarray]:
    return [t.detach().numpy() for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def check_yolo(config: str, example: tuple = EXAMPLE) -> None:
    from ultralytics import YOLO

    torch.manual_seed(0)
    model = YOLO(config).model.eval()
    x = torch.rand(*example)
    with torch.no_grad():
        model(x)  # the heads cache the example's size
        dyn = torch.export.Dim.DYNAMIC
        onx = to_onnx(model, (x,), dynamic_shapes=({0: dyn, 2: dyn, 3: dyn},))
    props = {p.key: p.value for p in onx.metadata_props}
    assert "ultralytics_heads" in props[metadata.CAPTURE_STRATEGIES]
    assert "YOLO Detect heads make their anchors at every call" in props[metadata.CAPTURE_PATCHES].splitlines()
    sess = InferenceSession(onx)
    for shape in [example, *OTHERS, (5, 3, 160, 224)]:
        image = torch.rand(*shape)
        with torch.no_grad():
            want = _leaves(model(image))
        got = sess.run(None, {sess.get_inputs()[0].name: image.numpy()})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (shape, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(w).max())))


def test_yolo_from_a_batch_of_one():
    """A batch-1 example run once eagerly, exported with a dynamic batch, height and width: the size-oblivious
    capture and the heads' anchors made at every call give one graph right at batches 1, 3 and 5 and other sizes
    (it used to run at the example's size only)."""
    check_yolo("yolo11n.yaml", (1, 3, 256, 256))


@pytest.mark.heavy
@pytest.mark.parametrize("config", ["yolov8n.yaml", "yolov8n-pose.yaml", "yolo11n.yaml", "yolo11n-seg.yaml",
                                    "yolo11n-pose.yaml", "yolo11n-obb.yaml", "yolo26n.yaml", "yolo26n-seg.yaml"])
def test_yolo_any_batch_and_size(config):
    check_yolo(config)


def test_the_model_runs_eagerly_after_the_export():
    """The heads' cached anchors are the model's again after the capture (torch.export left fake ones)."""
    from ultralytics import YOLO

    model = YOLO("yolov8n.yaml").model.eval()
    x = torch.rand(1, 3, 128, 128)
    with torch.no_grad():
        want = model(x)[0]
        to_onnx(model, (x,))
        got = model(x)[0]
    assert type(got) is torch.Tensor
    torch.testing.assert_close(got, want)
