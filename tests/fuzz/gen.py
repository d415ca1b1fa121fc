"""Random small Python programs over tensors and Python values, for the differential fuzzer.

``generate(seed, index)`` returns the source of one program: a module that defines ``f`` (the
function under test), ``make_inputs(variant)`` (returns ``(args, kwargs)``; variant 0 and 1
give tensors of the same shapes with different values, and the same Python values) and the
helpers, classes and module-level state that ``f`` uses. The same (seed, index) always gives
the same text, on any machine.

The programs mix tensor arithmetic with Python numbers, containers (tuples, lists, dicts:
indexing, methods, unpacking, views), comprehensions, closures and nested functions
(``nonlocal``, a cell assigned after its closure is made), helper calls with keyword
arguments, defaults, ``*args`` and ``**kwargs``, generators, recursion, branches on constants
and on tensor values (graph breaks), for/while loops with break/continue/else, ``print``,
``.item()``/``.tolist()``, in-place tensor ops and aliases, exceptions raised and caught
inside (try/except/else/finally, ``contextlib.suppress``), attribute reads and writes on small
user objects (a property, a subclass using ``super()``), ``with torch.no_grad()``, globals.

The generator is typed: it knows the type of every variable in scope (a tensor of the
program's shape, a 0-d tensor, int, float, bool, a non-empty list of tensors, a possibly
empty one, a dict of tensors and the keys it surely has, a tuple with typed items, a Box
object), so programs are mostly valid; a few raise on purpose, uncaught, to check that the
compiled code raises the same exception type.
"""
from __future__ import annotations

import random

SHAPES = [(3,), (4,), (2, 3), (5,), (3, 2)]
KEYS = ["a", "b", "c", "w"]

# Types: T tensor of the program's shape, S 0-d tensor, i int, f float, b bool, L non-empty
# list of T, M possibly empty list of T, A non-empty tuple of T (f's *args), R possibly empty
# tuple of T (a helper's *rest), D dict str -> T, V a dict's values() view, O Box,
# P:<codes> tuple with items of those types.

PRELUDE = """\
import contextlib
import functools
import math

import torch
"""

BOX_SRC = """\
class Box:
    def __init__(self, w, k):
        self.w = w
        self.k = k

    def scale(self, t):
        return t * self.k + self.w

    @property
    def twice(self):
        return self.k * 2


class Box2(Box):
    def scale(self, t):
        return super().scale(t) * 0.5 + 1
"""


class _Scope:
    """Variables bound in one block: name -> type. Readonly scopes belong to an enclosing
    function (a closure may read them but not rebind them)."""

    def __init__(self, readonly=False):
        self.vars: dict[str, str] = {}
        self.readonly = readonly


class ProgramGenerator:
    """Builds one random program; ``program()`` returns its source text."""

    def __init__(self, rng: random.Random, exclude=frozenset()):
        self.rng = rng
        self.exclude = frozenset(exclude)
        self.n = 0
        self.shape = rng.choice(SHAPES)
        self.numel = 1
        for s in self.shape:
            self.numel *= s
        self.scopes: list[_Scope] = []
        self.dkeys: dict[str, set] = {}      # dict var -> keys it surely has
        self.ptypes: dict[str, str] = {}     # tuple var -> item codes
        self.callables: list[tuple] = []     # (name, kind) callable from here
        self.helpers: list[tuple] = []       # module-level helpers: (name, kind)
        self.helper_src: list[str] = []
        self.use_box = rng.random() < 0.45
        self.globals_src: list[str] = []
        self.global_names: list[tuple] = []  # (name, kind)
        self.depth = 0           # block nesting inside the current function
        self.loops = 0           # enclosing loops in the current function
        self.in_while = False
        self.in_closure = False
        self.in_finally = False
        self.fn_level = 0        # 0 module helpers, 1 f, 2 closure in f
        self.frozen: set = set()  # containers iterated by an enclosing loop: not resized
        self.vorigin: dict[str, str] = {}  # values() view -> its dict

    # -- names and scopes ------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        """A new variable name with this prefix (unique in the program)."""
        self.n += 1
        return f"{prefix}{self.n}"

    def bind(self, name: str, ty: str):
        """Record name as bound to type ty in the innermost scope."""
        self.scopes[-1].vars[name] = ty

    def visible(self, ty: str | None = None, writable=False) -> list[str]:
        """Names in scope (of type ty if given; P matches any tuple; writable: rebindable here)."""
        seen = {}
        for sc in self.scopes:
            for name, t in sc.vars.items():
                seen[name] = (t, sc.readonly)
        return [n for n, (t, ro) in seen.items()
                if (ty is None or t == ty or (ty == "P" and t.startswith("P:")))
                and not (writable and ro)]

    def pick(self, ty: str, writable=False):
        """A random visible variable of type ty, or None."""
        vs = self.visible(ty, writable)
        return self.rng.choice(vs) if vs else None

    def push(self, readonly_below=False):
        """Open a scope (readonly_below: the enclosing ones become read-only, for a closure body)."""
        if readonly_below:
            for sc in self.scopes:
                sc.readonly = True
        self.scopes.append(_Scope())

    def pop(self):
        """Close the innermost scope."""
        self.scopes.pop()

    def chance(self, p: float) -> bool:
        """True with probability p."""
        return self.rng.random() < p

    # -- literals --------------------------------------------------------------------------

    def lit_f(self) -> str:
        """A float literal."""
        return self.rng.choice(["0.5", "1.5", "-2.0", "0.25", "3.0", "-0.75", "2.0", "1.0"])

    def lit_i(self) -> str:
        """A small int literal."""
        return str(self.rng.randint(0, 4))

    def shape_src(self) -> str:
        """The program's tensor shape as a Python tuple literal."""
        return "(" + ", ".join(str(s) for s in self.shape) + ("," if len(self.shape) == 1 else "") + ")"

    # -- expressions -------------------------------------------------------------------------

    def expr(self, ty: str, d: int) -> str:
        """An expression of type ty, nested at most d levels."""
        return getattr(self, "e_" + ty)(d)

    def e_T(self, d: int) -> str:
        """A tensor expression of the program's shape."""
        v = self.pick("T")
        if d <= 0 or self.chance(0.25):
            return v
        r = self.rng
        k = r.randrange(30)
        if k < 4:
            return f"({self.e_T(d - 1)} {r.choice('+-*')} {self.e_T(d - 1)})"
        if k < 6:
            num = r.choice([self.lit_f(), self.lit_i(), self.e_i(d - 1), self.e_f(d - 1)])
            if r.random() < 0.5:
                return f"({self.e_T(d - 1)} {r.choice('+-*')} {num})"
            return f"({num} {r.choice('+-*')} {self.e_T(d - 1)})"
        if k == 6:
            return f"({self.e_T(d - 1)} / ({self.e_T(d - 1)}.abs() + 1))"
        if k < 9:
            m = r.choice(["sin", "cos", "tanh", "relu", "abs", "neg", "sigmoid", "clone", "floor",
                          "detach", "exp", "square", "contiguous"])
            return f"{self.e_T(d - 1)}.{m}()"
        if k == 9:
            fn = r.choice(["sin", "cos", "tanh", "relu", "abs", "sigmoid", "neg"])
            return f"torch.{fn}({self.e_T(d - 1)})"
        if k == 10:
            lo = r.choice(["-1.0", "-0.5", "0.0"])
            if r.random() < 0.5:
                return f"{self.e_T(d - 1)}.clamp(min={lo}, max=1.0)"
            return f"torch.clamp({self.e_T(d - 1)}, {lo}, 2.0)"
        if k == 11:
            return f"torch.where({self.e_T(d - 1)} > {self.lit_f()}, {self.e_T(d - 1)}, {self.e_T(d - 1)})"
        if k == 12:
            return f"({self.e_T(d - 1)} {r.choice('+-*')} {self.e_S(d - 1)})"
        if k == 13:
            l = self.pick("L") or self.pick("A")
            if l:
                return f"{l}[{r.choice(['0', '-1'])}]"
        if k == 14:
            dv = self.pick("D")
            if dv:
                keys = sorted(self.dkeys.get(dv, ()))
                if keys and r.random() < 0.7:
                    return f"{dv}[{r.choice(keys)!r}]"
                return f"{dv}.get({r.choice(KEYS + ['zz'])!r}, {self.e_T(d - 1)})"
        if k == 15:
            p = self.pick("P")
            if p:
                codes = self.ptypes[p]
                idx = [i for i, c in enumerate(codes) if c == "T"]
                if idx:
                    return f"{p}[{r.choice(idx)}]"
        if k == 16 and self.use_box:
            o = self.pick("O")
            if o:
                if r.random() < 0.5:
                    return f"{o}.w"
                return f"{o}.scale({self.e_T(d - 1)})"
        if k in (17, 18):
            c = self.call_T(d - 1)
            if c:
                return c
        if k == 19:
            seq = self.pick("L") or self.pick("M") or self.pick("A") or self.pick("V") or self.pick("R")
            if seq:
                return f"sum({seq}, {self.e_T(d - 1)})"
        if k == 20:
            opts = [f"{self.e_T(d - 1)}.flip(0)", f"{self.e_T(d - 1)}.roll(1, 0)",
                    f"{self.e_T(d - 1)}.cumsum(0)", f"{self.e_T(d - 1)}.reshape({self.shape_src()})",
                    f"{self.e_T(d - 1)}.view(-1).view({self.shape_src()})",
                    f"{self.e_T(d - 1)}.unsqueeze(0).squeeze(0)", f"{self.e_T(d - 1)}[:]"]
            if len(self.shape) == 2:
                opts.append(f"{self.e_T(d - 1)}.t().t()")
            return r.choice(opts)
        if k == 21:
            return f"({self.e_T(d - 1)} if {self.e_b(d - 1)} else {self.e_T(d - 1)})"
        if k == 22:
            return r.choice([f"torch.add({self.e_T(d - 1)}, {self.e_T(d - 1)}, alpha={self.lit_f()})",
                             f"{self.e_T(d - 1)}.add({self.e_T(d - 1)}, alpha=2)",
                             f"{self.e_T(d - 1)}.mul({self.lit_f()})",
                             f"{self.e_T(d - 1)}.pow(2)", f"{self.e_T(d - 1)}.div(2.0)",
                             f"torch.maximum({self.e_T(d - 1)}, {self.e_T(d - 1)})"])
        if k == 23:
            return r.choice([f"torch.zeros_like({self.e_T(d - 1)})", f"(torch.ones_like({v}) * {self.e_f(d - 1)})",
                             f"torch.full_like({v}, {self.lit_f()})",
                             f"torch.stack([{self.e_T(d - 1)}, {self.e_T(d - 1)}]).sum(0)",
                             f"torch.stack([{self.e_T(d - 1)}, {self.e_T(d - 1)}], dim=0).mean(dim=0)"])
        if k == 24:
            return f"{self.e_T(d - 1)}.masked_fill({self.e_T(d - 1)} > 0, {self.lit_f()})"
        if k == 25:
            dv = self.pick("D")
            if dv and self.chance(0.5) and self.can_resize(dv):
                return f"{dv}.setdefault({r.choice(KEYS)!r}, {self.e_T(d - 1)})"
            if dv:
                return f"{dv}.pop('zz', {self.e_T(d - 1)})"
        if k == 26:
            return f"({self.e_T(d - 1)} * {self.e_i(d - 1)})"
        if k == 27:
            return f"torch.nn.functional.{r.choice(['relu', 'gelu', 'silu', 'softplus'])}({self.e_T(d - 1)})"
        if k == 28:
            return f"torch.nn.functional.softmax({self.e_T(d - 1)}, dim=-1)"
        return f"({self.e_T(d - 1)} {r.choice('+-*')} {self.e_T(d - 1)})"

    def e_S(self, d: int) -> str:
        """A 0-d tensor expression."""
        v = self.pick("S")
        if v and (d <= 0 or self.chance(0.2)):
            return v
        r = self.rng
        k = r.randrange(10)
        if k < 4:
            m = r.choice(["sum", "mean", "max", "min", "amax", "norm", "std"])
            return f"{self.e_T(max(d - 1, 0))}.{m}()"
        if k == 4:
            return f"({self.e_T(max(d - 1, 0))} * {self.e_T(max(d - 1, 0))}).sum()"
        if k == 5 and v:
            return f"({v} {r.choice('+-*')} {self.e_f(max(d - 1, 0))})"
        if k == 6:
            return f"torch.tensor({self.e_f(max(d - 1, 0))})"
        if k == 7:
            return f"{self.e_T(max(d - 1, 0))}.flatten()[{r.randrange(self.numel)}]"
        if k == 8:
            return f"torch.dot({self.e_T(max(d - 1, 0))}.flatten(), {self.e_T(max(d - 1, 0))}.flatten())"
        return f"{self.e_T(max(d - 1, 0))}.sum(dim={r.choice(['0', '-1'])}).sum()"

    def e_i(self, d: int) -> str:
        """An int expression (small values: used in ranges and indices)."""
        v = self.pick("i")
        if d <= 0 or self.chance(0.25):
            return v if v and self.chance(0.7) else self.lit_i()
        r = self.rng
        k = r.randrange(18)
        if k < 3:
            return f"({self.e_i(d - 1)} {r.choice('+-*')} {self.e_i(d - 1)})"
        if k == 3:
            return f"({self.e_i(d - 1)} {r.choice(['//', '%'])} {r.randint(1, 3)})"
        if k == 4:
            seq = (self.pick("L") or self.pick("M") or self.pick("A") or self.pick("D") or self.pick("V")
                   or self.pick("R"))
            if seq:
                return f"len({seq})"
        if k == 5:
            return r.choice([f"{self.e_T(0)}.shape[0]", f"{self.e_T(0)}.dim()", f"{self.e_T(0)}.numel()",
                             f"{self.e_T(0)}.size(-1)", f"len({self.e_T(0)})"])
        if k == 6:
            return f"{r.choice(['min', 'max'])}({self.e_i(d - 1)}, {self.e_i(d - 1)})"
        if k == 7:
            return f"abs({self.e_i(d - 1)})"
        if k == 8:
            return f"({self.e_i(d - 1)} if {self.e_b(d - 1)} else {self.e_i(d - 1)})"
        if k == 9:
            p = self.pick("P")
            if p:
                idx = [i for i, c in enumerate(self.ptypes[p]) if c == "i"]
                if idx:
                    return f"{p}[{r.choice(idx)}]"
                return f"len({p})"
        if k == 10:
            return f"sum([j * {self.e_i(d - 1)} for j in range({r.randint(1, 3)})])"
        if k == 11:
            c = self.call_i()
            if c:
                return c
        if k == 12:
            return f"int({self.e_b(d - 1)})"
        if k == 13:
            return f"int({self.e_T(0)}.argmax())"
        if k == 14:
            return f"{self.e_T(0)}.argmin().item()"
        if k == 15:
            seq = self.pick("L") or self.pick("A")
            if seq:
                return f"len([u for u in {seq} if {r.choice(['u.sum() > 0', 'u is not None'])}])"
        return f"({self.e_i(d - 1)} + {self.lit_i()})"

    def e_f(self, d: int) -> str:
        """A float expression (.item() values among them)."""
        v = self.pick("f")
        if d <= 0 or self.chance(0.25):
            return v if v and self.chance(0.6) else self.lit_f()
        r = self.rng
        k = r.randrange(16)
        if k < 3:
            return f"({self.e_f(d - 1)} {r.choice('+-*')} {self.e_f(d - 1)})"
        if k < 5:
            return f"{self.e_S(d - 1)}.item()"
        if k == 5:
            return f"float({self.e_i(d - 1)})"
        if k == 6:
            return f"({self.e_f(d - 1)} / 2)"
        if k == 7:
            return r.choice([f"abs({self.e_f(d - 1)})", f"round({self.e_f(d - 1)}, 2)",
                             f"math.sqrt(abs({self.e_f(d - 1)}))", f"max({self.e_f(d - 1)}, 0.5)",
                             f"min({self.e_f(d - 1)}, {self.e_f(d - 1)})"])
        if k == 8 and self.use_box:
            o = self.pick("O")
            if o:
                return r.choice([f"{o}.k", f"{o}.twice", f"getattr({o}, 'k')"])
        if k == 9:
            return f"(sum({self.e_T(0)}.tolist()) if {self.e_T(0)}.dim() == 1 else {self.e_S(0)}.item())"
        if k == 10:
            return f"float({self.e_S(d - 1)})"
        if k == 11:
            p = self.pick("P")
            if p:
                idx = [i for i, c in enumerate(self.ptypes[p]) if c == "f"]
                if idx:
                    return f"{p}[{r.choice(idx)}]"
        if k == 12:
            return f"({self.e_i(d - 1)} * {self.lit_f()})"
        if k == 13:
            return f"({self.e_f(d - 1)} if {self.e_b(d - 1)} else {self.e_f(d - 1)})"
        return f"({self.e_f(d - 1)} + {self.lit_f()})"

    def e_b(self, d: int) -> str:
        """A bool expression on Python values (no graph break)."""
        v = self.pick("b")
        if v and (d <= 0 or self.chance(0.2)):
            return v
        r = self.rng
        k = r.randrange(13)
        if k < 3:
            return f"({self.e_i(max(d - 1, 0))} {r.choice(['<', '>', '<=', '>=', '==', '!='])} {self.e_i(max(d - 1, 0))})"
        if k < 5:
            return f"({self.e_f(max(d - 1, 0))} {r.choice(['<', '>'])} {self.lit_f()})"
        if k == 5:
            dv = self.pick("D")
            if dv:
                return f"({r.choice(KEYS)!r} {r.choice(['in', 'not in'])} {dv})"
        if k == 6:
            seq = self.pick("L") or self.pick("M")
            if seq:
                return f"(len({seq}) > {r.randint(1, 3)})"
        if k == 7 and d > 0:
            return f"({self.e_b(d - 1)} {r.choice(['and', 'or'])} {self.e_b(d - 1)})"
        if k == 8 and d > 0:
            return f"(not {self.e_b(d - 1)})"
        if k == 9:
            a, b = self.pick("T"), self.pick("T")
            return f"({a} {r.choice(['is', 'is not'])} {b})"
        if k == 10:
            return r.choice([f"isinstance({self.e_T(0)}, torch.Tensor)", f"{self.e_T(0)}.is_floating_point()",
                             f"{self.e_T(0)}.requires_grad", f"isinstance({self.e_i(0)}, int)",
                             f"({self.e_T(0)}.dtype == torch.float32)"])
        if k == 11 and self.use_box:
            o = self.pick("O")
            if o:
                return f"hasattr({o}, {r.choice(['w', 'k', 'nope'])!r})"
        return f"({self.e_i(max(d - 1, 0))} > {self.lit_i()})"

    def tensor_cond(self, d: int) -> str:
        """A condition whose value depends on tensor data (a graph break when compiled)."""
        r = self.rng
        t = self.e_T(d)
        return r.choice([f"{t}.sum() > 0", f"({t} > 0).any()", f"({t} > {self.lit_f()}).all()",
                         f"{t}.max().item() > {self.lit_f()}", f"bool({t}.mean() < 0)",
                         f"{t}.flatten()[0] > 0", f"{self.e_S(0)} > {self.e_S(0)}"])

    def e_L(self, d: int) -> str:
        """A non-empty list of tensors."""
        r = self.rng
        l = self.pick("L")
        k = r.randrange(12)
        if k < 3 or not l:
            return "[" + ", ".join(self.e_T(d - 1) for _ in range(r.randint(1, 3))) + "]"
        if k == 3:
            return f"[{r.choice(['u', 'u * 2', 'u.sin()', 'u + ' + self.pick('T')])} for u in {l}]"
        if k == 4:
            return f"list({l})"
        if k == 5:
            return f"{l}[:2]"
        if k == 6:
            return f"[{self.e_T(d - 1)} * j for j in range({r.randint(1, 3)})]"
        if k == 7:
            dv = self.pick("D")
            if dv:
                return f"list({dv}.values())"
        if k == 8:
            return f"[w for row in [[u, u * 2] for u in {l}] for w in row]"
        if k == 9:
            m = self.pick("M")
            if m:
                return f"({m} + {l})"
        if k == 10:
            return f"list(map(lambda u: u * {self.lit_f()}, {l}))"
        if k == 11:
            a = self.pick("A")
            if a:
                return f"list({a})"
        return f"({l} + [{self.e_T(d - 1)}])"

    def e_M(self, d: int) -> str:
        """A possibly empty list of tensors."""
        r = self.rng
        seq = self.pick("L") or self.pick("A") or f"[{self.e_T(0)}, {self.e_T(1)}]"
        k = r.randrange(4)
        if k == 0:
            return f"[u for u in {seq} if u.sum() > {self.lit_f()}]"
        if k == 1:
            return "[]"
        if k == 2:
            return f"[u for u in {seq} if {self.e_b(0)}]"
        return f"{seq}[1:]"

    def e_D(self, d: int) -> tuple[str, set]:
        """A dict of tensors and the keys it surely has."""
        r = self.rng
        dv = self.pick("D")
        k = r.randrange(8)
        if k < 3 or not dv:
            keys = r.sample(KEYS, r.randint(1, 3))
            if r.random() < 0.3:
                return "dict(" + ", ".join(f"{key}={self.e_T(d - 1)}" for key in keys) + ")", set(keys)
            return "{" + ", ".join(f"{key!r}: {self.e_T(d - 1)}" for key in keys) + "}", set(keys)
        keys = set(self.dkeys.get(dv, ()))
        if k == 3:
            return f"{{k: v * {self.lit_f()} for k, v in {dv}.items()}}", keys
        if k == 4:
            return f"dict({dv})", keys
        if k == 5:
            key = r.choice(KEYS)
            return f"{{**{dv}, {key!r}: {self.e_T(d - 1)}}}", keys | {key}
        if k == 6:
            return f"{dv}.copy()", keys
        keys2 = r.sample(KEYS, 2)
        return f"dict(zip({keys2!r}, [{self.e_T(d - 1)}, {self.e_T(d - 1)}]))", set(keys2)

    def e_any(self, d: int) -> str:
        """An expression of a random scalar-like type."""
        ty = self.rng.choice(["T", "S", "i", "f", "b", "i", "f"])
        return self.expr(ty, d)

    # -- calls of helpers and closures --------------------------------------------------------

    def call_T(self, d: int):
        """A call of a helper or closure that returns a tensor, or None if there is none."""
        r = self.rng
        opts = [c for c in self.callables + self.helpers
                if c[1] in ("T2", "Tstar", "kw", "rec", "gen", "clo", "lam", "partial", "multi")]
        if not opts:
            return None
        name, kind = r.choice(opts)
        e = lambda: self.e_T(max(d, 0))
        if kind == "T2":
            return r.choice([f"{name}({e()}, {e()})", f"{name}({e()}, {e()}, scale={self.e_f(0)})",
                             f"{name}(b={e()}, a={e()})", f"{name}(*[{e()}, {e()}])",
                             f"{name}({e()}, **{{'b': {e()}}})"])
        if kind == "Tstar":
            seq = self.pick("L") or self.pick("A")
            opts2 = [f"{name}({e()})", f"{name}({e()}, {e()}, {e()})", f"{name}({e()}, k={self.lit_i()})"]
            if seq:
                opts2 += [f"{name}(*{seq})", f"{name}({e()}, *{seq}, k=3)"]
            return r.choice(opts2)
        if kind == "kw":
            return r.choice([f"{name}({e()}, u={e()}, w={e()})", f"{name}({e()})",
                             f"{name}(a={e()}, z={e()})"])
        if kind == "rec":
            return f"{name}({e()}, {r.randint(0, 3)})"
        if kind == "gen":
            seq = self.pick("L") or self.pick("A")
            if seq:
                return r.choice([f"sum({name}({seq}), {e()})", f"list({name}({seq}))[0]"])
            return None
        if kind == "clo":
            return r.choice([f"{name}({e()})", f"{name}({e()}, s={self.lit_f()})"])
        if kind == "lam":
            return f"{name}({e()})"
        if kind == "partial":
            return f"{name}({e()})"
        if kind == "multi":
            return f"{name}({e()}, {e()})[{r.randint(0, 1)}]"
        return None

    def call_i(self):
        """A call of a nonlocal-counting closure (an int), or None."""
        opts = [c for c in self.callables if c[1] == "bump"]
        if not opts:
            return None
        name, _ = self.rng.choice(opts)
        return f"{name}({self.rng.randint(1, 3)})"

    # -- statements ----------------------------------------------------------------------------

    def block(self, n: int, d: int) -> list[str]:
        """n statements in a new scope; never empty."""
        self.push()
        self.depth += 1
        out = []
        for _ in range(n):
            out += self.stmt(d)
        self.depth -= 1
        self.pop()
        return out or ["pass"]

    @staticmethod
    def indent(lines: list[str]) -> list[str]:
        """The lines indented by one level."""
        return ["    " + l for l in lines]

    def stmt(self, d: int) -> list[str]:
        """One random statement (lines) allowed here; d bounds the nesting below it."""
        r = self.rng
        nested_ok = self.depth < 2 and d > 0
        table = [
            (12, self.s_assign),
            (8, self.s_reassign),
            (6, self.s_inplace),
            (6, self.s_container),
            (4, self.s_print),
            (4, self.s_item),
            (5 if nested_ok else 0, self.s_if_const),
            (5 if nested_ok else 0, self.s_if_tensor),
            (5 if nested_ok and self.loops < 2 else 0, self.s_for),
            (2 if nested_ok and self.loops < 2 else 0, self.s_while),
            (4 if nested_ok else 0, self.s_try),
            (4 if self.depth == 0 and self.fn_level == 1 else 0, self.s_closure),
            (2 if self.use_box else 0, self.s_box),
            (2 if self.loops and not self.in_finally else 0, self.s_break),
            (1 if nested_ok else 0, self.s_with),
            (1 if self.global_names and self.fn_level == 1 else 0, self.s_global),
            (1, self.s_misc),
            (1 if self.fn_level == 1 and self.depth > 0 and not self.loops else 0, self.s_early_return),
        ]
        if self.exclude:
            table = [(0 if fn.__name__[2:] in self.exclude else w, fn) for w, fn in table]
        total = sum(w for w, _ in table)
        x = r.random() * total
        for w, fn in table:
            if x < w:
                return fn(d)
            x -= w
        return self.s_assign(d)

    def s_assign(self, d: int) -> list[str]:
        """A new variable of a random type."""
        r = self.rng
        ty = r.choice(["T", "T", "T", "S", "i", "f", "b", "L", "D", "P", "M", "V"]
                      + (["O"] if self.use_box else []))
        if ty == "D":
            src, keys = self.e_D(2)
            name = self.fresh("d")
            self.bind(name, "D")
            self.dkeys[name] = keys
            return [f"{name} = {src}"]
        if ty == "V":
            dv = self.pick("D")
            if not dv:
                return self.s_assign(d)
            name = self.fresh("vw")
            self.bind(name, "V")
            self.vorigin[name] = dv
            return [f"{name} = {dv}.values()"]
        if ty == "P":
            codes = "".join(r.choice("TTif") for _ in range(r.randint(2, 3)))
            name = self.fresh("p")
            src = "(" + ", ".join(self.expr(c, 1) for c in codes) + ")"
            helper = [h for h in self.helpers if h[1] == "multi"]
            if helper and r.random() < 0.3:
                codes, src = "TT", f"{helper[0][0]}({self.e_T(1)}, {self.e_T(1)})"
            self.bind(name, "P:" + codes)
            self.ptypes[name] = codes
            return [f"{name} = {src}"]
        if ty == "O":
            name = self.fresh("o")
            src = f"{r.choice(['Box', 'Box', 'Box2'])}({self.e_T(1)}, {self.e_f(1)})"
            self.bind(name, "O")
            return [f"{name} = {src}"]
        prefix = {"T": "t", "S": "s", "i": "n", "f": "v", "b": "c", "L": "l", "M": "m"}[ty]
        src = self.expr(ty, r.randint(1, 3))
        name = self.fresh(prefix)
        self.bind(name, ty)
        if ty == "T" and r.random() < 0.08:
            other = self.fresh("t")
            self.bind(other, "T")
            return [f"{name} = {other} = {src}"]
        return [f"{name} = {src}"]

    def s_reassign(self, d: int) -> list[str]:
        """Rebind a variable of this function (plain or augmented assignment, or a swap)."""
        r = self.rng
        ty = r.choice(["T", "T", "S", "i", "f"])
        name = self.pick(ty, writable=True)
        if not name:
            return self.s_assign(d)
        if ty == "T" and r.random() < 0.1:
            other = self.pick("T", writable=True)
            if other and other != name:
                return [f"{name}, {other} = {other}, {name}"]
        if r.random() < 0.4:
            op = r.choice(["+=", "-=", "*="])
            val = self.expr(ty if ty != "S" else r.choice(["S", "f"]), r.randint(0, 2))
            if ty in ("i",):
                val = self.e_i(1)
            return [f"{name} {op} {val}"]
        return [f"{name} = {self.expr(ty, r.randint(1, 3))}"]

    def s_inplace(self, d: int) -> list[str]:
        """An in-place tensor operation (some through an alias or a view)."""
        r = self.rng
        t = self.pick("T")
        k = r.randrange(9)
        if k == 0:
            return [f"{t}.add_({self.e_T(1)})"]
        if k == 1:
            return [f"{t}.mul_({self.lit_f()})"]
        if k == 2:
            return [f"{t}.clamp_(-2.0, 2.0)"]
        if k == 3:
            return [f"{t}[0] = {self.e_f(1)}"]
        if k == 4:
            return [f"{t}.copy_({self.e_T(2)})"]
        if k == 5:
            return [f"{t}.sub_({self.e_S(1)}, alpha=0.5)"]
        if k == 6:
            name = self.fresh("t")
            self.bind(name, "T")
            extra = []
            if r.random() < 0.5:
                c = self.fresh("c")
                self.bind(c, "b")
                extra = [f"{c} = {name} is {t}"]
            return [f"{name} = {t}.{r.choice(['add_', 'mul_', 'sub_'])}({self.lit_f()})"] + extra
        if k == 7:
            name = self.fresh("t")
            self.bind(name, "T")
            return [f"{name} = {t}.view(-1).view({self.shape_src()})", f"{t}.add_(1)"]
        s = self.pick("S", writable=True)
        if s:
            return [f"{s}.add_({self.lit_f()})"]
        return [f"{t}.mul_({self.e_S(1)})"]

    def can_resize(self, name) -> bool:
        """Whether a statement here may add items to container `name` (not while a loop
        iterates it, not from a closure, which may run inside such a loop)."""
        return name not in self.frozen and self.fn_level != 2

    def s_container(self, d: int) -> list[str]:
        """A list or dict method call, item store, unpacking or star-unpacking."""
        r = self.rng
        l = self.pick("L")
        dv = self.pick("D")
        if l and not self.can_resize(l):
            l = None
        if dv and not self.can_resize(dv):
            dv = None
        k = r.randrange(14)
        if k < 2 and l:
            return [f"{l}.append({self.e_T(2)})"]
        if k == 2 and l:
            return [f"{l}.extend([{self.e_T(1)}, {self.e_T(1)}])"]
        if k == 3 and l:
            return [f"{l}.insert(0, {self.e_T(1)})"]
        if k == 4 and l:
            return [f"{l}[{r.choice(['0', '-1'])}] = {self.e_T(2)}"]
        if k in (5, 6) and dv:
            key = r.choice(KEYS)
            if self.depth == 0:
                self.dkeys.setdefault(dv, set()).add(key)
            return [f"{dv}[{key!r}] = {self.e_T(2)}"]
        if k == 7 and dv:
            key = r.choice(KEYS)
            if self.depth == 0:
                self.dkeys.setdefault(dv, set()).add(key)
            return [r.choice([f"{dv}.update({{{key!r}: {self.e_T(1)}}})", f"{dv}.update({key}={self.e_T(1)})"])]
        if k == 8 and l:
            a, rest = self.fresh("t"), self.fresh("m")
            self.bind(a, "T")
            self.bind(rest, "M")
            if r.random() < 0.5:
                return [f"{a}, *{rest} = {l}"]
            return [f"*{rest}, {a} = {l}"]
        if k == 9:
            p = self.pick("P")
            if p:
                names = []
                for c in self.ptypes[p]:
                    nm = self.fresh({"T": "t", "i": "n", "f": "v"}[c])
                    self.bind(nm, c)
                    names.append(nm)
                return [f"{', '.join(names)} = {p}"]
        if k == 10:
            m = self.pick("M", writable=True)
            if m and self.can_resize(m):
                return [f"{m}.append({self.e_T(1)})"]
        if k == 11 and dv:
            name = self.fresh("n")  # len() is generated after: no expression in between
            self.bind(name, "i")
            return [f"{name} = len({dv})"]
        if k == 12 and dv and l:
            return [f"for k_, v_ in {dv}.items():", f"    {l}.append(v_ * {self.lit_f()})"]
        if k == 13:
            vw = self.pick("V")
            dv = self.vorigin.get(vw)
            if vw and dv and self.can_resize(dv):
                name = self.fresh("n")
                self.bind(name, "i")
                key = r.choice(KEYS)
                if self.depth == 0:
                    self.dkeys.setdefault(dv, set()).add(key)
                return [f"{dv}[{key!r}] = {self.e_T(1)}", f"{name} = len({vw})"]
        src = self.e_L(2)
        name = self.fresh("l")
        self.bind(name, "L")
        return [f"{name} = {src}"]

    def s_print(self, d: int) -> list[str]:
        """A print() call (a graph break)."""
        r = self.rng
        tag = f"'p{self.n}'"
        self.n += 1
        k = r.randrange(4)
        if k == 0:
            return [f"print({tag}, {self.e_any(1)})"]
        if k == 1:
            return [f"print(f\"{{{self.e_i(1)}}} {{{self.e_f(1)}:.3f}}\")"]
        if k == 2:
            seq = self.pick("L") or self.pick("D")
            if seq:
                return [f"print({tag}, {seq})"]
        return [f"print({tag}, {self.e_any(2)}, sep='|')"]

    def s_item(self, d: int) -> list[str]:
        """A Python number from a tensor (.item(): a graph break)."""
        r = self.rng
        if r.random() < 0.7:
            src = f"{self.e_S(2)}.item()"
            name = self.fresh("v")
            self.bind(name, "f")
            return [f"{name} = {src}"]
        src = f"int({self.e_T(1)}.argmax().item())"
        name = self.fresh("n")
        self.bind(name, "i")
        return [f"{name} = {src}"]

    def s_if_const(self, d: int) -> list[str]:
        """An if/elif/else on Python values."""
        r = self.rng
        out = [f"if {self.e_b(2)}:"] + self.indent(self.block(r.randint(1, 3), d - 1))
        if r.random() < 0.3:
            out += [f"elif {self.e_b(1)}:"] + self.indent(self.block(r.randint(1, 2), d - 1))
        if r.random() < 0.5:
            out += ["else:"] + self.indent(self.block(r.randint(1, 2), d - 1))
        return out

    def s_if_tensor(self, d: int) -> list[str]:
        """An if/else on tensor data (a graph break)."""
        r = self.rng
        out = [f"if {self.tensor_cond(1)}:"] + self.indent(self.block(r.randint(1, 3), d - 1))
        if r.random() < 0.5:
            out += ["else:"] + self.indent(self.block(r.randint(1, 2), d - 1))
        return out

    def s_for(self, d: int) -> list[str]:
        """A for loop over a range, a list, enumerate, dict items or zip (with an else now and then)."""
        r = self.rng
        k = r.randrange(6)
        seq = self.pick("L") or self.pick("A")
        dv = self.pick("D")
        # the iterable is generated in the enclosing scope, then the targets are bound
        if k == 0 or (k in (1, 2) and not seq) or (k == 3 and not dv):
            targets = [(self.fresh("j"), "i")]
            it = f"range({r.choice([self.lit_i(), '1, 4', '3', 'min(' + self.e_i(0) + ', 3)'])})"
        elif k == 1:
            targets, it = [(self.fresh("u"), "T")], seq
        elif k == 2:
            targets, it = [(self.fresh("j"), "i"), (self.fresh("u"), "T")], f"enumerate({seq})"
        elif k == 3:
            targets, it = [(self.fresh("k"), "str"), (self.fresh("u"), "T")], f"{dv}.items()"
        elif k == 4:
            other = seq or "[" + self.e_T(0) + "]"
            it = f"zip({other}, [{self.e_T(1)}, {self.e_T(1)}])"
            targets = [(self.fresh("u"), "T"), (self.fresh("u"), "T")]
        else:
            m = self.pick("M") or self.pick("R")
            it = m or seq or "[" + self.e_T(0) + "]"
            targets = [(self.fresh("u"), "T")]
        head = f"for {', '.join(n for n, _ in targets)} in {it}:"
        self.loops += 1
        self.push()
        for name, ty in targets:
            self.bind(name, ty)
        # the containers iterated here are not resized by the body (a list that grows while
        # it is iterated would not end; a dict raises)
        frozen = self.frozen
        self.frozen = frozen | {w for w in self.visible() if f" {w}" in head or f"({w}" in head}
        body = self.block(r.randint(1, 3), d - 1)
        self.frozen = frozen
        self.pop()
        self.loops -= 1
        out = [head] + self.indent(body)
        if r.random() < 0.15:
            out += ["else:"] + self.indent(self.block(1, 0))
        return out

    def s_while(self, d: int) -> list[str]:
        """A bounded while loop."""
        r = self.rng
        j = self.fresh("w")
        self.loops += 1
        saved = self.in_while
        self.in_while = True
        body = self.block(r.randint(1, 3), d - 1)
        self.in_while = saved
        self.loops -= 1
        return [f"{j} = 0", f"while {j} < {r.randint(1, 3)}:", f"    {j} += 1"] + self.indent(body)

    def s_break(self, d: int) -> list[str]:
        """A conditional break or continue."""
        r = self.rng
        word = r.choice(["break", "continue"])
        cond = self.e_b(1) if r.random() < 0.7 else self.tensor_cond(0)
        return [f"if {cond}:", f"    {word}"]

    RAISERS = [
        ("raise ValueError('boom')", "ValueError"),
        ("raise KeyError('k')", "KeyError"),
        ("raise RuntimeError('rt')", "RuntimeError"),
        ("_ = {}['missing']", "KeyError"),
        ("_ = [1, 2][5]", "IndexError"),
        ("_ = int('abc')", "ValueError"),
        ("_ = 1 // 0", "ZeroDivisionError"),
        ("assert False, 'nope'", "AssertionError"),
        ("_ = None.foo", "AttributeError"),
        ("raise TypeError('ty')", "TypeError"),
    ]
    PARENTS = {"KeyError": ["LookupError", "Exception"], "IndexError": ["LookupError", "Exception"],
               "ZeroDivisionError": ["ArithmeticError", "Exception"]}

    def raiser(self) -> tuple[str, str]:
        """A statement that raises and the type of what it raises."""
        r = self.rng
        k = r.randrange(14)
        if k < len(self.RAISERS):
            return self.RAISERS[k]
        if k == 10:
            dv = self.pick("D")
            if dv:
                return f"_ = {dv}['zz']", "KeyError"
        if k == 11:
            l = self.pick("L")
            if l:
                return f"_ = {l}[100]", "IndexError"
        if k == 12:
            h = [c for c in self.helpers if c[1] == "raise"]
            if h:
                return f"_ = {h[0][0]}({self.e_T(1)}, 5)", "ValueError"
        if k == 13 and self.use_box:
            o = self.pick("O")
            if o:
                return f"_ = {o}.missing", "AttributeError"
        return "raise ValueError('boom2')", "ValueError"

    def s_try(self, d: int) -> list[str]:
        """A try statement whose body raises (sometimes conditionally) and whose handler
        catches it (or, now and then, does not)."""
        r = self.rng
        rs, exc = self.raiser()  # in the enclosing scope: it may go before the try body's statements
        self.push()
        self.depth += 1
        stmts = [self.stmt(d - 1) for _ in range(r.randint(0, 2))]
        self.depth -= 1
        self.pop()
        if r.random() < 0.4:
            cond = self.e_b(1) if r.random() < 0.6 else self.tensor_cond(0)
            rs_lines = [f"if {cond}:", "    " + rs]
        else:
            rs_lines = [rs]
        if r.random() < 0.3 and stmts:
            stmts.insert(r.randint(0, len(stmts)), rs_lines)
        else:
            stmts.append(rs_lines)
        body = [line for st in stmts for line in st]
        if r.random() < 0.15:
            # an except clause that does not match: the exception goes on to an outer handler
            # or out of f (eager raises; the compiled function must raise the same type)
            catch = r.choice(["OSError", "StopIteration"]) if exc != "OSError" else "KeyError"
        else:
            catch = r.choice([exc, exc, f"({exc}, OSError)"] + self.PARENTS.get(exc, ["Exception"]))
        if r.random() < 0.15:
            return ["with contextlib.suppress(" + catch.strip("()") + "):"] + self.indent(body)
        out = ["try:"] + self.indent(body)
        ename = self.fresh("e")
        handler = self.block(r.randint(1, 2), d - 1)
        if r.random() < 0.4:
            handler = [r.choice([f"print('caught', type({ename}).__name__)",
                                 f"print('msg', str({ename})[:20])", f"print({ename}.args[:1])"])] + handler
        out += [f"except {catch} as {ename}:"] + self.indent(handler)
        if r.random() < 0.2:
            out += ["else:"] + self.indent(self.block(1, d - 1))
        if r.random() < 0.2:
            saved = self.in_finally
            self.in_finally = True
            out += ["finally:"] + self.indent(self.block(1, 0))
            self.in_finally = saved
        return out

    def s_with(self, d: int) -> list[str]:
        """A grad-mode with-block."""
        r = self.rng
        head = r.choice(["with torch.no_grad():", "with torch.enable_grad():",
                         "with torch.set_grad_enabled(False):"])
        return [head] + self.indent(self.block(r.randint(1, 2), d - 1))

    def s_closure(self, d: int) -> list[str]:
        """A nested function: a nonlocal counter, a lambda, a closure over a cell assigned after it, a nested closure."""
        r = self.rng
        k = r.randrange(6)
        if k == 0:
            cnt, name = self.fresh("n"), self.fresh("bump")
            self.bind(cnt, "i")
            self.callables.append((name, "bump"))
            return [f"{cnt} = 0", f"def {name}(k):", f"    nonlocal {cnt}", f"    {cnt} += k",
                    f"    return {cnt}"]
        if k == 1:
            name = self.fresh("lam")
            out = [f"{name} = lambda z: z * {self.lit_f()} + {self.e_T(1)}"]
            self.callables.append((name, "lam"))
            return out
        if k == 2:
            # a closure that reads a cell assigned after the closure is made
            name, late = self.fresh("g"), self.fresh("t")
            out = [f"def {name}(z, s=1.0):", f"    return z * s + {late}", f"{late} = {self.e_T(2)}"]
            self.bind(late, "T")
            self.callables.append((name, "clo"))
            return out
        if k == 3:
            name, inner = self.fresh("g"), self.fresh("g")
            cap = self.pick("T")
            return self._closure_fn(name, d, pre=[f"def {inner}(w):", f"    return w * 2 + {cap}"],
                                    extra_callable=inner)
        return self._closure_fn(self.fresh("g"), d)

    def _closure_fn(self, name, d, pre=(), extra_callable=None) -> list[str]:
        r = self.rng
        saved = (self.in_closure, self.fn_level, self.depth, self.loops)
        self.push(readonly_below=True)
        readonly_saved = [sc.readonly for sc in self.scopes]
        self.bind("z", "T")
        self.bind("s", "f")
        if extra_callable:
            self.callables.append((extra_callable, "lam"))
        self.in_closure, self.fn_level, self.depth, self.loops = True, 2, 0, 0
        body = list(pre)
        for _ in range(r.randint(1, 3)):
            body += self.stmt(min(d, 1))
        body.append(f"return {self.e_T(2)}")
        if extra_callable:
            self.callables.pop()
        self.pop()
        for sc, ro in zip(self.scopes, readonly_saved):
            sc.readonly = False
        self.in_closure, self.fn_level, self.depth, self.loops = saved
        self.callables.append((name, "clo"))
        return [f"def {name}(z, s=1.0):"] + self.indent(body)

    def s_box(self, d: int) -> list[str]:
        """An attribute read, write or method call on a Box."""
        r = self.rng
        o = self.pick("O")
        if not o:
            src = f"Box({self.e_T(1)}, {self.e_f(1)})"
            name = self.fresh("o")
            self.bind(name, "O")
            return [f"{name} = {src}"]
        k = r.randrange(5)
        if k == 0:
            return [f"{o}.k = {self.e_f(1)}"]
        if k == 1:
            return [f"{o}.w = {self.e_T(2)}"]
        if k == 2:
            return [f"{o}.w.add_({self.lit_f()})"]
        if k == 3:
            return [f"{o}.k += {self.lit_f()}"]
        src = f"{o}.scale({self.e_T(1)})"
        name = self.fresh("t")
        self.bind(name, "T")
        return [f"{name} = {src}"]

    def s_global(self, d: int) -> list[str]:
        """An update of the module's global state."""
        r = self.rng
        name, kind = r.choice(self.global_names)
        if kind == "list":
            return [f"{name}.append({self.e_i(1)})"]
        if kind == "dict":
            return [f"{name}['calls'] += 1"]
        return [f"{name} = {name} + {self.lit_i()}"]

    def s_misc(self, d: int) -> list[str]:
        """An assert, a del, a string, or a match statement."""
        r = self.rng
        k = r.randrange(5)
        if k == 0:
            return [f"assert {self.e_T(0)}.shape == {self.shape_src()}"]
        if k == 1:
            name = self.fresh("tmp")
            return [f"{name} = {self.e_T(1)}", f"print('tmp', {name}.sum().item() > 0)", f"del {name}"]
        if k == 2:
            name = self.fresh("st")
            return [f"{name} = 'x' + str({self.e_i(1)}) * 2", f"print({name})"]
        if k == 3:
            subject = self.e_i(1)
            name = self.fresh("n")
            self.bind(name, "i")
            return [f"match {subject}:", f"    case 0:", f"        {name} = 10",
                    f"    case 1 | 2:", f"        {name} = 20", f"    case _:", f"        {name} = 30"]
        return ["pass"]

    def s_early_return(self, d: int) -> list[str]:
        """A return from inside a block."""
        return [f"return {self.return_value()}"]

    # -- functions ------------------------------------------------------------------------------

    def return_value(self) -> str:
        """f's return value: some variables in a tuple, list or dict, or one alone."""
        r = self.rng
        cands = [n for n in self.visible() if self.type_of(n) in ("T", "S", "i", "f", "b", "L", "D", "M")
                 or self.type_of(n).startswith("P:") or self.type_of(n) == "O"]
        picked = r.sample(cands, min(len(cands), r.randint(1, 4)))
        k = r.randrange(6)
        if k == 0 and len(picked) == 1:
            return picked[0]
        if k == 1:
            return "{" + ", ".join(f"'r{i}': {p}" for i, p in enumerate(picked)) + "}"
        if k == 2:
            return "[" + ", ".join(picked) + "]"
        return "(" + ", ".join(picked) + ",)"

    def type_of(self, name: str) -> str:
        """The type of a visible variable ('' if none)."""
        for sc in reversed(self.scopes):
            if name in sc.vars:
                return sc.vars[name]
        return ""

    def helper(self, idx: int) -> list[str]:
        """A module-level helper function (its kind decides its signature and how it is called)."""
        r = self.rng
        name = f"h{idx}"
        kind = r.choice(["T2", "T2", "Tstar", "kw", "raise", "rec", "gen", "multi", "partial"])
        self.push()
        self.depth, self.loops, self.fn_level = 0, 0, 0
        if kind == "gen":
            self.pop()
            self.helpers.append((name, kind))
            m = r.choice(["u * 2", "u.sin()", "u + 1"])
            return [f"def {name}(seq):", f"    for u in seq:", f"        yield {m}"]
        if kind == "rec":
            self.pop()
            self.helpers.append((name, kind))
            return [f"def {name}(a, k):", "    if k <= 0:", "        return a",
                    f"    return {name}(a * 0.5 + 1, k - 1)"]
        if kind == "raise":
            self.pop()
            self.helpers.append((name, kind))
            return [f"def {name}(a, lim):", "    if lim > 2:", "        raise ValueError('too big')",
                    "    return a * lim"]
        if kind == "partial":
            inner = [h for h in self.helpers if h[1] == "T2"]
            if inner:
                self.pop()
                self.helpers.append((name, kind))
                return [f"{name} = functools.partial({inner[0][0]}, b=torch.ones({self.shape_src()}), scale=0.5)"]
            kind = "T2"
        if kind in ("T2", "partial"):
            sig = "a, b, scale=1.0"
            self.bind("a", "T")
            self.bind("b", "T")
            self.bind("scale", "f")
        elif kind == "Tstar":
            sig = "a, *rest, k=2"
            self.bind("a", "T")
            self.bind("rest", "R")
            self.bind("k", "i")
        elif kind == "kw":
            sig = "a, **kw"
            self.bind("a", "T")
        else:  # multi
            sig = "a, b"
            self.bind("a", "T")
            self.bind("b", "T")
        body = []
        if kind == "kw":
            body += ["for key in sorted(kw):", "    a = a + kw[key] * len(key)"]
        for _ in range(r.randint(1, 4)):
            body += self.stmt(1)
        if kind == "multi":
            body.append(f"return {self.e_T(2)}, {self.e_T(2)}")
        else:
            body.append(f"return {self.e_T(2)}")
        self.pop()
        self.helpers.append((name, kind))
        return [f"def {name}({sig}):"] + self.indent(body)

    def program(self) -> str:
        """The whole program's source."""
        r = self.rng
        out = [PRELUDE]
        if self.use_box:
            out.append(BOX_SRC)
        if r.random() < 0.25:
            g = r.choice([("TRACE", "list", "TRACE = []"), ("STATE", "dict", "STATE = {'calls': 0}"),
                          ("COUNT", "int", "COUNT = 0")])
            self.global_names.append(g[:2])
            out.append(g[2] + "\n")
        for i in range(r.randint(0, 3)):
            out.append("\n".join(self.helper(i)) + "\n")
        # f's parameters and the inputs
        self.push()
        self.depth, self.loops, self.fn_level = 0, 0, 1
        params, args, kwargs = ["x", "y"], ["torch.randn(SHAPE, generator=g)"] * 2, []
        self.bind("x", "T")
        self.bind("y", "T")
        style = r.randrange(4)
        n_val = r.randint(0, 4)
        if style == 3:
            params.append("*")
            params.append(f"n={r.randint(0, 4)}")
            kwargs.append(("n", str(n_val)))
        else:
            params.append("n")
            args.append(str(n_val))
        self.bind("n", "i")
        extra = []
        if r.random() < 0.3:
            extra.append(("lst", "L", "[torch.randn(SHAPE, generator=g) for _ in range(%d)]" % r.randint(1, 3)))
        if r.random() < 0.25:
            extra.append(("cfg", "D", "{'a': torch.randn(SHAPE, generator=g), 'b': torch.randn(SHAPE, generator=g)}"))
        if self.use_box and r.random() < 0.4:
            extra.append(("box", "O", "Box(torch.randn(SHAPE, generator=g), 1.5)"))
        if r.random() < 0.2:
            extra.append(("flag", "b", r.choice(["True", "False"])))
        if r.random() < 0.2:
            extra.append(("scale", "f", r.choice(["0.5", "2.0", "-1.5"])))
        for pname, ty, val in extra:
            if style == 3:
                params.append(pname)
                kwargs.append((pname, val))
            else:
                params.append(pname)
                args.append(val)
            self.bind(pname, ty)
            if ty == "D":
                self.dkeys[pname] = {"a", "b"}
        if style == 1:
            params.append("*args")
            self.bind("args", "A")
            args += ["torch.randn(SHAPE, generator=g)"] * r.randint(1, 2)
        elif style == 2:
            params.append("**kw")
            kwargs.append(("alpha", "torch.randn(SHAPE, generator=g)"))
        if style == 3 and not kwargs:
            kwargs.append(("n", "1"))
        body = []
        if ("COUNT", "int") in self.global_names:
            body.append("global COUNT")
        if style == 2:
            body += ["for key in kw:", "    x = x + kw[key]"]
        for _ in range(r.randint(4, 12)):
            body += self.stmt(2)
        if r.random() < 0.04:
            body += [f"if {self.e_b(1)}:", "    raise ValueError('uncaught')"]
        body.append(f"return {self.return_value()}")
        self.pop()
        out.append(f"def f({', '.join(params)}):\n" + "\n".join(self.indent(body)) + "\n")
        base = r.randrange(1000)
        shape = self.shape_src()
        arg_src = ", ".join(a.replace("SHAPE", shape) for a in args)
        kw_src = ", ".join(f"{k!r}: {v.replace('SHAPE', shape)}" for k, v in kwargs)
        out.append("def make_inputs(variant):\n"
                   f"    g = torch.Generator().manual_seed({base} + variant)\n"
                   f"    args = ({arg_src},)\n"
                   f"    kwargs = {{{kw_src}}}\n"
                   "    return args, kwargs\n")
        return "\n".join(out)


STATEMENT_KINDS = ("assign", "reassign", "inplace", "container", "print", "item", "if_const",
                   "if_tensor", "for", "while", "try", "closure", "box", "break", "with", "global",
                   "misc", "early_return")


def generate(seed: int, index: int, exclude=()) -> str:
    """The source of program number ``index`` of the run with seed ``seed`` (deterministic).

    exclude: statement kinds (STATEMENT_KINDS) never generated, e.g. ("closure",) to look past
    a known bug that closures trigger; the same seed, index and exclude give the same text."""
    bad = set(exclude) - set(STATEMENT_KINDS)
    if bad:
        raise ValueError(f"unknown statement kinds {sorted(bad)}; valid: {', '.join(STATEMENT_KINDS)}")
    rng = random.Random(f"cdynamo-fuzz:{seed}:{index}")
    return ProgramGenerator(rng, exclude).program()


if __name__ == "__main__":
    import sys
    s = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    i = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print(generate(s, i))
