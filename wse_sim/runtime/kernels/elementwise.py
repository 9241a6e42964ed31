"""Elementwise kernels: each PE applies the op to its own tile, so no fabric traffic is needed.

ATen semantics (alpha, rounding modes, clamp bounds) are reproduced exactly; the executor casts
every result to the dtype the IR recorded, which also settles numpy's different type promotion.
Optimizer updates are elementwise too (the compiler decomposes torch.optim's update into
mul/add/sqrt/div/lerp/addcmul/addcdiv), so they run here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from wse_sim.runtime.kernels.registry import Operand, Scalar, simple

_SQRT_HALF = np.float32(0.7071067811865476)
_SQRT_2_OVER_PI = np.float32(0.7978845608028654)


def erf(x: np.ndarray) -> np.ndarray:
    """Error function, elementwise (Abramowitz-Stegun 7.1.26, |error| < 1.5e-7); x: any shape."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    y: np.ndarray = sign * (1.0 - poly * np.exp(-a * a))
    return y


@simple("aten.add.Tensor", "aten.add.Scalar")
def add(a: np.ndarray, b: Operand, alpha: Scalar = 1) -> np.ndarray:
    """a + alpha * b."""
    return a + b if alpha == 1 else a + alpha * b


@simple("aten.sub.Tensor", "aten.sub.Scalar")
def sub(a: np.ndarray, b: Operand, alpha: Scalar = 1) -> np.ndarray:
    """a - alpha * b."""
    return a - b if alpha == 1 else a - alpha * b


@simple("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(a: np.ndarray, b: Operand, alpha: Scalar = 1) -> np.ndarray:
    """b - alpha * a."""
    return b - a if alpha == 1 else b - alpha * a


@simple("aten.mul.Tensor", "aten.mul.Scalar")
def mul(a: np.ndarray, b: Operand) -> np.ndarray:
    """a * b."""
    return np.multiply(a, b)


@simple("aten.div.Tensor", "aten.div.Scalar")
def div(a: np.ndarray, b: Operand) -> np.ndarray:
    """a / b (true division)."""
    return np.true_divide(a, b)


@simple("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode(a: np.ndarray, b: Operand, rounding_mode: str | None = None) -> np.ndarray:
    """a / b rounded toward zero ("trunc"), down ("floor") or not at all."""
    q = np.true_divide(a, b)
    if rounding_mode == "trunc":
        return np.trunc(q)
    if rounding_mode == "floor":
        return np.floor(q)
    return q


@simple("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def power(a: Operand, b: Operand) -> np.ndarray:
    """a ** b (a square is a multiply, as torch does)."""
    if isinstance(b, int | float) and b == 2:
        return np.multiply(a, a)
    if isinstance(b, int | float) and b == 0.5:
        return np.sqrt(a)
    return np.power(a, b)


@simple("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where(cond: np.ndarray, a: Operand, b: Operand) -> np.ndarray:
    """cond ? a : b."""
    return np.where(cond, a, b)


@simple("aten.clamp.default", "aten.clamp.Tensor")
def clamp(x: np.ndarray, min: Operand | None = None, max: Operand | None = None) -> np.ndarray:  # noqa: A002 - ATen's names
    """x limited to [min, max] (either bound optional)."""
    if min is not None:
        x = np.maximum(x, min)
    if max is not None:
        x = np.minimum(x, max)
    return x


@simple("aten.clamp_min.default", "aten.clamp_min.Tensor")
def clamp_min(x: np.ndarray, m: Operand) -> np.ndarray:
    """max(x, m)."""
    return np.maximum(x, m)


@simple("aten.clamp_max.default", "aten.clamp_max.Tensor")
def clamp_max(x: np.ndarray, m: Operand) -> np.ndarray:
    """min(x, m)."""
    return np.minimum(x, m)


@simple("aten.lerp.Scalar", "aten.lerp.Tensor")
def lerp(a: np.ndarray, b: Operand, weight: Operand) -> np.ndarray:
    """a + weight * (b - a), with torch's two-sided formula for weight >= 0.5."""
    w = np.asarray(weight)
    if w.ndim == 0 and float(w) < 0.5:
        return a + w * (b - a)
    if w.ndim == 0:
        return b - (b - a) * (1 - w)
    return np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


@simple("aten.addcmul.default")
def addcmul(x: np.ndarray, t1: np.ndarray, t2: np.ndarray, value: Scalar = 1) -> np.ndarray:
    """x + value * t1 * t2."""
    return x + value * (t1 * t2) if value != 1 else x + t1 * t2


@simple("aten.addcdiv.default")
def addcdiv(x: np.ndarray, t1: np.ndarray, t2: np.ndarray, value: Scalar = 1) -> np.ndarray:
    """x + value * t1 / t2."""
    return x + value * (t1 / t2) if value != 1 else x + t1 / t2


def _unary(targets: tuple[str, ...], fn: Callable[[np.ndarray], object]) -> None:
    simple(*targets)(lambda x, *_, **__: fn(x))


_UNARY: dict[tuple[str, ...], Callable[[np.ndarray], object]] = {
    ("aten.neg.default",): np.negative,
    ("aten.exp.default",): np.exp,
    ("aten.exp2.default",): np.exp2,
    ("aten.expm1.default",): np.expm1,
    ("aten.log.default",): np.log,
    ("aten.log2.default",): np.log2,
    ("aten.log1p.default",): np.log1p,
    ("aten.sqrt.default",): np.sqrt,
    ("aten.rsqrt.default",): lambda x: 1 / np.sqrt(x),
    ("aten.reciprocal.default",): lambda x: 1 / x,
    ("aten.abs.default",): np.abs,
    ("aten.sign.default", "aten.sgn.default"): np.sign,
    ("aten.relu.default",): lambda x: np.maximum(x, 0).astype(np.asarray(x).dtype, copy=False),
    ("aten.sigmoid.default",): lambda x: 1 / (1 + np.exp(-x)),
    ("aten.tanh.default",): np.tanh,
    ("aten.erf.default",): erf,
    ("aten.sin.default",): np.sin,
    ("aten.cos.default",): np.cos,
    ("aten.tan.default",): np.tan,
    ("aten.asin.default",): np.arcsin,
    ("aten.acos.default",): np.arccos,
    ("aten.atan.default",): np.arctan,
    ("aten.sinh.default",): np.sinh,
    ("aten.cosh.default",): np.cosh,
    ("aten.asinh.default",): np.arcsinh,
    ("aten.acosh.default",): np.arccosh,
    ("aten.atanh.default",): np.arctanh,
    ("aten.log10.default",): np.log10,
    ("aten.floor.default",): np.floor,
    ("aten.ceil.default",): np.ceil,
    ("aten.round.default",): np.round,
    ("aten.trunc.default",): np.trunc,
    ("aten.isnan.default",): np.isnan,
    ("aten.isinf.default",): np.isinf,
    ("aten.logical_not.default",): np.logical_not,
    ("aten.bitwise_not.default",): lambda x: (
        np.logical_not(x) if np.asarray(x).dtype == np.bool_ else np.invert(x)
    ),
    ("aten.square.default",): lambda x: x * x,
}
for _targets, _op in _UNARY.items():
    _unary(_targets, _op)

_fn: np.ufunc
for _name, _fn in {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}.items():
    simple(f"aten.{_name}.Scalar", f"aten.{_name}.Tensor")(lambda a, b, fn=_fn: fn(a, b))

for _name, _fn in {
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "remainder": np.remainder,
    "fmod": np.fmod,
    "atan2": np.arctan2,
}.items():
    simple(f"aten.{_name}.default", f"aten.{_name}.Tensor", f"aten.{_name}.Scalar")(
        lambda a, b, fn=_fn: fn(a, b)
    )


@simple("aten.gelu.default")
def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """GELU, exact (erf) or tanh-approximated."""
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + erf(x * _SQRT_HALF))


@simple("aten.gelu_backward.default")
def gelu_backward(grad: np.ndarray, x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """d gelu(x) / dx * grad."""
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        t = np.tanh(inner)
        d_inner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)
    cdf = 0.5 * (1 + erf(x * _SQRT_HALF))
    pdf = np.exp(-0.5 * x * x) * np.float32(0.3989422804014327)
    return grad * (cdf + x * pdf)


@simple("aten.threshold_backward.default")
def threshold_backward(grad: np.ndarray, x: np.ndarray, threshold: Scalar) -> np.ndarray:
    """grad where x > threshold, else 0 (relu's backward)."""
    return np.where(x <= threshold, np.zeros((), dtype=np.asarray(grad).dtype), grad)


@simple("aten.sigmoid_backward.default")
def sigmoid_backward(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    """grad * y * (1 - y) with y = sigmoid(x)."""
    return grad * (1 - out) * out


@simple("aten.tanh_backward.default")
def tanh_backward(grad: np.ndarray, out: np.ndarray) -> np.ndarray:
    """grad * (1 - y^2) with y = tanh(x)."""
    return grad * (1 - out * out)


@simple("aten.silu.default")
def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x)."""
    return x / (1 + np.exp(-x))


@simple("aten.silu_backward.default")
def silu_backward(grad: np.ndarray, x: np.ndarray) -> np.ndarray:
    """grad * sigmoid(x) * (1 + x * (1 - sigmoid(x)))."""
    s = 1 / (1 + np.exp(-x))
    return grad * s * (1 + x * (1 - s))


@simple("aten.leaky_relu.default")
def leaky_relu(x: np.ndarray, negative_slope: float = 0.01) -> np.ndarray:
    """x if x > 0 else slope * x."""
    return np.where(x > 0, x, x * negative_slope)


@simple("aten.leaky_relu_backward.default")
def leaky_relu_backward(
    grad: np.ndarray, x: np.ndarray, negative_slope: float, self_is_result: bool = False
) -> np.ndarray:
    """grad if x > 0 else slope * grad."""
    return np.where(x > 0, grad, grad * negative_slope)


@simple("aten.hardtanh.default")
def hardtanh(x: np.ndarray, min_val: float = -1.0, max_val: float = 1.0) -> np.ndarray:
    """x clipped to [min_val, max_val]."""
    return np.clip(x, min_val, max_val)


@simple("aten.hardtanh_backward.default")
def hardtanh_backward(
    grad: np.ndarray, x: np.ndarray, min_val: float, max_val: float
) -> np.ndarray:
    """grad inside (min_val, max_val), 0 outside."""
    return np.where((x <= min_val) | (x >= max_val), 0, grad)
