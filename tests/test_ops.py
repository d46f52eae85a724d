"""The op table (tfcompat/ops): what each record says is TF's is read from TF here (its op
definitions, kernel registry, raw ops and gradient functions), and every layer that reads a
record finds its op (the registry, the API, the C entry's codes, each front)."""
import inspect

import numpy as np
import pytest

import tfcompat
from tfcompat import registry
from tfcompat.ops import OPS, RESIZES, SHAPE, VALUE
from helpers import tf_or_skip

TF_OPS = [name for name, op in OPS.items() if op.origin == "tensorflow"]


def _tf_types(tf, name):
    """TF's type attribute T of op ``name``: its op definition's list, of those it registers
    CPU kernels for."""
    from tensorflow.python.framework import kernels, op_def_registry
    allowed = {tf.as_dtype(t).name
               for a in op_def_registry.get(name).attr if a.name == "T"
               for t in a.allowed_values.list.type}
    cpu = {tf.as_dtype(t).name for k in kernels.get_registered_kernels_for_op(name).kernel
           if k.device_type == "CPU" for c in k.constraint if c.name == "T"
           for t in c.allowed_values.list.type}
    return allowed & cpu


@pytest.mark.parametrize("name", TF_OPS)
def test_each_tf_op_s_types_are_tf_s(name):
    tf = tf_or_skip()
    op = OPS[name]
    assert {d.name for d in op.tf_types} == _tf_types(tf, name)
    # the input whose dtype is T takes every one of them, but the conv's int32
    missing = set(op.tf_types) - set(op.dtypes(op.tf_type_input))
    assert {d.name for d in missing} == ({"int32"} if name == "Conv2DBackpropInput" else set())


@pytest.mark.parametrize("name", TF_OPS)
def test_each_tf_op_s_argument_names_are_tf_s(name):
    """Every input's and attribute's own name is an argument of ``tf.raw_ops.<name>`` (but an
    extension's), and the functional API's function takes the inputs under those names."""
    tf = tf_or_skip()
    op = OPS[name]
    args = set(inspect.signature(getattr(tf.raw_ops, name)).parameters)
    for x in op.inputs + tuple(a for a in op.attrs if not a.extension):
        assert x.name in args, (name, x.key, x.name)
    api = inspect.signature(getattr(tfcompat, op.api)).parameters
    for x in op.inputs:
        assert x.name in api, (op.api, x.name)


def _call(tf, name, dtype):
    """A tiny valid call of TF's raw op and the same call's registry inputs and attrs."""
    t = tf.as_dtype(dtype)
    img = np.arange(2 * 3 * 5 * 2).reshape(2, 3, 5, 2).astype(dtype)
    if name in ("ResizeBilinear", "ResizeNearestNeighbor"):
        return (getattr(tf.raw_ops, name)(images=img, size=[4, 7]),
                {"images": img}, {"size": [4, 7]})
    if name == "ResizeBilinearGrad":
        dy = np.ones((2, 4, 7, 2), np.float32)
        return (tf.raw_ops.ResizeBilinearGrad(grads=dy, original_image=tf.constant(img, t)),
                {"dy": dy, "images": img}, {})
    if name == "ResizeNearestNeighborGrad":
        dy = np.ones((2, 4, 7, 2), dtype)
        return (tf.raw_ops.ResizeNearestNeighborGrad(grads=tf.constant(dy, t), size=[3, 5]),
                {"dy": dy, "images": img}, {})
    dy, w = np.ones((2, 2, 4, 3), dtype), np.ones((2, 2, 2, 3), dtype)
    return (tf.raw_ops.Conv2DBackpropInput(input_sizes=[2, 3, 5, 2], filter=tf.constant(w, t),
                                           out_backprop=tf.constant(dy, t),
                                           strides=[1, 1, 1, 1], padding="VALID"),
            {"dy": dy, "filter": w}, {"inputShape": [2, 3, 5, 2]})


@pytest.mark.parametrize("name", TF_OPS)
def test_each_tf_op_s_output_dtype_and_shape_are_tf_s(name):
    """The record's output dtype rule and shape function give what TF's op returns, in every
    dtype tfcompat covers; the cython backend's result has them too."""
    tf = tf_or_skip()
    op = OPS[name]
    for dtype in op.tf_covered:
        want, inputs, attrs = _call(tf, name, dtype)
        dtypes = {k: np.asarray(v).dtype for k, v in inputs.items()}
        shapes = {k: np.shape(v) for k, v in inputs.items()}
        assert op.output_dtype(dtypes).name == want.dtype.name, (name, dtype)
        assert op.shape(shapes, attrs) == tuple(want.shape), (name, dtype)
        got = registry.get_kernel(name, "cython").kernel_func(inputs, attrs)
        assert (got.dtype.name, got.shape) == (want.dtype.name, tuple(want.shape))


@pytest.mark.parametrize("name", [n for n in TF_OPS if OPS[n].grad_of])
def test_each_gradient_pairing_is_tf_s(name):
    """TF differentiates the record's ``grad_of`` op, with respect to ``wrt``, by this op: a
    traced GradientTape's graph runs it."""
    tf = tf_or_skip()
    op = OPS[name]
    x = tf.ones([1, 3, 5, 2])
    forward = {"ResizeBilinear": lambda x: tf.raw_ops.ResizeBilinear(images=x, size=[4, 7]),
               "ResizeNearestNeighbor":
                   lambda x: tf.raw_ops.ResizeNearestNeighbor(images=x, size=[4, 7]),
               "Conv2D": lambda x: tf.raw_ops.Conv2D(input=x, filter=tf.ones([2, 2, 2, 3]),
                                                     strides=[1, 1, 1, 1], padding="VALID")}
    raw_args = inspect.signature(getattr(tf.raw_ops, op.grad_of)).parameters
    assert op.wrt in raw_args or op.wrt == "images", (op.grad_of, op.wrt)

    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = forward[op.grad_of](x)
        return tape.gradient(y, x)

    ops = {o.type for o in grad.get_concrete_function(x).graph.get_operations()}
    assert name in ops, (op.grad_of, sorted(ops))


def test_roles_and_lists_made_of_the_table():
    """The registry's parameter inputs are the records' value inputs; a gradient's shape-only
    input is the one its output's shape comes from."""
    assert tfcompat.kernel_names.PARAMETER_INPUTS == {
        "InterpolateBackward": ("sizes",), "ResizeGrad": ("roi", "scales")}
    for name, op in OPS.items():
        shape_only = [i.key for i in op.inputs if i.role == SHAPE]
        if op.grad_of and name != "Conv2DBackpropInput":
            assert len(shape_only) == 1, name
            shapes = {i.key: (1, 2, 3, 4) if i.role == SHAPE else (9, 9, 9, 9)
                      for i in op.inputs if i.role != VALUE}
            assert op.shape(shapes, {}) == (1, 2, 3, 4), name
    assert RESIZES == {"bilinear": ("ResizeBilinear", "ResizeBilinearGrad"),
                       "nearest": ("ResizeNearestNeighbor", "ResizeNearestNeighborGrad")}


@pytest.mark.parametrize("name", list(OPS))
def test_each_record_reaches_the_registry_and_the_api(name):
    op = OPS[name]
    for backend in ("cython", "numpy"):
        assert registry.get_kernel(name, backend).kernel_name == name
    assert callable(getattr(tfcompat, op.api))


def test_each_record_s_code_round_trips():
    """Every op a compiled front runs (tf, jax) has its code from capi.h, and the code names
    it back; no code is left without a record."""
    from tfcompat import _capi
    compiled = {name for name, op in OPS.items() if {"tf", "jax"} & set(op.fronts)}
    assert set(_capi.CODES) == compiled
    for name in compiled:
        assert _capi.NAMES[_capi.CODES[name]] == name


def test_each_record_s_torch_operator_is_defined():
    """Each record with a torch front has its operator, with the pairing's autograd: the
    forward's gradient runs its gradient record's operator."""
    torch = pytest.importorskip("torch")
    import tfcompat.torch as tt
    for method, (forward, grad) in RESIZES.items():
        f_op = getattr(torch.ops.tfcompat, OPS[forward].fronts["torch"]).default
        b_op = getattr(torch.ops.tfcompat, OPS[grad].fronts["torch"]).default
        assert tt._OPS[method] == (f_op, b_op)
        x = torch.ones(1, 1, 2, 2, requires_grad=True)
        y = f_op(x, [3, 3], False, True)
        (g,) = torch.autograd.grad(y.sum(), x)
        want = b_op(torch.ones(1, 1, 3, 3), [2, 2], False, True)
        assert torch.equal(g, want), method


@pytest.mark.parametrize("name", [n for n in TF_OPS if OPS[n].c_args])
def test_each_record_s_c_entry_arguments_are_tf_s(name):
    """The C entry's arguments of a record are TF's inputs in TF's order, every input TF's
    CPU kernels read in host memory a values argument (and each values argument of a fixed
    int32 or float type); its attributes are TF's, each of the kind TF's op definition gives
    it (a choice with exactly TF's allowed strings)."""
    tf = tf_or_skip()
    from tensorflow.python.framework import kernels, op_def_registry
    op = OPS[name]
    op_def = op_def_registry.get(name)
    assert [a for a, _ in op.c_args] == [i.name for i in op_def.input_arg]
    host = {h for k in kernels.get_registered_kernels_for_op(name).kernel
            if k.device_type == "CPU" and k.priority == 0 for h in k.host_memory_arg}
    types = {i.name: tf.as_dtype(i.type).name if i.type else None for i in op_def.input_arg}
    for arg, kind in op.c_args:
        assert kind == "values" or arg not in host, (arg, kind)
        assert kind != "values" or types[arg] in ("int32", "float32"), (arg, types[arg])
    tf_attrs = {a.name: a for a in op_def.attr}
    want = {"bool": "bool", "int": "int", "float": "float", "ints": "list(int)",
            "choice": "string"}
    for attr, kind, *choices in op.c_attrs:
        assert tf_attrs[attr].type == want[kind], (attr, kind)
        if kind == "choice":
            assert tuple(tf_attrs[attr].allowed_values.list.s) == tuple(
                c.encode() for c in choices[0]), attr


def test_a_signature_s_values_round_trip():
    """tfcompat._capi.encode's values decode back (decode, the C entry's Python side), lists
    kept to their first TFC_MAX_LIST elements with their length, floats as their double's
    bits; a count that is not the record's is refused."""
    import numpy as np
    from tfcompat import _capi
    from tfcompat._simd import kernels
    conv = OPS["Conv2DBackpropInput"]
    attrs = {"strides": (1, 2, 2, 1), "padding": "EXPLICIT",
             "explicit_paddings": tuple(range(20)), "data_format": "NCHW",
             "dilations": (1, 1, 1, 1)}
    values = _capi.encode(conv, {"input_sizes": (2, 3, 9, 8)}, attrs)
    args = [(kernels.ARG_KINDS["values"], np.dtype(np.int32), (4,), ()),
            (kernels.ARG_KINDS["tensor"], np.dtype(np.float32), (3, 3, 3, 4), ()),
            (kernels.ARG_KINDS["tensor"], np.dtype(np.float32), (2, 4, 5, 4), ())]
    got, back = _capi.decode(conv, args, values, len(values))
    assert got == {"input_sizes": (2, 3, 9, 8)}
    assert back == dict(attrs, explicit_paddings=tuple(range(kernels.MAX_LIST)))
    assert values[4 + 5 + 1] == 20     # explicit_paddings' length, kept whole
    with pytest.raises(ValueError, match="got 3 values"):
        _capi.decode(OPS["ResizeBilinearGrad"], args[1:], [0, 1, 1], 3)
    assert _capi._value(0.1) == int(np.array(0.1).view(np.int64))
