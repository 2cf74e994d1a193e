"""The translation layer: an FX graph becomes an ONNX graph, node by node.

* :mod:`.interpreter`: walks the FX graph and hands each node to its converter;
* :mod:`.context`: what a converter receives (:class:`~.context.NodeContext`);
* :mod:`.builder`: the ONNX graph being built (values, nodes, initializers, unique names);
* :mod:`.registry`: the converters, one per aten overload family (``ops/`` fills it);
* :mod:`.type_rules`, :mod:`.dims`, :mod:`.complex_pairs`, :mod:`.aliasing`: types, symbolic sizes, complex
  tensors as real pairs, in-place ops and views.
"""
