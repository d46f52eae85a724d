"""What a record of the op table says (tfcompat/ops/table.py): an op's names in each
framework, its inputs and their roles, its attributes, dtypes, output, shape and gradient
pairing (docs/architecture.md#the-op-table)."""
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

# An input's role: what of it the kernel reads.
DATA = "data"      # its values, in the run
SHAPE = "shape"    # its shape and dtype only (a gradient's original input)
VALUE = "value"    # its values, before the run: they decide the plan (sizes, scales)


@dataclass(frozen=True)
class Input:
    key: str                 # the registry's key (tfjs's, or the peer framework's)
    name: str                # the op's own argument name (TF's), used in its errors
    role: str                # DATA, SHAPE or VALUE
    dtypes: tuple = ()       # the dtypes tfcompat takes; () for "as another input" (same_as)
    same_as: Optional[str] = None   # the key of the input whose dtype this one must have

    def __post_init__(self):
        if self.role not in (DATA, SHAPE, VALUE):
            raise ValueError(f"role: got {self.role!r}; expected DATA, SHAPE or VALUE")


@dataclass(frozen=True)
class Attr:
    key: str                 # the registry's key
    name: str                # the op's own name (TF's), used in its errors
    default: Any = None      # None: required, or "absent" where the op says so
    choices: tuple = ()      # the values a string attribute takes (case as given)
    tf_input: bool = False   # TF passes it as a host-memory input tensor, not an attribute
    extension: bool = False  # not the op's own (TF's): tfjs's, which tfcompat also takes


@dataclass(frozen=True)
class Op:
    """One kernel: what every layer of tfcompat knows of it, stated once."""
    name: str                # the registry's name (tf.raw_ops's for TF's ops)
    origin: str              # whose op it is: "tensorflow", "onednn" or "onnxruntime"
    inputs: tuple            # Input records, in the registry's order
    attrs: tuple = ()        # Attr records
    out_dtype: Any = None    # a fixed dtype, or the key of the input whose dtype it has
    shape: Optional[Callable] = None    # (input shapes by key, attrs) -> output shape
    grad_of: Optional[str] = None       # the forward op this is the gradient of
    wrt: Optional[str] = None           # ... with respect to that op's input of this name
    tf_types: tuple = ()     # TF's CPU kernels' type attribute T (op def ∩ CPU kernels)
    tf_type_input: Optional[str] = None     # the input whose dtype is T
    fronts: dict = field(default_factory=dict)   # front -> the name it exposes the op under
    api: Optional[str] = None   # the functional API's function (tfcompat.<api>)
    method: Optional[str] = None    # a TF resize's method ("bilinear", "nearest")
    # the C entry's (TF's) arguments, in TF's order: (name, "tensor" | "shape" | "values"),
    # and attributes, whose values follow the values arguments': (TF's name, "bool" | "int" |
    # "float" | "ints" | "choice"[, the strings a choice takes]); () for an op the C entry
    # does not plan
    c_args: tuple = ()
    c_attrs: tuple = ()

    def input(self, key):
        for i in self.inputs:
            if i.key == key:
                return i
        raise KeyError(f"{self.name} has no input {key!r}")

    def attr(self, key):
        for a in self.attrs:
            if a.key == key:
                return a
        raise KeyError(f"{self.name} has no attribute {key!r}")

    @property
    def attr_keys(self):
        return tuple(a.key for a in self.attrs)

    @property
    def value_inputs(self):
        """The inputs whose values a plan depends on (they belong to a call's cache key)."""
        return tuple(i.key for i in self.inputs if i.role == VALUE)

    @property
    def renames(self):
        """{registry key: the op's own name} where they differ (the API's error messages)."""
        return {x.key: x.name for x in self.inputs + self.attrs if x.key != x.name}

    def output_dtype(self, dtypes):
        """The output's dtype, given the inputs' {key: dtype}."""
        if isinstance(self.out_dtype, str):
            return dtypes[self.out_dtype]
        return self.out_dtype

    @property
    def tf_covered(self):
        """TF's types T that tfcompat computes, in the order of its dtype list."""
        return tuple(d for d in self.dtypes(self.tf_type_input) if d in self.tf_types)

    def dtypes(self, key):
        """The dtypes tfcompat takes for input ``key``."""
        i = self.input(key)
        return self.input(i.same_as).dtypes if i.same_as else i.dtypes
