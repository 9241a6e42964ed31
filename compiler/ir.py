"""SAM-IR ("sam-ir/1"): one functional graph for a whole training step, as plain JSON.

The graph maps (params, buffers, optimizer state, step number, inputs, targets) to
(loss, new params, new optimizer state, new buffers). It is traced with make_fx and decomposed to
the op set in `compiler.ops.SUPPORTED_OPS`.

```
{"format": "sam-ir/1",
 "inputs":  [{"name": "p0", "role": ROLE, "shape": [..], "dtype": DTYPE, "source_name": "fc1.weight"}],
 "nodes":   [{"name": "n5", "target": "aten.addmm.default", "args": [...], "kwargs": {...},
              "shape": [..], "dtype": "float32",            # a tensor output, or for tuple outputs
              "shapes": [[..], ..], "dtypes": [..],          # one entry per tuple element
              "kernel": "k3" | null, "source": "model.py:12 in forward" | null}],
 "outputs": [{"role": "loss"|"param"|"opt_state"|"buffer"|"grad_acc"|"metric", "ref": "n40",
              "name": "fc1.weight"}]}
```

Roles of inputs, in this order in `inputs`:
- `param`: a trainable parameter (source_name "fc1.weight"); a tied parameter appears once.
- `buffer`: a module buffer (source_name "bn.running_mean").
- `opt_state`: optimizer state (source_name "fc1.weight.exp_avg", ".exp_avg_sq", ".max_exp_avg_sq",
  ".momentum_buffer"); initial value zeros. SGD's first-step rule (buffer = grad) is in the graph.
  With loss scaling, three float32 scalars follow: `_amp.scale`, `_amp.growth_tracker` and
  `_amp.updates` (updates applied; skipped steps do not count).
- `grad_acc` (micro-batching only): a gradient accumulator per param ("fc1.weight.grad_acc"),
  then `micro`: float32 scalar, the 0-based micro-batch index; the update applies at the last.
- `step`: float32 scalar (shape []) = the 0-based index of this training step, i.e. the number of
  optimizer updates already applied. The runtime passes k at step k (absolute k after a resume).
- `input`, `target`: the batch from `compiler.data.iter_batches`.
- `constant` (extension): a tensor constant captured from the model code; value in init.npz.
Initial values of every param/buffer/opt_state/grad_acc/constant input are in init.npz.
Outputs with role `metric` (GradScaler's `found_inf`, 1.0 when the step skipped its update) are
read by the runtime and never fed back.

Arg encoding: `{"ref": "n3"}` names a node or an input; tuple outputs are read through nodes with
`"target": "getitem"` and args `[{"ref": "n7"}, 0]`; scalars and lists are plain JSON (lists may
nest refs); torch enums are `{"dtype": "float32"}`, `{"device": "cpu"}`, `{"layout": "strided"}`,
`{"memory_format": "contiguous_format"}`; None is null; non-finite floats are `{"float": "inf"}`,
`{"float": "-inf"}`, `{"float": "nan"}`. Output refs may name an input directly (an unchanged
buffer, or a parameter that gets no gradient).

Losses (train.loss): `cross_entropy` flattens outputs [.., C] to [N, C] and targets to [N];
`mse` reshapes targets to the output's shape; `model` takes forward(inputs, targets) as the loss.
Dropout with p > 0 appears as a mask `aten.bernoulli.p` (keep probability 1 - p) times the input
times 1/(1 - p) (so losses with dropout cannot match eager bit for bit); p = 0 leaves no op.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.ir import IrGraph, IrNode
    from sam_domain.json_value import JsonValue


FORMAT = "sam-ir/1"
# grad_acc/micro: gradient accumulators and the micro-batch index of a micro-batched step;
# metric: a per-step value the runtime reads but never feeds back (GradScaler's found_inf).
INPUT_ROLES = (
    "param",
    "buffer",
    "opt_state",
    "grad_acc",
    "step",
    "micro",
    "input",
    "target",
    "constant",
)
OUTPUT_ROLES = ("loss", "param", "opt_state", "buffer", "grad_acc", "metric")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "bool")
_ENUM_KEYS = ("dtype", "device", "layout", "memory_format")


def encode_arg(value: object, name_of: Callable[[object], str | None]) -> JsonValue:
    """JSON form of one FX argument; `name_of(v)` gives the IR name of a graph value or None."""
    ref = name_of(value)
    if ref is not None:
        return {"ref": ref}
    if isinstance(value, (list, tuple)):
        return [encode_arg(v, name_of) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_arg(v, name_of) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    return _encode_enum(value)


def _encode_enum(value: object) -> dict[str, JsonValue]:
    import torch  # only the tracer encodes; decoders need no torch

    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": value.type}
    if isinstance(value, torch.layout):
        return {"layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    raise TypeError(f"cannot encode argument {value!r} of type {type(value).__name__} in SAM-IR")


def decode_arg(value: JsonValue, env: Mapping[str, Any], *, to_torch: bool = False) -> Any:
    """Inverse of `encode_arg`: refs become `env[name]`; enums become torch objects if `to_torch`."""
    if isinstance(value, list):
        return [decode_arg(v, env, to_torch=to_torch) for v in value]
    if not isinstance(value, dict):
        return value
    ((key, text),) = value.items() if len(value) == 1 else (("", None),)
    if key == "ref" and isinstance(text, str):
        return env[text]
    if key == "float" and isinstance(text, str):
        return float(text)
    if key in _ENUM_KEYS and isinstance(text, str):
        return _decode_enum(value) if to_torch else value
    return {k: decode_arg(v, env, to_torch=to_torch) for k, v in value.items()}


def _decode_enum(value: Mapping[str, JsonValue]) -> object:
    import torch

    key, text = next(iter(value.items()))
    if not isinstance(text, str):  # decode_arg passes only one-key objects of a str
        raise TypeError(f"cannot decode argument {dict(value)!r}")
    if key == "device":
        return torch.device(text)
    return getattr(torch, text)


def iter_refs(value: JsonValue) -> Iterator[str]:
    """Every name referenced (`{"ref": ...}`) anywhere inside an encoded argument."""
    if isinstance(value, list):
        for v in value:
            yield from iter_refs(v)
    elif isinstance(value, dict):
        ref = _ref_name(value)
        if ref is not None:
            yield ref
        else:
            for v in value.values():
                yield from iter_refs(v)


def _ref_name(value: JsonValue) -> str | None:
    """sam_domain.ir.ref_name, which code outside the trace sandbox calls: this module runs in the
    sandbox too, which binds SAM's compiler package but not sam_domain (compiler.sandbox.launcher)."""
    if isinstance(value, dict) and len(value) == 1:
        ref = value.get("ref")
        if isinstance(ref, str):
            return ref
    return None


def node_inputs(node: IrNode) -> list[str]:
    """Names a node reads, in argument order, duplicates removed."""
    seen: dict[str, None] = {}
    for ref in iter_refs([node.get("args", []), node.get("kwargs", {})]):
        seen.setdefault(ref, None)
    return list(seen)


def consumers(graph: IrGraph) -> dict[str, list[str]]:
    """value name -> names of the nodes that read it ("output" for graph outputs)."""
    users: dict[str, list[str]] = {i["name"]: [] for i in graph["inputs"]}
    for node in graph["nodes"]:
        users.setdefault(node["name"], [])
        for ref in node_inputs(node):
            users.setdefault(ref, []).append(node["name"])
    for out in graph["outputs"]:
        users.setdefault(out["ref"], []).append("output")
    return users


def validate_graph(graph: Mapping[str, Any]) -> None:
    """Raise ValueError unless `graph` is well-formed sam-ir/1 (refs defined before use, roles known)."""
    if graph.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} graph: format={graph.get('format')!r}")
    defined: set[str] = set()
    for inp in graph["inputs"]:
        if inp["role"] not in INPUT_ROLES:
            raise ValueError(f"input {inp['name']} has unknown role {inp['role']!r}")
        defined.add(inp["name"])
    for node in graph["nodes"]:
        missing = [r for r in node_inputs(node) if r not in defined]
        if missing:
            raise ValueError(f"node {node['name']} reads undefined values {missing}")
        defined.add(node["name"])
    for out in graph["outputs"]:
        if out["role"] not in OUTPUT_ROLES or out["ref"] not in defined:
            raise ValueError(f"bad output {out}")


def tensor_bytes(shape: Sequence[int], dtype: str | None) -> int:
    """Bytes of a dense tensor of `shape` and IR `dtype` (8 a value for a dtype it does not list)."""
    sizes = {"float16": 2, "bfloat16": 2, "bool": 1, "int32": 4, "float32": 4}
    size = sizes.get(dtype, 8) if dtype is not None else 8
    return int(math.prod(shape)) * size


def save_graph(graph: Mapping[str, object], path: Path) -> None:
    """Write the graph as compact, key-sorted JSON (the bytes are part of the cache key)."""
    Path(path).write_text(canonical_json(graph))


def load_graph(path: Path) -> IrGraph:
    """Read and validate a graph.json."""
    graph: IrGraph = json.loads(Path(path).read_text())
    validate_graph(graph)
    return graph


def canonical_json(value: object) -> str:
    """Deterministic JSON text (sorted keys, no spaces) for hashing and storage."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
