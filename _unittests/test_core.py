import torch

from experimental.torch_interpreter.testing.check import check_model, op_types


def test_linear_dynamic_batch():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 3))
    onx = check_model(model, (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(7, 4),), None)])
    assert op_types(onx) == ["Gemm", "Gemm"]
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert onx.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
