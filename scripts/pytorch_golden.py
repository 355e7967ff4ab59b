#!/usr/bin/env python3
"""Golden files for gocompile's PyTorch parity test (tensor/golden_test.go).

Regenerate (on a machine with PyTorch 2.x and NumPy):

    python3 scripts/pytorch_golden.py --out testdata/golden

then run `go test ./tensor -run Golden -v` (with GOCOMPILE_DEVICE=cuda to
check a GPU). The script is deterministic: every case draws its inputs from
NumPy's legacy RandomState seeded with a CRC of the case name, so adding a
case does not change the others. Inputs are generated with NumPy, turned
into tensors with torch.from_numpy, and the op or model runs on the CPU.

Layout: testdata/golden/manifest.json lists the cases; each case has a
folder testdata/golden/<name>/ holding in0.npy, in1.npy, ... and out.npy.
A manifest case is

    {"name", "kind": "op" | "model", "op": registry name or model name,
     "inputs": ["<name>/in0.npy", ...], "input_dtypes": [...],
     "output": "<name>/out.npy", "output_dtype": ...,
     "attrs": {...}, "dtype": the case's main dtype, "tol": {"rtol", "atol"},
     "note": optional}

Floats that JSON cannot hold (inf, nan) appear in attrs as the strings
"inf", "-inf", "nan". NumPy has no bfloat16: bfloat16 tensors are stored as
float32 .npy files holding exactly bfloat16-representable values, and the
manifest's input_dtypes / output_dtype say "bfloat16" so the Go side casts.

Where this PyTorch has no CPU kernel for a 16-bit dtype (older releases lack
many Half kernels), the op runs on float32 copies of the 16-bit inputs and
the result is rounded once to the 16-bit dtype, which is what PyTorch's own
16-bit CPU kernels compute; such cases carry a "note".

Tolerances (|got - want| <= atol + rtol * |want|; NaN matches NaN, infinities
must match exactly):

    dtype      rtol    atol    (matmul, linear, models)
    float64    1e-10   1e-10   1e-10 / 1e-10
    float32    1e-5    1e-5    1e-4  / 1e-4
    float16    1e-2    1e-2    2e-2  / 2e-2
    bfloat16   5e-2    5e-2    1e-1  / 1e-1
    int*, bool exact
    casts      exact (conversion is exactly specified)

The hardcoded op list OPS below must cover every op of gocompile's
registry: the Go test fails when ir.Ops() holds an op without a case here.
Keep testdata/golden under 5 MiB (the script prints its size).
"""

import argparse
import json
import math
import os
import shutil
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

# Every op of the registry (ir.Ops()), by registry name.
OPS = [
    # pointwise
    "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf",
    "floor", "ceil", "round", "sign",
    "sigmoid", "relu", "gelu", "gelu_tanh", "silu",
    "eq", "ne", "lt", "le", "gt", "ge",
    "logical_not", "logical_and", "logical_or",
    "where", "masked_fill", "clamp", "clamp_min", "clamp_max", "cast", "after",
    # reductions
    "sum", "mean", "amax", "amin", "argmax", "argmin",
    # composites
    "var", "softmax", "log_softmax", "layer_norm", "rms_norm", "linear", "repeat", "pad",
    "scaled_dot_product_attention", "attention",
    # views
    "reshape", "transpose", "permute", "expand", "squeeze", "unsqueeze", "slice",
    # externs
    "matmul", "cat", "stack", "gather", "index_select", "embedding", "contiguous", "cumsum", "tril", "triu", "argsort", "index_copy", "index_add", "as_strided", "as_strided_scatter",
    "as_strided_index_copy",
]

# Models, and composites of the public API (Tensor.IndexPut) that have no
# registry op of their own: tensor/golden_models_test.go maps each name to Go.
MODELS = ["mlp", "attention_block", "transformer_block", "index_put"]

FLOATS = ["float32", "float64", "float16", "bfloat16"]

TORCH_DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
}
NAMES = {v: k for k, v in TORCH_DTYPES.items()}

TOL = {
    "float64": (1e-10, 1e-10), "float32": (1e-5, 1e-5),
    "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2),
}
TOL_HEAVY = {  # matmul, linear, models
    "float64": (1e-10, 1e-10), "float32": (1e-4, 1e-4),
    "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 1e-1),
}


def tol_for(dtype, heavy=False):
    if dtype not in TOL:
        return {"rtol": 0.0, "atol": 0.0}
    r, a = (TOL_HEAVY if heavy else TOL)[dtype]
    return {"rtol": r, "atol": a}


def jfloat(v):
    """A float for the manifest: inf and nan as strings."""
    if v is None:
        return None
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def rng_for(name):
    return np.random.RandomState(zlib.crc32(name.encode()) & 0x7FFFFFFF)


def to_bf16_values(a):
    """float32 values rounded to the nearest bfloat16 (still float32)."""
    return torch.from_numpy(np.array(a, dtype=np.float32, order="C")).bfloat16().float().numpy()


def make(rng, shape, dtype, kind="normal", scale=1.0):
    """Inputs generated with NumPy, as an array of the dtype (bfloat16 as
    float32 holding bfloat16 values)."""
    shape = tuple(shape)
    if dtype == "bool":
        return rng.rand(*shape) < 0.5 if shape else np.array(rng.rand() < 0.5)
    if dtype in ("int32", "int64"):
        lo, hi = {"normal": (-10, 10), "positive": (1, 10), "small": (0, 4), "ties": (-2, 3)}.get(kind, (-10, 10))
        return np.asarray(rng.randint(lo, hi, size=shape), dtype=dtype)
    x = rng.randn(*shape) * scale
    if kind == "positive":
        x = np.abs(x) + 0.1
    elif kind == "nonzero":
        x = np.sign(x + 1e-30) * (np.abs(x) + 0.5)
    elif kind == "ties":
        x = np.round(x * 2) / 2  # few distinct values, so == and argmax ties happen
    elif kind == "exponent":
        x = np.clip(x, -2, 2)
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float64":
        return x
    if dtype == "bfloat16":
        return to_bf16_values(x.astype(np.float32))
    return x.astype(dtype)


def c_order(a):
    """A C-ordered copy; unlike np.ascontiguousarray it keeps 0-d arrays 0-d."""
    return np.array(a, order="C", copy=True)


def to_torch(a, dtype):
    t = torch.from_numpy(c_order(a))
    return t.to(TORCH_DTYPES[dtype])


def stored(t):
    """A torch result as the NumPy array written to out.npy."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return c_order(t.numpy())


# The differentiable ops: each gets gradient goldens (see Golden.gradients).
GRAD_OPS = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
    "sin", "cos", "tanh", "erf", "floor", "ceil", "round", "sign", "sigmoid", "relu", "gelu", "gelu_tanh", "silu",
    "where", "masked_fill", "clamp", "clamp_min", "clamp_max", "cast", "sum", "mean", "amax", "amin",
    "reshape", "transpose", "permute", "expand", "squeeze", "unsqueeze", "slice", "matmul", "cat", "stack",
    "index_select", "embedding", "contiguous", "tril", "triu", "index_add", "index_copy", "gather", "cumsum",
    "var", "softmax", "log_softmax", "layer_norm", "rms_norm", "linear", "repeat", "pad",
    "scaled_dot_product_attention", "attention",
}


def apply_pre(ts, pre):
    """Non-contiguous inputs: views applied to inputs before the op, in
    PyTorch here and in Go by the test."""
    ts = list(ts)
    for p in pre or []:
        i = p["input"]
        if p["op"] == "transpose":
            ts[i] = ts[i].transpose(p["dim0"], p["dim1"])
        elif p["op"] == "slice":
            idx = [slice(None)] * ts[i].dim()
            idx[p["dim"]] = slice(p["start"], p["stop"], p["step"])
            ts[i] = ts[i][tuple(idx)]
        else:
            raise ValueError(p)
    return ts


class Golden:
    def __init__(self, out):
        self.out = out
        self.cases = []
        self.names = set()

    def add(self, name, op, inputs, fn, attrs=None, dtype=None, tol=None, kind="op", heavy=False, note=None):
        """inputs: list of (array, dtype name); fn: tensors -> tensor."""
        if name in self.names:
            raise ValueError("duplicate case " + name)
        self.names.add(name)
        attrs = dict(attrs or {})
        ts = [to_torch(a, dt) for a, dt in inputs]
        ts = apply_pre(ts, attrs.get("pre"))
        try:
            res = fn(*ts)
        except RuntimeError as e:  # no CPU kernel for a 16-bit dtype here
            if not any(t.dtype in (torch.float16, torch.bfloat16) for t in ts):
                raise
            half = [t.dtype for t in ts if t.dtype in (torch.float16, torch.bfloat16)][0]
            up = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in ts]
            res = fn(*up)
            if res.dtype == torch.float32:
                res = res.to(half)
            note = (note + "; " if note else "") + \
                "computed in float32 and rounded to %s (torch %s: %s)" % (NAMES[half], torch.__version__, str(e).splitlines()[0])
        folder = os.path.join(self.out, name)
        os.makedirs(folder, exist_ok=True)
        files = []
        for i, (a, dt) in enumerate(inputs):
            f = "%s/in%d.npy" % (name, i)
            np.save(os.path.join(self.out, f), c_order(a))
            files.append(f)
        np.save(os.path.join(self.out, name, "out.npy"), stored(res))
        if dtype is None:
            dtype = inputs[0][1] if inputs else NAMES[res.dtype]
        out_dtype = NAMES[res.dtype]
        if tol is None:
            tol = tol_for(out_dtype if out_dtype in TOL else dtype, heavy)
            if out_dtype not in TOL:
                tol = {"rtol": 0.0, "atol": 0.0}
        c = {
            "name": name, "kind": kind, "op": op, "inputs": files,
            "input_dtypes": [dt for _, dt in inputs], "output": name + "/out.npy",
            "output_dtype": out_dtype, "output_shape": list(res.shape),
            "attrs": attrs, "dtype": dtype, "tol": tol,
        }
        if note:
            c["note"] = note
        grad = self.gradients(name, op, kind, inputs, fn, attrs)
        if grad:
            c["grad"] = grad
        self.cases.append(c)

    def gradients(self, name, op, kind, inputs, fn, attrs):
        """The gradients of sum(upstream * fn(inputs)) with respect to the
        float32 and float64 inputs, for differentiable ops and the models,
        where every floating input is float32 or float64 and the pre-views
        are transposes or step-1 slices; None otherwise."""
        if kind == "op" and op not in GRAD_OPS:
            return None
        dts = [dt for _, dt in inputs]
        if not any(dt in ("float32", "float64") for dt in dts) or any(dt in ("float16", "bfloat16") for dt in dts):
            return None
        if any(p["op"] == "slice" and p["step"] != 1 for p in attrs.get("pre") or []):
            return None
        leaves = [to_torch(a, dt).requires_grad_(dt in ("float32", "float64")) for a, dt in inputs]
        res = fn(*apply_pre(leaves, attrs.get("pre")))
        if not res.requires_grad or not res.dtype.is_floating_point:
            return None
        rng = rng_for(name + "/grad")
        up = torch.from_numpy(rng.standard_normal(res.shape)).to(res.dtype)
        want = [t for t in leaves if t.requires_grad]
        gs = iter(torch.autograd.grad(res, want, up, allow_unused=True))
        files = []
        for t in leaves:
            g = next(gs) if t.requires_grad else None
            if g is None:
                files.append(None)
                continue
            f = "%s/grad%d.npy" % (name, len(files))
            np.save(os.path.join(self.out, f), stored(g))
            files.append(f)
        np.save(os.path.join(self.out, name, "upstream.npy"), stored(up))
        return {"upstream": name + "/upstream.npy", "inputs": files}

    def write(self):
        covered = {c["op"] for c in self.cases if c["kind"] == "op"}
        missing = [o for o in OPS if o not in covered]
        if missing:
            sys.exit("no golden case for ops: %s" % missing)
        manifest = {
            "generator": "scripts/pytorch_golden.py",
            "torch": torch.__version__, "numpy": np.__version__,
            "ops": OPS, "models": MODELS, "cases": self.cases,
        }
        with open(os.path.join(self.out, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1, allow_nan=False)
            f.write("\n")


# ---------------------------------------------------------------- pointwise

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
}
UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "erf": torch.erf,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "logical_not": torch.logical_not,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "sign": torch.sign,
}
# Input domains: (first operand kind, second operand kind).
DOMAIN = {"div": ("normal", "nonzero"), "pow": ("positive", "exponent"),
          "log": ("positive",), "sqrt": ("positive",), "rsqrt": ("positive",)}
SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 30.0, -30.0, 100.0, -100.0,
            float("inf"), float("-inf"), float("nan"), 1e-30, 3.0, -7.25]


def scalar_fn(op, s):
    return lambda x: BINARY[op](x, s)


def pointwise(g):
    binary_arith = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
    compares = ["eq", "ne", "lt", "le", "gt", "ge"]
    # Binary ops over every floating dtype and odd / broadcast shapes.
    for op in binary_arith + compares + ["logical_and", "logical_or"]:
        dom = DOMAIN.get(op, ("ties", "ties") if op in compares else ("normal", "normal"))
        shapes = {
            "float32": [((1023,), (1023,)), ((3, 1, 5), (4, 5)), ((1,), (3,))],
            "float64": [((3, 7), (7,)), ((), (3, 2))],
            "float16": [((37,), (37,))],
            "bfloat16": [((5, 1), (1, 7))],
        }
        for dt in FLOATS:
            for sa, sb in shapes[dt]:
                name = "%s_%s_%s_%s" % (op, dt, "x".join(map(str, sa)) or "scalar", "x".join(map(str, sb)) or "scalar")
                rng = rng_for(name)
                a, b = make(rng, sa, dt, dom[0]), make(rng, sb, dt, dom[1])
                g.add(name, op, [(a, dt), (b, dt)], BINARY[op])
    # Integer and bool operands, mixed-type promotion.
    for op in ["add", "sub", "mul", "maximum", "minimum"] + compares + ["logical_and", "logical_or"]:
        name = "%s_int32_int64" % op
        rng = rng_for(name)
        g.add(name, op, [(make(rng, (3, 5), "int32"), "int32"), (make(rng, (5,), "int64"), "int64")], BINARY[op])
        name = "%s_int32_float32" % op
        rng = rng_for(name)
        g.add(name, op, [(make(rng, (4, 3), "int32", "ties"), "int32"), (make(rng, (4, 3), "float32", "ties"), "float32")],
              BINARY[op], dtype="float32")
        name = "%s_float16_float32" % op
        rng = rng_for(name)
        g.add(name, op, [(make(rng, (6,), "float16", "ties"), "float16"), (make(rng, (6,), "float32", "ties"), "float32")],
              BINARY[op], dtype="float32")
    for op in ["add", "mul", "maximum", "eq", "logical_and", "logical_or"]:
        name = "%s_bool" % op
        rng = rng_for(name)
        g.add(name, op, [(make(rng, (9,), "bool"), "bool"), (make(rng, (9,), "bool"), "bool")], BINARY[op])
    name = "add_bool_int64"
    rng = rng_for(name)
    g.add(name, "add", [(make(rng, (7,), "bool"), "bool"), (make(rng, (7,), "int64"), "int64")], torch.add, dtype="int64")
    # after(x, token) is x whatever the token holds (an ordering edge the
    # compiler adds; PyTorch's side is x itself), for tokens of other types,
    # NaN and infinite ones included.
    for name, sx, dx, y, dy in [
            ("after_float32_1023_scalar", (1023,), "float32", np.array(float("nan"), dtype=np.float32), "float32"),
            ("after_bfloat16_3x5_scalar", (3, 5), "bfloat16", np.array(float("inf"), dtype=np.float32), "float32"),
            ("after_int64_4_scalar", (4,), "int64", np.array(-2.5), "float64"),
            ("after_float64_2x3_scalar", (2, 3), "float64", np.array(float("-inf"), dtype=np.float16), "float16")]:
        rng = rng_for(name)
        g.add(name, "after", [(make(rng, sx, dx), dx), (y, dy)], lambda x, y: x.clone(), dtype=dx)
    name = "add_bfloat16_float16"
    rng = rng_for(name)
    g.add(name, "add", [(make(rng, (7,), "bfloat16"), "bfloat16"), (make(rng, (7,), "float16"), "float16")], torch.add,
          dtype="float32")
    # Zero-dim tensors promote only by category.
    name = "add_float32_rank0_float64"
    rng = rng_for(name)
    g.add(name, "add", [(make(rng, (5,), "float32"), "float32"), (make(rng, (), "float64"), "float64")], torch.add)
    name = "mul_int32_rank0_float64"
    rng = rng_for(name)
    g.add(name, "mul", [(make(rng, (5,), "int32"), "int32"), (make(rng, (), "float64"), "float64")], torch.mul,
          dtype="float64")
    name = "div_int32"
    rng = rng_for(name)
    g.add(name, "div", [(make(rng, (3, 4), "int32"), "int32"), (make(rng, (4,), "int32", "positive"), "int32")], torch.div,
          dtype="float32")
    name = "pow_int64"
    rng = rng_for(name)
    g.add(name, "pow", [(make(rng, (11,), "int64"), "int64"), (make(rng, (11,), "int64", "small"), "int64")], torch.pow)
    name = "pow_float32_negative_base"
    rng = rng_for(name)
    base = make(rng, (12,), "float32")
    expo = np.array([2, 3, -1, 0, 1, 2, 3, -2, 0.5, 2, 4, 5], dtype=np.float32)
    g.add(name, "pow", [(base, "float32"), (expo, "float32")], torch.pow)
    # Scalar operands (Go's ...Scalar methods), which promote like Python numbers.
    for op, s, dt in [("add", 2.5, "float32"), ("add", 3, "int32"), ("add", 0.5, "int32"), ("sub", -1.25, "float64"),
                      ("mul", 3, "bfloat16"), ("mul", 0.5, "int64"), ("div", 4, "float16"), ("div", 2, "int32"),
                      ("pow", 2, "float32"), ("pow", 0.5, "float64"), ("pow", 3, "int32"), ("maximum", 0.25, "float32"),
                      ("minimum", -1, "int64"), ("eq", 0.5, "float32"), ("ne", 1, "int32"), ("lt", 0, "float16"),
                      ("le", 0.5, "int64"), ("gt", -0.5, "bfloat16"), ("ge", 1, "float64")]:
        name = "%s_%s_scalar_%s" % (op, dt, str(s).replace(".", "p").replace("-", "m"))
        rng = rng_for(name)
        kind = "ties" if op in compares else ("normal" if op != "pow" or s == int(s) else "positive")
        if op in ("maximum", "minimum"):  # torch.maximum takes no Python number
            fn = (lambda o, v: (lambda x: BINARY[o](x, torch.tensor(v, dtype=x.dtype if x.is_floating_point() else (torch.float32 if isinstance(v, float) else x.dtype)))))(op, s)
        else:
            fn = scalar_fn(op, s)
        g.add(name, op, [(make(rng, (2, 9), dt, kind), dt)], fn, attrs={"scalar": jfloat(s), "scalar_int": isinstance(s, int)})

    # Unary ops.
    for op, fn in UNARY.items():
        dom = DOMAIN.get(op, ("normal",))[0]
        for dt, shape in [("float32", (1023,)), ("float32", (1,)), ("float64", (5, 7)), ("float16", (37,)),
                          ("bfloat16", (3, 13))]:
            name = "%s_%s_%s" % (op, dt, "x".join(map(str, shape)))
            rng = rng_for(name)
            g.add(name, op, [(make(rng, shape, dt, dom, scale=2.0), dt)], fn)
        name = "%s_float32_special" % op
        specials = SPECIALS
        if op == "gelu":
            # PyTorch 2.11's CPU GELU returns NaN at +inf; the exact value
            # (and PyTorch 1.13's, and gocompile's) is +inf. Leave it out
            # rather than pin either answer.
            specials = [v for v in SPECIALS if v != float("inf")]
        g.add(name, op, [(np.array(specials, dtype=np.float32), "float32")], fn)
    for op in ["neg", "abs", "relu", "exp", "sqrt", "sigmoid", "logical_not", "floor", "ceil", "round", "sign"]:
        name = "%s_int32" % op
        rng = rng_for(name)
        g.add(name, op, [(make(rng, (4, 5), "int32", "positive" if op == "sqrt" else "normal"), "int32")], UNARY[op])
    name = "round_float32_halves"  # halves round to even
    g.add(name, "round", [(np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 1e7 + 0.5], dtype=np.float32), "float32")],
          torch.round)
    name = "logical_not_bool"
    rng = rng_for(name)
    g.add(name, "logical_not", [(make(rng, (8,), "bool"), "bool")], torch.logical_not)

    # where, masked_fill.
    for dts in [("float32", "float32"), ("float64", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16"),
                ("int32", "int64"), ("int64", "float32")]:
        name = "where_%s_%s" % dts
        rng = rng_for(name)
        g.add(name, "where", [(make(rng, (4, 1), "bool"), "bool"), (make(rng, (4, 6), dts[0]), dts[0]),
                              (make(rng, (6,), dts[1]), dts[1])], torch.where, dtype=dts[0])
    for dt, v in [("float32", float("-inf")), ("float32", 2.5), ("float64", -1.0), ("float16", 0.1), ("bfloat16", 7.0),
                  ("int32", 7), ("int64", -3), ("bool", 1)]:
        name = "masked_fill_%s_%s" % (dt, str(v).replace(".", "p").replace("-", "m"))
        rng = rng_for(name)
        fill = (lambda v: (lambda x, m: x.masked_fill(m, v)))(v)
        g.add(name, "masked_fill", [(make(rng, (3, 8), dt), dt), (make(rng, (8,), "bool"), "bool")], fill,
              attrs={"value": jfloat(v)})

    # clamp, clamp_min, clamp_max (Go's Clamp picks the op by which bounds are finite).
    for dt, lo, hi in [("float32", -0.5, 0.5), ("float64", -1.0, 2.0), ("float16", -0.25, 0.75), ("bfloat16", 0.0, 1.0),
                       ("int32", -3, 4), ("int64", -2, 2), ("float32", 1.0, -1.0)]:
        name = "clamp_%s_%s_%s" % (dt, str(lo).replace(".", "p").replace("-", "m"), str(hi).replace(".", "p").replace("-", "m"))
        rng = rng_for(name)
        fn = (lambda lo, hi: (lambda x: torch.clamp(x, lo, hi)))(lo, hi)
        g.add(name, "clamp", [(make(rng, (3, 11), dt), dt)], fn, attrs={"min": jfloat(lo), "max": jfloat(hi)})
    g.add("clamp_float32_special", "clamp", [(np.array(SPECIALS, dtype=np.float32), "float32")],
          lambda x: torch.clamp(x, -3.0, 3.0), attrs={"min": -3.0, "max": 3.0})
    for dt, v in [("float32", 0.25), ("float64", -0.5), ("float16", 0.0), ("bfloat16", 0.5), ("int32", 1), ("int64", -1)]:
        for op in ["clamp_min", "clamp_max"]:
            name = "%s_%s_%s" % (op, dt, str(v).replace(".", "p").replace("-", "m"))
            rng = rng_for(name)
            if op == "clamp_min":
                fn = (lambda v: (lambda x: torch.clamp(x, min=v)))(v)
                attrs = {"min": jfloat(v), "max": None}
            else:
                fn = (lambda v: (lambda x: torch.clamp(x, max=v)))(v)
                attrs = {"min": None, "max": jfloat(v)}
            g.add(name, op, [(make(rng, (29,), dt), dt)], fn, attrs=attrs)

    # cast: conversions are exactly specified, so compared exactly.
    pairs = [("float32", t) for t in ["float64", "float16", "bfloat16", "int32", "int64", "bool"]] + \
            [("float64", t) for t in ["float32", "float16", "bfloat16", "int64"]] + \
            [("float16", "float32"), ("float16", "bfloat16"), ("bfloat16", "float16"), ("bfloat16", "int32"),
             ("int32", "float32"), ("int64", "float16"), ("int64", "int32"), ("int32", "bool"),
             ("bool", "float32"), ("bool", "int64")]
    for src, dst in pairs:
        name = "cast_%s_to_%s" % (src, dst)
        rng = rng_for(name)
        x = make(rng, (5, 9), src, scale=20.0)
        if src.startswith("float") and dst == "bool":
            x[0, :3] = 0
        fn = (lambda d: (lambda t: t.to(TORCH_DTYPES[d])))(dst)
        g.add(name, "cast", [(x, src)], fn, attrs={"dtype": dst}, tol={"rtol": 0.0, "atol": 0.0})
    # Values that round differently through float32 than directly.
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11, -(1 + 3 * 2.0 ** -11 - 2.0 ** -35), 65504.0, 70000.0,
                  1e-8, 2.0 ** -24 * 1.5, float("inf"), float("nan")], dtype=np.float64)
    g.add("cast_float64_to_float16_rounding", "cast", [(x, "float64")], lambda t: t.half(),
          attrs={"dtype": "float16"}, tol={"rtol": 0.0, "atol": 0.0},
          note="float64 values next to float16 rounding ties: direct rounding differs from rounding via float32")
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -40, 1 + 2.0 ** -8, 3.0e38, float("-inf")], dtype=np.float64)
    g.add("cast_float64_to_bfloat16_rounding", "cast", [(x, "float64")], lambda t: t.bfloat16(),
          attrs={"dtype": "bfloat16"}, tol={"rtol": 0.0, "atol": 0.0},
          note="float64 values next to bfloat16 rounding ties")
    x = np.array([2.9, -2.9, 0.5, -0.5, 1e9, -1e9], dtype=np.float32)
    g.add("cast_float32_to_int64_truncation", "cast", [(x, "float32")], lambda t: t.long(),
          attrs={"dtype": "int64"}, tol={"rtol": 0.0, "atol": 0.0})
    x = np.array([3e9, -3e9, 2 ** 31, -(2 ** 31) - 1, 5], dtype=np.int64)
    g.add("cast_int64_to_int32_wrap", "cast", [(x, "int64")], lambda t: t.int(),
          attrs={"dtype": "int32"}, tol={"rtol": 0.0, "atol": 0.0})


# --------------------------------------------------------------- reductions

def reductions(g):
    fns = {
        "sum": lambda x, dims, k: torch.sum(x, dim=dims, keepdim=k) if dims else (
            torch.sum(x) if not k else torch.sum(x, dim=list(range(x.dim())), keepdim=True)),
        "mean": lambda x, dims, k: torch.mean(x, dim=dims, keepdim=k) if dims else (
            torch.mean(x) if not k else torch.mean(x, dim=list(range(x.dim())), keepdim=True)),
        "amax": lambda x, dims, k: torch.amax(x, dim=dims if dims else list(range(x.dim())), keepdim=k),
        "amin": lambda x, dims, k: torch.amin(x, dim=dims if dims else list(range(x.dim())), keepdim=k),
    }
    for op, f in fns.items():
        cases = [("float32", (1023,), [], False), ("float32", (3, 5, 7), [0, 2], True), ("float32", (3, 5, 7), [-1], False),
                 ("float32", (4, 1), [1], False), ("float32", (2, 3), [], True),
                 ("float64", (6, 11), [0], False), ("float16", (37,), [], False), ("float16", (5, 9), [1], True),
                 ("bfloat16", (5, 7), [1], False), ("bfloat16", (64,), [], False)]
        if op != "mean":
            cases += [("int32", (4, 6), [1], False), ("int64", (3, 4, 2), [], False)]
        if op in ("sum", "amax"):
            cases += [("bool", (3, 7), [1], False)]
        for dt, shape, dims, keep in cases:
            name = "%s_%s_%s_dims%s%s" % (op, dt, "x".join(map(str, shape)), "_".join(str(d).replace("-", "m") for d in dims) or "all",
                                         "_keep" if keep else "")
            rng = rng_for(name)
            fn = (lambda f, dims, keep: (lambda x: f(x, dims, keep)))(f, dims, keep)
            g.add(name, op, [(make(rng, shape, dt), dt)], fn, attrs={"dims": dims, "keepdim": keep})
        if op in ("sum", "amax", "amin", "mean"):
            x = np.array([[1.0, float("nan"), 2.0], [3.0, -1.0, float("inf")]], dtype=np.float32)
            name = "%s_float32_nan" % op
            g.add(name, op, [(x, "float32")], (lambda f: (lambda x: f(x, [1], False)))(f), attrs={"dims": [1], "keepdim": False})
    for op, f in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
        for dt, shape, dim, keep, kind in [("float32", (5, 1023), 1, False, "normal"), ("float32", (4, 7), 0, True, "normal"),
                                           ("float32", (3, 6), None, False, "normal"), ("float64", (3, 5), -1, False, "normal"),
                                           ("float16", (4, 9), 1, False, "ties"), ("bfloat16", (3, 8), 1, False, "ties"),
                                           ("int32", (6, 5), 1, False, "ties"), ("int64", (2, 3, 4), 1, True, "ties")]:
            name = "%s_%s_%s_dim%s%s" % (op, dt, "x".join(map(str, shape)), "all" if dim is None else str(dim).replace("-", "m"),
                                        "_keep" if keep else "")
            rng = rng_for(name)
            fn = (lambda f, dim, keep: (lambda x: f(x, dim=dim, keepdim=keep) if dim is not None else f(x)))(f, dim, keep)
            g.add(name, op, [(make(rng, shape, dt, kind), dt)], fn, attrs={"dim": dim, "keepdim": keep})
        x = np.array([[1.0, float("nan"), 5.0, float("nan")], [2.0, 2.0, -1.0, -1.0]], dtype=np.float32)
        g.add("%s_float32_nan_ties" % op, op, [(x, "float32")], (lambda f: (lambda x: f(x, dim=1)))(f),
              attrs={"dim": 1, "keepdim": False})


# --------------------------------------------------------------- composites

def rms_norm(x, shape, w, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, shape, w, eps)
    dims = list(range(x.dim() - len(shape), x.dim()))
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = xf * torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + eps)
    if w is not None:
        y = y * w
    return y.to(x.dtype)


def cumsums(g):
    for name, shape, dt, dim, pre in [
            ("cumsum_float32_3x1023_m1", (3, 1023), "float32", -1, None),
            ("cumsum_float64_5x7_0", (5, 7), "float64", 0, None),
            ("cumsum_float16_37_0", (37,), "float16", 0, None),
            ("cumsum_bfloat16_3x13_1", (3, 13), "bfloat16", 1, None),
            ("cumsum_int32_4x5_1", (4, 5), "int32", 1, None),
            ("cumsum_int64_2x3x4_1", (2, 3, 4), "int64", 1, None),
            ("cumsum_bool_9_0", (9,), "bool", 0, None),
            ("cumsum_float32_transposed", (6, 5), "float32", 1, [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}])]:
        rng = rng_for(name)
        attrs = {"dim": dim}
        if pre:
            attrs["pre"] = pre
        g.add(name, "cumsum", [(make(rng, shape, dt), dt)], (lambda d: (lambda x: torch.cumsum(x, d)))(dim), attrs=attrs)


def sdpa(q, k, v, mask=None, causal=False, scale=None):
    """torch.nn.functional.scaled_dot_product_attention where this PyTorch
    has it (with enable_gqa for grouped heads), else its documented math."""
    hq, hkv = q.shape[-3], k.shape[-3]
    if hasattr(F, "scaled_dot_product_attention"):
        kw = {"enable_gqa": True} if hq != hkv else {}
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, **kw)
    if hq != hkv:
        k, v = k.repeat_interleave(hq // hkv, dim=-3), v.repeat_interleave(hq // hkv, dim=-3)
    L, S = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) * (scale if scale else 1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, dim=-1) @ v


def attention_case(g, op, name, dt, dims, causal, mask, scale):
    """One attention case of op named op_name: q, k, v of dims (B, Hq,
    Hkv, L, S, E) and a bool ("bool") or additive ("add") [L, S] mask."""
    B, hq, hkv, L, S, E = dims
    name = op + "_" + name
    rng = rng_for(name)
    inputs = [(make(rng, (B, hq, L, E), dt), dt), (make(rng, (B, hkv, S, E), dt), dt), (make(rng, (B, hkv, S, E), dt), dt)]
    if mask == "bool":
        m = rng.rand(L, S) < 0.7
        m[:, 0] = True
        inputs.append((m, "bool"))
    elif mask == "add":
        inputs.append((make(rng, (L, S), dt), dt))
    attrs = {"causal": causal, "scale": jfloat(scale or 0.0)}

    def fn(*ts):
        return sdpa(ts[0], ts[1], ts[2], ts[3] if len(ts) > 3 else None, causal, scale)
    g.add(name, op, inputs, fn, attrs=attrs, heavy=True)


def attentions(g):
    for name, dt, (B, hq, hkv, L, S, E), causal, mask, scale in [
            ("float32_gqa_causal", "float32", (2, 4, 2, 5, 7, 8), True, None, None),
            ("float64_plain", "float64", (1, 2, 2, 6, 6, 4), False, None, 0.25),
            ("float32_decode_bool_mask", "float32", (1, 8, 2, 1, 33, 16), False, "bool", None),
            ("float32_additive_mask", "float32", (2, 3, 3, 4, 5, 8), False, "add", None),
            ("bfloat16_gqa_causal", "bfloat16", (1, 4, 1, 6, 6, 16), True, None, None),
            ("float16_plain", "float16", (1, 2, 2, 3, 9, 8), False, None, None)]:
        attention_case(g, "scaled_dot_product_attention", name, dt, (B, hq, hkv, L, S, E), causal, mask, scale)
    # Few queries against many keys: the shapes that run as one split-key
    # kernel ("attention", what ScaledDotProductAttention lowers to there).
    for name, dt, (B, hq, hkv, L, S, E), causal, mask, scale in [
            ("float32_decode_gqa_mask", "float32", (2, 8, 2, 1, 300, 16), False, "bool", None),
            ("bfloat16_decode_gqa", "bfloat16", (1, 8, 2, 1, 257, 64), False, None, None),
            ("float16_queries4_causal", "float16", (1, 4, 4, 4, 130, 32), True, None, None),
            ("float64_queries3_mask_scale", "float64", (3, 2, 1, 3, 45, 8), False, "bool", 0.3)]:
        attention_case(g, "attention", name, dt, (B, hq, hkv, L, S, E), causal, mask, scale)


def index_writes(g, op, fn, cases):
    """Cases of an op writing src into x at a 1-D index along a dim."""
    for name, shape, dt, dim, index in cases:
        name = op + "_" + name
        rng = rng_for(name)
        d = dim % len(shape)
        src_shape = list(shape)
        src_shape[d] = len(index)
        g.add(name, op,
              [(make(rng, shape, dt), dt), (np.array(index, dtype=np.int64), "int64"), (make(rng, src_shape, dt), dt)],
              (lambda dd: (lambda x, i, s: fn(x, dd, i, s)))(dim), attrs={"dim": dim})


def index_copies(g):
    index_writes(g, "index_copy", torch.index_copy, [
        ("float32_5x3_rows", (5, 3), "float32", 0, [4, 0, 3]),
        ("float64_3x7_cols", (3, 7), "float64", 1, [6, 1]),
        ("bfloat16_cache", (1, 2, 6, 4), "bfloat16", 2, [3]),
        ("float16_9", (9,), "float16", 0, [8, 0, 4]),
        ("int64_4x4_m1", (4, 4), "int64", -1, [2]),
        ("bool_3x5", (3, 5), "bool", 1, [0, 4])])


def index_adds(g):
    index_writes(g, "index_add", torch.index_add, [
        ("float32_5x3_repeated", (5, 3), "float32", 0, [4, 0, 4, 3, 4]),
        ("float64_3x7_cols", (3, 7), "float64", 1, [6, 1, 1]),
        ("bfloat16_rows", (6, 4), "bfloat16", 0, [2, 5]),
        ("float16_9_m1", (9,), "float16", -1, [8, 0, 8])])


def index_puts(g):
    """Cases of Tensor.IndexPut (torch.index_put): x, values, then one index
    tensor per leading dim, broadcast together; values broadcast to the
    indexed shape. Repeated positions appear only with accumulate, where
    they add up (without it PyTorch leaves which value wins undefined)."""
    for name, shape, dt, indices, vshape, acc in [
            ("float32_rows", (5, 3), "float32", [[4, 0, -2]], (3, 3), False),
            ("float64_broadcast_indices", (4, 6), "float64", [[[0], [3]], [1, -1, 2]], (2, 3), False),
            ("float32_repeated_accumulate", (5, 3), "float32", [[4, 0, 4, 3, 4]], (5, 3), True),
            ("bfloat16_cache_position", (6, 2, 4), "bfloat16", [[3]], (1, 2, 4), False),
            ("float16_accumulate", (9,), "float16", [[8, 0, -1, 8]], (4,), True),
            ("int64_scalar_value", (4, 4), "int64", [[0, 3], [2, 1]], (), False),
            ("float32_every_dim_accumulate", (3, 4, 5), "float32", [[[2], [0]], [[1, 3, 3]], [4, 0, 4]], (2, 3), True),
            ("float32_values_broadcast", (5, 7), "float32", [[1, 3]], (7,), False)]:
        name = "index_put_" + name
        rng = rng_for(name)
        ins = [(make(rng, shape, dt), dt), (make(rng, vshape, dt), dt)]
        ins += [(np.array(ix, dtype=np.int64), "int64") for ix in indices]
        g.add(name, "index_put", ins,
              (lambda a: (lambda x, v, *ix: x.index_put(tuple(ix), v, accumulate=a)))(acc),
              kind="model", attrs={"accumulate": acc})


def strided(g):
    for name, n, dt, size, stride, offset in [
            ("float32_rows", 24, "float32", (3, 4), (8, 1), 2),
            ("float64_transposed", 12, "float64", (4, 3), (1, 4), 0),
            ("bfloat16_repeat", 10, "bfloat16", (3, 5), (0, 2), 1),
            ("int64_window", 9, "int64", (4, 3), (2, 1), 0)]:
        rng = rng_for("as_strided_" + name)
        attrs = {"size": list(size), "stride": list(stride), "offset": offset}
        g.add("as_strided_" + name, "as_strided", [(make(rng, (n,), dt), dt)],
              (lambda a, b, c: (lambda x: torch.as_strided(x, a, b, c)))(size, stride, offset), attrs=attrs)
    for name, n, dt, size, stride, offset, src_shape in [
            ("float32_cache_row", 32, "float32", (2, 1, 4), (16, 4, 1), 8, (2, 1, 4)),
            ("float16_column", 12, "float16", (3,), (4,), 1, (3,)),
            ("bfloat16_broadcast", 20, "bfloat16", (2, 5), (10, 1), 0, (5,)),
            ("int32_strided", 15, "int32", (3, 2), (5, 2), 1, (3, 2))]:
        rng = rng_for("as_strided_scatter_" + name)
        attrs = {"size": list(size), "stride": list(stride), "offset": offset}

        def fn(x, s, a=size, b=stride, c=offset):
            return torch.as_strided_scatter(x, s.expand(a).contiguous(), a, b, c)
        g.add("as_strided_scatter_" + name, "as_strided_scatter", [(make(rng, (n,), dt), dt), (make(rng, src_shape, dt), dt)],
              fn, attrs=attrs)


def strided_index_copies(g):
    # A cache position written through a view of its storage, as Compile
    # records IndexCopyInPlace.
    for name, n, dt, size, stride, offset, dim, index in [
            ("float32_cache", 48, "float32", (2, 6, 4), (24, 4, 1), 0, 1, [3]),
            ("bfloat16_rows", 30, "bfloat16", (5, 3), (6, 2), 1, 0, [4, 0]),
            ("int64_columns", 16, "int64", (3, 4), (4, 1), 2, 1, [1, 3])]:
        rng = rng_for("as_strided_index_copy_" + name)
        src_shape = list(size)
        src_shape[dim] = len(index)
        attrs = {"size": list(size), "stride": list(stride), "offset": offset, "dim": dim}

        def fn(x, i, s, a=size, b=stride, c=offset, d=dim):
            y = x.clone()
            y.as_strided(a, b, c).index_copy_(d, i, s)
            return y
        g.add("as_strided_index_copy_" + name, "as_strided_index_copy",
              [(make(rng, (n,), dt), dt), (np.array(index, dtype=np.int64), "int64"), (make(rng, src_shape, dt), dt)], fn,
              attrs=attrs)


def argsorts(g):
    # Stable sorts (gocompile's ArgSort is torch.sort's stable=True order).
    for name, shape, dt, dim, desc, kind, pre in [
            ("float32_5x7_m1_ties", (5, 7), "float32", -1, False, "ties", None),
            ("float64_4x9_0_desc", (4, 9), "float64", 0, True, "ties", None),
            ("float16_37_0", (37,), "float16", 0, False, "normal", None),
            ("bfloat16_3x13_1_desc", (3, 13), "bfloat16", 1, True, "ties", None),
            ("int32_4x5_1_desc", (4, 5), "int32", 1, True, "ties", None),
            ("int64_2x3x4_1", (2, 3, 4), "int64", 1, False, "ties", None),
            ("bool_9_0", (9,), "bool", 0, False, "normal", None),
            ("float32_transposed_desc", (6, 5), "float32", 1, True, "ties",
             [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}])]:
        name = "argsort_" + name
        rng = rng_for(name)
        attrs = {"dim": dim, "descending": desc}
        if pre:
            attrs["pre"] = pre
        g.add(name, "argsort", [(make(rng, shape, dt, kind), dt)],
              (lambda d, s: (lambda x: torch.sort(x, dim=d, descending=s, stable=True).indices))(dim, desc), attrs=attrs)
    for desc in (False, True):
        name = "argsort_float32_special" + ("_desc" if desc else "")
        g.add(name, "argsort", [(np.array(SPECIALS, dtype=np.float32), "float32")],
              (lambda s: (lambda x: torch.sort(x, dim=0, descending=s, stable=True).indices))(desc),
              attrs={"dim": 0, "descending": desc})


def triangles(g):
    for op, f in [("tril", torch.tril), ("triu", torch.triu)]:
        for name, shape, dt, diag, pre in [
                ("float32_5x7_0", (5, 7), "float32", 0, None),
                ("float64_2x4x3_m1", (2, 4, 3), "float64", -1, None),
                ("float16_6x6_1", (6, 6), "float16", 1, None),
                ("bfloat16_3x9_2", (3, 9), "bfloat16", 2, None),
                ("int32_4x4_m2", (4, 4), "int32", -2, None),
                ("bool_5x5_0", (5, 5), "bool", 0, None),
                ("float32_transposed_1", (6, 5), "float32", 1, [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}])]:
            name = op + "_" + name
            rng = rng_for(name)
            attrs = {"diagonal": diag}
            if pre:
                attrs["pre"] = pre
            g.add(name, op, [(make(rng, shape, dt), dt)], (lambda f, d: (lambda x: f(x, d)))(f, diag), attrs=attrs)


def composites(g):
    for name, shape, dt, reps, pre in [
            ("repeat_float32_3x5_2_1_3", (3, 5), "float32", (2, 1, 3), None),
            ("repeat_int64_4_3_2", (4,), "int64", (3, 2), None),
            ("repeat_bool_2x3_1_2", (2, 3), "bool", (1, 2), None),
            ("repeat_float16_1_5", (1,), "float16", (5,), None),
            ("repeat_bfloat16_transposed", (4, 6), "bfloat16", (2, 2), [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}])]:
        rng = rng_for(name)
        attrs = {"repeats": list(reps)}
        if pre:
            attrs["pre"] = pre
        g.add(name, "repeat", [(make(rng, shape, dt), dt)], (lambda r: (lambda x: x.repeat(*r)))(reps), attrs=attrs)
    for name, shape, dt, pads, value, pre in [
            ("pad_float32_3x5_1_2", (3, 5), "float32", (1, 2), -1.5, None),
            ("pad_float64_2x3x4_1_0_2_1", (2, 3, 4), "float64", (1, 0, 2, 1), 0.0, None),
            ("pad_int32_4x6_crop", (4, 6), "int32", (-1, 2), 7, None),
            ("pad_bfloat16_5x4_rows", (5, 4), "bfloat16", (0, 0, 3, 0), 0.5, None),
            ("pad_float16_1023_3_1", (1023,), "float16", (3, 1), 2.0, None),
            ("pad_float32_transposed_nan", (6, 5), "float32", (2, 2, 1, 1), float("nan"),
             [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}])]:
        rng = rng_for(name)
        attrs = {"pad": list(pads), "value": jfloat(value)}
        if pre:
            attrs["pre"] = pre
        g.add(name, "pad", [(make(rng, shape, dt), dt)], (lambda p, v: (lambda x: F.pad(x, p, value=v)))(pads, value), attrs=attrs)
    for dt, shape, dims, corr, keep in [("float32", (1023,), [], 1, False), ("float32", (4, 9), [1], 0, True),
                                        ("float32", (3, 4, 5), [0, 2], 2, False), ("float32", (2, 1), [1], 0, False),
                                        ("float64", (6, 7), [0], 1, False), ("float16", (5, 13), [1], 1, False),
                                        ("bfloat16", (3, 17), [-1], 0, True)]:
        name = "var_%s_%s_dims%s_c%d%s" % (dt, "x".join(map(str, shape)), "_".join(str(d).replace("-", "m") for d in dims) or "all",
                                          corr, "_keep" if keep else "")
        rng = rng_for(name)
        fn = (lambda dims, corr, keep: (lambda x: torch.var(x, dim=dims if dims else None, correction=corr, keepdim=keep)))(dims, corr, keep)
        g.add(name, "var", [(make(rng, shape, dt, scale=3.0), dt)], fn, attrs={"dims": dims, "correction": corr, "keepdim": keep})
    for op, f in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        for dt, shape, dim in [("float32", (3, 1023), -1), ("float32", (5, 4), 0), ("float32", (1,), 0), ("float64", (4, 9), 1),
                               ("float16", (3, 37), -1), ("bfloat16", (2, 3, 8), 1)]:
            name = "%s_%s_%s_dim%s" % (op, dt, "x".join(map(str, shape)), str(dim).replace("-", "m"))
            rng = rng_for(name)
            fn = (lambda f, d: (lambda x: f(x, d)))(f, dim)
            g.add(name, op, [(make(rng, shape, dt, scale=3.0), dt)], fn, attrs={"dim": dim})
        x = np.array([[0.0, float("-inf"), 1.0, float("-inf")], [1000.0, 1000.0, -1000.0, 0.0]], dtype=np.float32)
        g.add("%s_float32_masked" % op, op, [(x, "float32")], (lambda f: (lambda x: f(x, -1)))(f), attrs={"dim": -1})
    for dt, shape, ns, hw, hb, eps in [("float32", (4, 1023), [1023], True, True, 1e-5), ("float32", (2, 3, 8), [3, 8], True, False, 1e-6),
                                       ("float32", (5, 16), [16], False, False, 1e-5), ("float64", (3, 10), [10], True, True, 1e-12),
                                       ("float16", (4, 32), [32], True, True, 1e-5), ("bfloat16", (3, 24), [24], True, True, 1e-5)]:
        name = "layer_norm_%s_%s%s%s" % (dt, "x".join(map(str, shape)), "_w" if hw else "", "_b" if hb else "")
        rng = rng_for(name)
        ins = [(make(rng, shape, dt, scale=2.0) + (1.5 if dt != "bfloat16" else 0), dt)]
        if hw:
            ins.append((make(rng, ns, dt), dt))
        if hb:
            ins.append((make(rng, ns, dt), dt))

        def fn(x, *p, ns=ns, hw=hw, hb=hb, eps=eps):
            p = list(p)
            w = p.pop(0) if hw else None
            b = p.pop(0) if hb else None
            return F.layer_norm(x, ns, w, b, eps)
        g.add(name, "layer_norm", ins, fn, attrs={"normalized_shape": ns, "eps": eps, "weight": hw, "bias": hb})
    for dt, shape, ns, hw, eps in [("float32", (4, 1023), [1023], True, 1e-6), ("float32", (2, 3, 8), [3, 8], False, 1e-5),
                                   ("float64", (3, 10), [10], True, 1e-12), ("float16", (4, 32), [32], True, 1e-5),
                                   ("bfloat16", (3, 24), [24], False, 1e-6)]:
        name = "rms_norm_%s_%s%s" % (dt, "x".join(map(str, shape)), "_w" if hw else "")
        rng = rng_for(name)
        ins = [(make(rng, shape, dt, scale=2.0), dt)]
        if hw:
            ins.append((make(rng, ns, dt), dt))

        def fn(x, *p, ns=ns, hw=hw, eps=eps):
            return rms_norm(x, ns, p[0] if hw else None, eps)
        g.add(name, "rms_norm", ins, fn, attrs={"normalized_shape": ns, "eps": eps, "weight": hw})
    for dt, xs, out, hb in [("float32", (5, 33), 17, True), ("float32", (2, 3, 16), 8, False), ("float32", (7,), 3, True),
                            ("float64", (4, 9), 6, True), ("float16", (3, 32), 8, True), ("bfloat16", (3, 16), 5, True),
                            ("float32", (3, 10), None, False)]:
        name = "linear_%s_%s_out%s%s" % (dt, "x".join(map(str, xs)), out if out is not None else "vec", "_b" if hb else "")
        rng = rng_for(name)
        ins = [(make(rng, xs, dt), dt), (make(rng, (out, xs[-1]) if out is not None else (xs[-1],), dt, scale=0.3), dt)]
        if hb:
            ins.append((make(rng, (out,), dt), dt))
        g.add(name, "linear", ins, (lambda hb: (lambda x, w, *b: F.linear(x, w, b[0] if hb else None)))(hb),
              attrs={"bias": hb}, heavy=True)
    rng = rng_for("linear_int64")
    g.add("linear_int64", "linear", [(make(rng, (3, 4), "int64"), "int64"), (make(rng, (2, 4), "int64"), "int64"),
                                     (make(rng, (2,), "int64"), "int64")],
          lambda x, w, b: torch.matmul(x, w.t()) + b, attrs={"bias": True},
          note="torch's F.linear has no integer CPU kernel; the golden is x @ w.T + b, the definition")


# -------------------------------------------------------------------- views

def views(g):
    def v(name, op, shape, dt, fn, attrs, pre=None):
        rng = rng_for(name)
        if pre:
            attrs = dict(attrs, pre=pre)
        g.add(name, op, [(make(rng, shape, dt), dt)], fn, attrs=attrs)

    v("reshape_float32_3x341_to_m1x31", "reshape", (3, 341), "float32", lambda x: x.reshape(-1, 31), {"shape": [-1, 31]})
    v("reshape_float32_transposed", "reshape", (6, 5), "float32", lambda x: x.reshape(3, 10), {"shape": [3, 10]},
      pre=[{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}])
    v("reshape_int64_to_scalar", "reshape", (1, 1), "int64", lambda x: x.reshape(()), {"shape": []})
    v("reshape_bfloat16_2x3x4_to_4x6", "reshape", (2, 3, 4), "bfloat16", lambda x: x.reshape(4, 6), {"shape": [4, 6]})
    v("transpose_float32_3x5x7_0_2", "transpose", (3, 5, 7), "float32", lambda x: x.transpose(0, 2), {"dim0": 0, "dim1": 2})
    v("transpose_float16_4x6_m1_m2", "transpose", (4, 6), "float16", lambda x: x.transpose(-1, -2), {"dim0": -1, "dim1": -2})
    v("transpose_bool_3x2", "transpose", (3, 2), "bool", lambda x: x.transpose(0, 1), {"dim0": 0, "dim1": 1})
    v("permute_float32_2x3x4x5", "permute", (2, 3, 4, 5), "float32", lambda x: x.permute(2, 0, 3, 1), {"dims": [2, 0, 3, 1]})
    v("permute_int32_negative", "permute", (3, 4, 2), "int32", lambda x: x.permute(-1, 0, 1), {"dims": [-1, 0, 1]})
    v("expand_float32_3x1_to_2x3x5", "expand", (3, 1), "float32", lambda x: x.expand(2, 3, 5), {"shape": [2, 3, 5]})
    v("expand_float64_keep", "expand", (1, 4), "float64", lambda x: x.expand(6, -1), {"shape": [6, -1]})
    v("expand_bfloat16_scalar", "expand", (), "bfloat16", lambda x: x.expand(3, 2), {"shape": [3, 2]})
    v("squeeze_float32_all", "squeeze", (1, 3, 1, 4), "float32", lambda x: x.squeeze(), {"dims": []})

    def squeeze_dims(dims):
        def f(x):
            nd = [d % x.dim() for d in dims]
            for d in sorted(nd, reverse=True):
                x = x.squeeze(d)
            return x
        return f
    v("squeeze_float32_dims_0_2", "squeeze", (1, 3, 1, 4), "float32", squeeze_dims([0, 2]), {"dims": [0, 2]})
    v("squeeze_int64_not_size1", "squeeze", (2, 1, 3), "int64", squeeze_dims([0, -2]), {"dims": [0, -2]})
    v("unsqueeze_float32_m1", "unsqueeze", (3, 4), "float32", lambda x: x.unsqueeze(-1), {"dim": -1})
    v("unsqueeze_float16_0", "unsqueeze", (5,), "float16", lambda x: x.unsqueeze(0), {"dim": 0})
    v("unsqueeze_bool_1", "unsqueeze", (2, 3), "bool", lambda x: x.unsqueeze(1), {"dim": 1})

    def sl(dim, start, stop, step):
        def f(x):
            idx = [slice(None)] * x.dim()
            idx[dim] = slice(start, stop, step)
            return x[tuple(idx)]
        return f
    for name, shape, dt, dim, start, stop, step in [
            ("slice_float32_1023_step3", (1023,), "float32", 0, 1, 1023, 3),
            ("slice_float32_negative_start", (4, 9), "float32", 1, -5, 100, 2),
            ("slice_float64_empty", (4, 6), "float64", 0, 3, 2, 1),
            ("slice_int32_dim_m1", (3, 10), "int32", -1, 2, -2, 1),
            ("slice_bfloat16_dim0", (7, 3), "bfloat16", 0, 0, 7, 4)]:
        v(name, "slice", shape, dt, sl(dim, start, stop, step), {"dim": dim, "start": start, "stop": stop, "step": step})
    v("slice_float32_of_transposed", "slice", (5, 8), "float32", sl(0, 1, 7, 2), {"dim": 0, "start": 1, "stop": 7, "step": 2},
      pre=[{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}])


# ------------------------------------------------------------------ externs

def externs(g):
    for dt, sa, sb, pre in [("float32", (5, 33), (33, 7), None), ("float32", (1023,), (1023,), None),
                            ("float32", (16,), (16, 3), None), ("float32", (4, 16), (16,), None),
                            ("float32", (2, 1, 3, 4), (5, 4, 6), None), ("float32", (3, 8), (5, 8),
                                                                           [{"input": 1, "op": "transpose", "dim0": 0, "dim1": 1}]),
                            ("float64", (3, 4, 5), (3, 5, 2), None), ("float16", (4, 32), (32, 5), None),
                            ("bfloat16", (3, 16), (16, 4), None), ("int64", (3, 4), (4, 2), None),
                            ("int32", (2, 3), (3, 3), None)]:
        name = "matmul_%s_%s_%s%s" % (dt, "x".join(map(str, sa)), "x".join(map(str, sb)), "_t" if pre else "")
        rng = rng_for(name)
        g.add(name, "matmul", [(make(rng, sa, dt), dt), (make(rng, sb, dt), dt)], torch.matmul,
              attrs={"pre": pre} if pre else {}, heavy=True)
    rng = rng_for("matmul_float32_float64")
    g.add("matmul_float32_float64", "matmul", [(make(rng, (3, 4), "float32"), "float32"), (make(rng, (4, 2), "float64"), "float64")],
          lambda a, b: torch.matmul(a.double(), b), dtype="float64", heavy=True,
          note="torch.matmul does not promote; the golden promotes first, as gocompile's MatMul does")
    for dt, shapes, dim in [("float32", [(2, 3), (4, 3), (1, 3)], 0), ("float64", [(3, 1), (3, 5)], -1),
                            ("float16", [(2, 2, 3), (2, 1, 3)], 1), ("bfloat16", [(5,), (7,)], 0),
                            ("int32", [(2, 3), (2, 2)], 1), ("bool", [(3,), (2,)], 0)]:
        name = "cat_%s_%s_dim%s" % (dt, "_".join("x".join(map(str, s)) for s in shapes), str(dim).replace("-", "m"))
        rng = rng_for(name)
        g.add(name, "cat", [(make(rng, s, dt), dt) for s in shapes], (lambda d: (lambda *ts: torch.cat(ts, d)))(dim),
              attrs={"dim": dim})
    rng = rng_for("cat_int32_float32")
    g.add("cat_int32_float32", "cat", [(make(rng, (2, 2), "int32"), "int32"), (make(rng, (1, 2), "float32"), "float32")],
          lambda *ts: torch.cat(ts, 0), attrs={"dim": 0}, dtype="float32")
    for dt, shape, n, dim in [("float32", (3, 4), 3, 0), ("float32", (3, 4), 2, -1), ("float64", (5,), 2, 1),
                              ("float16", (2, 3), 2, 1), ("bfloat16", (4,), 3, 0), ("int64", (2, 2), 2, 2), ("bool", (3,), 2, 0)]:
        name = "stack_%s_%sx%d_dim%s" % (dt, "x".join(map(str, shape)), n, str(dim).replace("-", "m"))
        rng = rng_for(name)
        g.add(name, "stack", [(make(rng, shape, dt), dt) for _ in range(n)], (lambda d: (lambda *ts: torch.stack(ts, d)))(dim),
              attrs={"dim": dim})
    for dt, xs, idxs, dim, idt in [("float32", (3, 1023), (3, 5), 1, "int64"), ("float32", (4, 6), (2, 6), 0, "int64"),
                                   ("float64", (3, 4, 5), (3, 2, 5), 1, "int64"), ("float16", (5, 7), (5, 3), 1, "int64"),
                                   ("bfloat16", (4, 8), (4, 8), -1, "int64"), ("int32", (4, 5), (4, 2), 1, "int64"),
                                   ("float32", (6, 4), (3, 4), 0, "int32")]:
        name = "gather_%s_%s_idx%s_%s_dim%s" % (dt, "x".join(map(str, xs)), "x".join(map(str, idxs)), idt, str(dim).replace("-", "m"))
        rng = rng_for(name)
        d = dim % len(xs)
        idx = np.asarray(rng.randint(0, xs[d], size=idxs), dtype=idt)
        g.add(name, "gather", [(make(rng, xs, dt), dt), (idx, idt)],
              (lambda dim: (lambda x, i: torch.gather(x, dim, i.long())))(dim), attrs={"dim": dim}, dtype=dt,
              note="torch.gather takes int64 indices only; the golden uses the same values as int64" if idt == "int32" else None)
    for dt, xs, n, dim, idt in [("float32", (5, 1023), 7, 0, "int64"), ("float32", (4, 6), 9, 1, "int32"),
                                ("float64", (3, 4, 5), 2, -1, "int64"), ("float16", (6, 3), 4, 0, "int64"),
                                ("bfloat16", (3, 7), 5, 1, "int64"), ("int64", (5, 2), 3, 0, "int64"), ("bool", (4, 3), 2, 1, "int64")]:
        name = "index_select_%s_%s_n%d_dim%s_%s" % (dt, "x".join(map(str, xs)), n, str(dim).replace("-", "m"), idt)
        rng = rng_for(name)
        d = dim % len(xs)
        idx = np.asarray(rng.randint(0, xs[d], size=(n,)), dtype=idt)
        g.add(name, "index_select", [(make(rng, xs, dt), dt), (idx, idt)],
              (lambda dim: (lambda x, i: torch.index_select(x, dim, i)))(dim), attrs={"dim": dim}, dtype=dt)
    for dt, idxs, vocab, d, idt in [("float32", (2, 5), 11, 8, "int64"), ("float32", (7,), 50, 3, "int32"),
                                    ("float64", (3, 2, 2), 6, 4, "int64"), ("float16", (4,), 9, 16, "int64"),
                                    ("bfloat16", (2, 3), 7, 5, "int64"), ("float32", (), 4, 6, "int64")]:
        name = "embedding_%s_idx%s_%s_v%d_d%d" % (dt, "x".join(map(str, idxs)) or "scalar", idt, vocab, d)
        rng = rng_for(name)
        idx = np.asarray(rng.randint(0, vocab, size=idxs), dtype=idt)
        g.add(name, "embedding", [(idx, idt), (make(rng, (vocab, d), dt), dt)], F.embedding, dtype=dt)
    for dt, shape, pre in [("float32", (5, 33), [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}]),
                           ("float64", (4, 3, 2), [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 2}]),
                           ("float16", (9, 4), [{"input": 0, "op": "slice", "dim": 0, "start": 1, "stop": 9, "step": 3}]),
                           ("bfloat16", (3, 6), [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}]),
                           ("int32", (4, 5), [{"input": 0, "op": "transpose", "dim0": 0, "dim1": 1}]),
                           ("bool", (3, 3), None), ("float32", (7,), None)]:
        name = "contiguous_%s_%s%s" % (dt, "x".join(map(str, shape)), "_" + pre[0]["op"] if pre else "")
        rng = rng_for(name)
        g.add(name, "contiguous", [(make(rng, shape, dt), dt)], lambda x: x.contiguous(), attrs={"pre": pre} if pre else {})


# ------------------------------------------------------------------- models

def mlp(x, w1, b1, w2, b2):
    """Linear + GELU, twice."""
    return F.gelu(F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2))


def attention_block(x, ln_w, ln_b, wq, bq, wk, bk, wv, bv, wo, bo):
    """Pre-norm single-head causal self-attention with a residual."""
    s, d = x.shape[-2], x.shape[-1]
    h = F.layer_norm(x, [d], ln_w, ln_b, 1e-5)
    q, k, v = F.linear(h, wq, bq), F.linear(h, wk, bk), F.linear(h, wv, bv)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return x + F.linear(torch.matmul(torch.softmax(scores, -1), v), wo, bo)


def transformer_block(tokens, tok_emb, pos_emb, ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b,
                      w_fc, b_fc, w_proj, b_proj, lnf_w, lnf_b, w_head, heads=4):
    """Embedding, pre-norm multi-head causal attention, tanh-GELU MLP,
    residuals, final layer norm and a linear head: logits [batch, seq, vocab]."""
    b, s = tokens.shape
    d = tok_emb.shape[1]
    dh = d // heads
    x = F.embedding(tokens, tok_emb) + F.embedding(torch.arange(s), pos_emb)
    h = F.layer_norm(x, [d], ln1_w, ln1_b, 1e-5)
    qkv = F.linear(h, w_qkv, b_qkv).reshape(b, s, 3, heads, dh).permute(2, 0, 3, 1, 4)  # [3, b, heads, s, dh]
    q, k, v = qkv[0], qkv[1], qkv[2]
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    att = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
    y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, d)
    x = x + F.linear(y, w_o, b_o)
    h = F.layer_norm(x, [d], ln2_w, ln2_b, 1e-5)
    x = x + F.linear(F.gelu(F.linear(h, w_fc, b_fc), approximate="tanh"), w_proj, b_proj)
    return F.linear(F.layer_norm(x, [d], lnf_w, lnf_b, 1e-5), w_head)


def models(g):
    for dt in ["float32", "float64", "bfloat16"]:
        name = "model_mlp_%s" % dt
        rng = rng_for(name)
        din, dh, dout = 24, 48, 10
        ins = [make(rng, (6, din), dt), make(rng, (dh, din), dt, scale=1 / math.sqrt(din)), make(rng, (dh,), dt, scale=0.1),
               make(rng, (dout, dh), dt, scale=1 / math.sqrt(dh)), make(rng, (dout,), dt, scale=0.1)]
        g.add(name, "mlp", [(a, dt) for a in ins], mlp, kind="model", heavy=True, attrs={})
    for dt in ["float32", "float64"]:
        name = "model_attention_block_%s" % dt
        rng = rng_for(name)
        s, d = 7, 16
        sc = 1 / math.sqrt(d)
        ins = [make(rng, (2, s, d), dt), 1 + make(rng, (d,), dt, scale=0.1), make(rng, (d,), dt, scale=0.1)]
        for _ in range(4):
            ins += [make(rng, (d, d), dt, scale=sc), make(rng, (d,), dt, scale=0.1)]
        g.add(name, "attention_block", [(a, dt) for a in ins], attention_block, kind="model", heavy=True, attrs={})
    for dt in ["float32", "float64"]:
        name = "model_transformer_block_%s" % dt
        rng = rng_for(name)
        b, s, d, vocab, heads = 2, 8, 32, 50, 4
        sc = 1 / math.sqrt(d)
        tokens = np.asarray(rng.randint(0, vocab, size=(b, s)), dtype=np.int64)
        ins = [(tokens, "int64")]
        ws = [make(rng, (vocab, d), dt), make(rng, (s, d), dt, scale=0.1),
              1 + make(rng, (d,), dt, scale=0.1), make(rng, (d,), dt, scale=0.1),
              make(rng, (3 * d, d), dt, scale=sc), make(rng, (3 * d,), dt, scale=0.1),
              make(rng, (d, d), dt, scale=sc), make(rng, (d,), dt, scale=0.1),
              1 + make(rng, (d,), dt, scale=0.1), make(rng, (d,), dt, scale=0.1),
              make(rng, (4 * d, d), dt, scale=sc), make(rng, (4 * d,), dt, scale=0.1),
              make(rng, (d, 4 * d), dt, scale=1 / math.sqrt(4 * d)), make(rng, (d,), dt, scale=0.1),
              1 + make(rng, (d,), dt, scale=0.1), make(rng, (d,), dt, scale=0.1),
              make(rng, (vocab, d), dt, scale=sc)]
        ins += [(w, dt) for w in ws]
        g.add(name, "transformer_block", ins, lambda *a: transformer_block(*a, heads=heads), kind="model", heavy=True,
              attrs={"heads": heads, "eps": 1e-5}, dtype=dt)


def dir_size(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="testdata/golden", help="output folder (replaced)")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # reductions in one fixed order
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    g = Golden(args.out)
    pointwise(g)
    reductions(g)
    composites(g)
    cumsums(g)
    triangles(g)
    argsorts(g)
    index_copies(g)
    index_adds(g)
    index_puts(g)
    strided(g)
    strided_index_copies(g)
    attentions(g)
    views(g)
    externs(g)
    models(g)
    g.write()
    size = dir_size(args.out)
    print("%d cases (%d ops, %d models), %.2f MiB in %s (torch %s, numpy %s)" % (
        len(g.cases), len({c["op"] for c in g.cases if c["kind"] == "op"}), len(MODELS), size / 2 ** 20, args.out,
        torch.__version__, np.__version__))
    if size > 5 * 2 ** 20:
        sys.exit("testdata/golden is over 5 MiB: make the cases smaller")


if __name__ == "__main__":
    main()
