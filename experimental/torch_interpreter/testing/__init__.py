"""What the tests and the benchmarks share, importable by both without touching ``sys.path``.

* :mod:`.check`: export a model with ``to_onnx``, check the ONNX model, compare onnxruntime with eager PyTorch
  (``check_model``, ``check_dynamic``), and the small model builders the tests use (``Fn``, ``rand``);
* :mod:`.aot`: the forward and backward graphs AOTAutograd makes of a function (what the ``torch.compile``
  backend receives), with the inputs each got;
* :mod:`.llm_models`: tiny random-weight transformers models with a cache, and their inputs;
* :mod:`.random_programs` (with its op templates, :mod:`.program_templates`), :mod:`.program_runs` and
  :mod:`.random_training`: the fuzzers' random programs, exported or trained, against eager PyTorch;
* :mod:`.opinfo_sweep` and :mod:`.opinfo_expected_failures`: PyTorch's OpInfo samples converted and compared, and
  the failures expected of them.

Nothing in the rest of the package imports this folder.
"""
