"""Reading constant tensors: dims, small integer contents, and which reads are tracked.

Initializer and ``Constant`` tensors are read straight from their ``TensorProto`` when
they have one (``ir.Shape`` and ``numpy()`` cost several times more); weights are never
read (only integer tensors of at most :data:`MAX_VALUE_ELEMENTS` elements).
"""

from __future__ import annotations

__all__ = [
    "CONSTANT_INPUT_KEY",
    "INTEGER_DTYPES",
    "MAX_VALUE_ELEMENTS",
    "constant_tensor",
    "int_elements",
    "note_untracked_read",
    "read_int64_proto",
    "tensor_dims",
    "untracked_reads",
]

import logging
import math
import struct
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

logger = logging.getLogger(__name__)

#: Integer tensors at most this large are read as "value as shape" (never weights).
MAX_VALUE_ELEMENTS = 1024

#: Element types whose values are tracked symbolically (bool as 0/1).
INTEGER_DTYPES = frozenset(
    {
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
        ir.DataType.BOOL,
    }
)

#: How many untracked reads so far, in a one-element list: counting in a class attribute
#: costs more than twice as much (each store there invalidates the type's caches).
_UNTRACKED_READS = [0]


def note_untracked_read() -> None:
    """Records that a hook read more than its inputs' shapes, dtypes and values.

    E.g. a tensor's contents or a producer node: the hook's result is not memoized.
    """
    _UNTRACKED_READS[0] += 1


def untracked_reads() -> int:
    """How many reads :func:`note_untracked_read` recorded so far (in this process)."""
    return _UNTRACKED_READS[0]


_PROTO_TENSOR = ir.serde.TensorProtoTensor
_INT64_CODE = int(ir.DataType.INT64)
_EXTERNAL = 1  # onnx.TensorProto.EXTERNAL (the shapes layer does not import onnx)

#: Whether the proto of a ``TensorProtoTensor`` is its ``_proto`` slot (``raw`` returns
#: it): reading the slot saves the property call on every Constant.
_PROTO_SLOT = "_proto" in getattr(_PROTO_TENSOR, "__slots__", ())


def tensor_dims(tensor: ir.TensorProtocol) -> tuple[int, ...]:
    """The dims of ``tensor``.

    Read from the proto when it has one: ``shape`` builds an ``ir.Shape`` on every access.
    """
    cls = tensor.__class__
    if cls is _PROTO_TENSOR:  # exact type: isinstance on an ABC is slow
        # A slice copies a repeated field at once: about 3x faster than iterating it.
        proto = tensor._proto if _PROTO_SLOT else tensor.raw  # type: ignore[attr-defined]
        return tuple(proto.dims[:])
    if cls is _IR_TENSOR and _IR_TENSOR_SLOTS:
        dims = _ir_tensor_dims(tensor)
        if dims is not None:
            return dims
    return tuple(int(d) for d in tensor.shape)


_IR_TENSOR = ir.Tensor
_INTEGER_DTYPE_IDS = frozenset(map(id, INTEGER_DTYPES))
_NDARRAY = np.ndarray
#: Whether ``ir.Tensor`` keeps its dtype, array and (frozen) shape in these slots and the
#: shape its dims in ``_dims`` (the properties return them): an in-memory model's
#: constants (an export, a rewrite's folded constant) are read from them
#: (tests/engine/test_tensor_reads_ir.py checks it).
_IR_TENSOR_SLOTS = {"_dtype", "_raw", "_shape"} <= {
    name for base in ir.Tensor.__mro__ for name in getattr(base, "__slots__", ())
} and "_dims" in getattr(ir.Shape, "__slots__", ())


def _ir_tensor_dims(tensor: ir.Tensor) -> tuple[int, ...] | None:
    """The dims of an ``ir.Tensor`` from its shape's slot; ``None`` unless all are ints."""
    dims = tensor._shape._dims  # type: ignore[attr-defined]
    for d in dims:
        if d.__class__ is not int:
            return None  # (read the generic way: a symbolic dim is no size)
    return tuple(dims)


def _ir_tensor_elements(tensor: ir.Tensor) -> tuple[int, ...] | bool | None:
    """:func:`int_elements` of an ``ir.Tensor`` over a numpy array, read directly.

    What the generic read gives (``numpy()`` is the array itself), without the
    properties, the ``Shape`` iteration and a generator: 3-4x cheaper. ``False`` for
    anything else (read it the generic way).
    """
    # By identity (the members are singletons): a DataType hashes by a Python method
    # (Enum.__hash__), and the int of it is a call of int.
    dtype = tensor._dtype  # type: ignore[attr-defined]
    if id(dtype) not in _INTEGER_DTYPE_IDS:
        return None if dtype.__class__ is ir.DataType else False
    raw = tensor._raw  # type: ignore[attr-defined]
    if raw.__class__ is not _NDARRAY:
        return False  # e.g. a torch tensor or a DLPack object
    dims = _ir_tensor_dims(tensor)
    if dims is None:
        return False
    if math.prod(dims) > MAX_VALUE_ELEMENTS:
        return None
    # A vector (the usual shape operand) needs no reshaping. tolist gives Python ints
    # for an integer array (int() of each, as the generic read does, would cost more
    # than the rest of the read); another (a bool array) has each made an int.
    flat = raw.tolist() if raw.ndim == 1 else raw.reshape(-1).tolist()
    if raw.dtype.kind in "iu":
        return tuple(flat)
    return tuple(map(int, flat))


#: Element count -> the compiled unpacking of that many little-endian int64 (the byte
#: order ONNX stores): compiling the format on every read costs more than the read.
_INT64_UNPACKERS: dict[int, Callable[[bytes], tuple[int, ...]]] = {}


def _int64_unpacker(count: int) -> Callable[[bytes], tuple[int, ...]]:
    unpack = _INT64_UNPACKERS.get(count)
    if unpack is None:  # count <= MAX_VALUE_ELEMENTS: the table stays small
        unpack = _INT64_UNPACKERS[count] = struct.Struct(f"<{count}q").unpack
    return unpack


#: ``(dims, raw_data)`` -> what :func:`read_int64_proto` read from them. Exports repeat a
#: few literals thousands of times (a 17-layer TorchScript decoder: 3.6k int64 Constants,
#: 17 distinct byte strings), so the checks and the unpacking are done once per literal.
#: The result is a pair of tuples: sharing it between tensors is safe.
_INT64_READS: dict[tuple[tuple[int, ...], bytes], tuple[tuple[int, ...], tuple[int, ...]]] = {}
_INT64_READS_MAX = 4096
#: Only short literals are kept (a few shape or index elements), so the table stays small.
_INT64_READS_BYTES = 64


#: Serialized int64 ``TensorProto`` -> what :func:`read_int64_proto` read from it (``None``
#: included). The serialization holds every field, so the read is a function of it; an
#: export's literals repeat (a TorchScript decoder: 3.6k int64 Constants, 22 distinct),
#: and one serialization costs less than reading the fields (``dims`` alone costs about as
#: much: upb builds a container for it). A named message (an initializer) is kept too: its
#: name never repeats within a model, but every run over the model reads it again.
_SERIALIZED_READS: dict[bytes, tuple[tuple[int, ...], tuple[int, ...] | None] | None] = {}
#: Emptied when full (the entries are pure functions of their keys): names of earlier
#: models must not keep the literals of later ones out.
_SERIALIZED_MAX = 4096
#: Only short messages are kept or looked up (a few shape or index elements): a longer
#: one is read from its fields, without hashing its bytes.
_SERIALIZED_BYTES = 128


def read_int64_proto(
    tensor: ir.TensorProtocol,
) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """``(dims, elements)`` of an int64 ``TensorProto``-backed tensor, read directly.

    ``elements`` is ``None`` past :data:`MAX_VALUE_ELEMENTS`. Exported models carry
    hundreds of such constants (shape arithmetic); going through ``shape``, ``dtype``
    and ``numpy()`` costs several times more. ``None`` for any other tensor (read it
    the generic way).
    """
    if type(tensor) is not _PROTO_TENSOR:
        return None
    proto = tensor._proto if _PROTO_SLOT else tensor.raw  # type: ignore[attr-defined]
    # Each field read of a upb message costs about a tenth of the whole read (a lookup of
    # the field by name): the type is the only one read before the serialization.
    if proto.data_type != _INT64_CODE:
        return None
    # _read_int64_message, inline (every Constant of an export: a call is ~8 % of it).
    # The method from the class: an attribute of the message is looked up among its
    # fields first (upb), then bound: about 8 % of the read (3.6k Constants in ts17).
    data = type(proto).SerializeToString(proto)
    if len(data) > _SERIALIZED_BYTES:
        return _read_int64_fields(proto)
    read = _SERIALIZED_READS.get(data, _ABSENT)
    if read is _ABSENT:
        read = _read_int64_fields(proto)
        if len(_SERIALIZED_READS) >= _SERIALIZED_MAX:
            _SERIALIZED_READS.clear()
        _SERIALIZED_READS[data] = read
    return read  # type: ignore[return-value]


def _read_int64_message(
    proto: object,
) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """:func:`read_int64_proto` of an int64 ``TensorProto``: by its bytes when short."""
    data = type(proto).SerializeToString(proto)
    if len(data) > _SERIALIZED_BYTES:
        return _read_int64_fields(proto)
    read = _SERIALIZED_READS.get(data, _ABSENT)
    if read is _ABSENT:
        read = _read_int64_fields(proto)
        if len(_SERIALIZED_READS) >= _SERIALIZED_MAX:
            _SERIALIZED_READS.clear()
        _SERIALIZED_READS[data] = read
    return read  # type: ignore[return-value]


_ABSENT = object()


def _read_int64_fields(proto: object) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """:func:`read_int64_proto` of an int64 ``TensorProto``, from its fields."""
    if proto.data_location == _EXTERNAL:  # type: ignore[attr-defined]
        return None
    # Most such constants are scalars: an empty field is not copied. Otherwise a slice,
    # about 3x faster than iterating the field (each read of a field costs: read once).
    field = proto.dims  # type: ignore[attr-defined]
    dims = tuple(field[:]) if field else ()
    raw = proto.raw_data  # type: ignore[attr-defined]  # b"" when unset (or set empty)
    # Only short byte strings are kept: a longer one is not hashed for the lookup.
    if raw and len(raw) <= _INT64_READS_BYTES:
        read = _INT64_READS.get((dims, raw))
        if read is not None:
            return read
    count = math.prod(dims)
    if count > MAX_VALUE_ELEMENTS:
        return dims, None
    if raw or proto.HasField("raw_data"):  # type: ignore[attr-defined]
        if len(raw) != 8 * count:
            return None
        read = dims, _int64_unpacker(count)(raw)
        if raw and len(raw) <= _INT64_READS_BYTES and len(_INT64_READS) < _INT64_READS_MAX:
            _INT64_READS[dims, raw] = read
        return read
    elements = tuple(proto.int64_data[:])  # type: ignore[attr-defined]
    if len(elements) != count:
        return None
    return dims, elements


_INT32_CODE = int(ir.DataType.INT32)
_BOOL_CODE = int(ir.DataType.BOOL)


def _read_int32_or_bool_proto(tensor: ir.TensorProtocol) -> tuple[int, ...] | None:
    """The elements of a small int32 or bool ``TensorProto``-backed tensor, read directly.

    What ``numpy()`` gives for them (a bool as 0 or 1), without numpy: a loop's ``cond``
    constant or an int32 size costs about 10x less (numpy's conversion of a fresh tensor
    costs 10-30 us). ``None`` for anything else, or anything unusual (a length that does
    not match the dims, a bool stored as another number): read it the generic way.
    """
    if type(tensor) is not _PROTO_TENSOR:
        return None
    proto = tensor._proto if _PROTO_SLOT else tensor.raw  # type: ignore[attr-defined]
    code = proto.data_type
    if (code != _INT32_CODE and code != _BOOL_CODE) or proto.data_location == _EXTERNAL:
        return None
    field = proto.dims
    count = math.prod(field[:]) if field else 1
    if count > MAX_VALUE_ELEMENTS:
        return None
    if proto.HasField("raw_data"):
        raw = proto.raw_data
        if code == _INT32_CODE:
            if len(raw) != 4 * count:
                return None
            return struct.unpack(f"<{count}i", raw)
        elements = tuple(raw)  # one byte per bool
    else:
        elements = tuple(proto.int32_data[:])
        if not elements:
            return None  # maybe stored in another field (invalid, but numpy reads it)
        if code == _INT32_CODE:
            return elements if len(elements) == count else None
    if len(elements) != count or any(e != 0 and e != 1 for e in elements):
        return None
    return elements


def int_elements(tensor: ir.TensorProtocol) -> tuple[int, ...] | None:
    """The elements of a small integer tensor, flattened; ``None`` for any other tensor.

    Never reads more than :data:`MAX_VALUE_ELEMENTS` elements (weights stay unread).
    """
    if type(tensor) is _PROTO_TENSOR:
        # A float weight (the usual non-integer constant asked for its elements): its
        # element type's code says None at once, where the readers below would each
        # fetch the proto's fields and the generic test build a DataType.
        proto = tensor._proto if _PROTO_SLOT else tensor.raw  # type: ignore[attr-defined]
        code = proto.data_type
        if code in _NON_INTEGER_CODES:
            return None
        if code == _INT64_CODE:  # read_int64_proto without reading the type again
            read = _read_int64_message(proto)
            if read is not None:
                return read[1]
    elif tensor.__class__ is _IR_TENSOR and _IR_TENSOR_SLOTS:
        read = _ir_tensor_elements(tensor)
        if read is not False:
            return read  # type: ignore[return-value]
    # (read_int64_proto reads nothing from another class of tensor.)
    elements = _read_int32_or_bool_proto(tensor)
    if elements is not None:
        return elements
    # The product of the dims is the size (tensor.size builds an array first).
    if (
        tensor.dtype not in INTEGER_DTYPES
        or math.prod(tensor_dims(tensor)) > MAX_VALUE_ELEMENTS
    ):
        return None
    return tuple(int(x) for x in tensor.numpy().reshape(-1).tolist())


#: The codes of the element types not in :data:`INTEGER_DTYPES` (``UNDEFINED`` too): a
#: tensor of one has no integer elements (:func:`int_elements`). An unknown code is not
#: here (its ``DataType`` fails: the generic read reports it).
_NON_INTEGER_CODES = frozenset(int(t) for t in ir.DataType if t not in INTEGER_DTYPES)


#: ``Value.meta`` key marking a graph input whose initializer is a constant (set by the
#: inference pass for the run: IR < 4 models, or ``constant_initializers=True``).
CONSTANT_INPUT_KEY = "onnx_symdims.constant_input"


def constant_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    """The constant tensor of ``value``, or None; never the default of a graph input.

    An initializer that is also a graph input can be overridden by a feed at run time,
    so its contents and shape are not facts about the model, unless the inference pass
    marked it constant (:data:`CONSTANT_INPUT_KEY`): in IR < 4 every initializer is
    listed as an input, and those are weights.
    """
    _UNTRACKED_READS[0] += 1
    if _VALUE_SLOTS:
        # The slots behind const_value and is_graph_input() (two Python calls), the
        # constant first: most values asked have none.
        tensor = value._const_value
        if tensor is None:
            return None
        if value._is_graph_input and not value.meta.get(CONSTANT_INPUT_KEY):
            return None
        return tensor
    if value.is_graph_input() and not value.meta.get(CONSTANT_INPUT_KEY):
        return None
    return value.const_value


#: Whether ``ir.Value`` keeps ``const_value`` and ``is_graph_input()`` in these slots (the
#: property and the method return them; tests/engine/test_tensor_reads.py checks it).
_VALUE_SLOTS = {"_const_value", "_is_graph_input"} <= {
    name for base in ir.Value.__mro__ for name in getattr(base, "__slots__", ())
}
