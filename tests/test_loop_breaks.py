"""Graph breaks inside for/while loops (issue 7, Scope 1).

torch._dynamo skips a whole frame when a graph break happens inside a loop ("graph break in
a for/while loop"). cdynamo breaks there like anywhere else: the graph so far is compiled,
the instruction runs in Python, and the loop continues in resume functions, one iteration per
call, called through a trampoline so that a long loop does not nest calls
(src/cdynamo/csrc/resume.h). ``cdynamo.config.graph_break_in_loops = False`` restores
torch._dynamo's behaviour.

Each program is checked against eager (results, printed output, exceptions), against
torch._dynamo (cdynamo's graphs hold at least as many FX call nodes as torch._dynamo's), for
a cache hit on the second call, and for the top frame being compiled, not run unmodified.
"""
import copy
import sys
import traceback

import pytest
import torch
import torch._dynamo
import torch.nn as nn

import cdynamo
from helpers import CALL_OPS, CountingBackend, assert_same


@pytest.fixture(autouse=True)
def _clean():
    torch._dynamo.reset()
    cdynamo.reset()
    cdynamo.reset_counters()
    yield
    torch._dynamo.reset()
    cdynamo.reset()


class RunCounter(CountingBackend):
    """A CountingBackend that also counts the FX call nodes its graphs execute
    (``executed``): what a call ran inside compiled graphs rather than in Python."""

    def __init__(self):
        super().__init__()
        self.executed = 0

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        n = sum(1 for node in gm.graph.nodes if node.op in CALL_OPS)

        def run(*args):
            self.executed += n
            return gm.forward(*args)
        return run


def _outcome(fn, args):
    """(result, None) or (None, exception) of fn(*deep copies of args)."""
    try:
        return fn(*copy.deepcopy(args)), None
    except Exception as e:   # the program's own exception is part of its behaviour
        return None, e


def _same_outcome(got, expected, what):
    (res, exc), (e_res, e_exc) = got, expected
    if e_exc is not None:
        assert exc is not None and type(exc) is type(e_exc) and exc.args == e_exc.args, \
            f"{what}: expected {e_exc!r}, got {exc!r} / {res!r}"
    else:
        assert exc is None, f"{what}: raised {exc!r}"
        assert_same(res, e_res, what, exact=False)


def loop_case(fn, *args, min_graphs=1):
    """Run fn eagerly, under torch._dynamo and twice under cdynamo; check results, a cache hit
    on cdynamo's second call, no frame run unmodified and no cache-limit hit, and that the
    second call ran at least as many FX call nodes inside compiled graphs as torch._dynamo's
    second call (where torch._dynamo skips the frame, it runs none). Returns (cdynamo's,
    torch._dynamo's) RunCounter."""
    expected = _outcome(fn, args)
    dyn = RunCounter()
    d_fn = torch.compile(fn, backend=dyn)
    _same_outcome(_outcome(d_fn, args), expected, "torch._dynamo")
    dyn.executed = 0
    _same_outcome(_outcome(d_fn, args), expected, "torch._dynamo, 2nd call")
    torch._dynamo.reset()
    cdy = RunCounter()
    compiled = cdynamo.compile(fn, backend=cdy)
    _same_outcome(_outcome(compiled, args), expected, "cdynamo, 1st call")
    compiles = cdynamo.counters()["compiles"]
    cdy.executed = 0
    _same_outcome(_outcome(compiled, args), expected, "cdynamo, 2nd call")
    assert cdynamo.counters()["compiles"] == compiles, "2nd call was not a cache hit"
    assert cdy.frame_count >= min_graphs
    assert cdy.executed >= dyn.executed, (cdy.executed, dyn.executed, cdy.graphs, dyn.graphs)
    assert cdynamo.counters()["unmodified"] == 0
    assert cdynamo.counters()["cache_limit_hits"] == 0
    return cdy, dyn


A = torch.randn(4, generator=torch.Generator().manual_seed(0))


# ---- for loops over what the trace iterates ------------------------------------------------

def branch_in_range_loop(x):
    for i in range(6):
        if x.sum() > 0:
            x = x + i
        else:
            x = x - i
    return x


@pytest.mark.parametrize("sign", [1, -1])
def test_branch_on_tensor_in_range_loop(sign):
    cdy, dyn = loop_case(branch_in_range_loop, sign * A)
    assert dyn.frame_count == 0 and cdy.executed >= 6   # torch._dynamo skips the frame


def test_the_frame_is_compiled_not_skipped():
    cdynamo.reset_counters()
    out = cdynamo.explain(branch_in_range_loop)(A)
    assert out.graph_count >= 2 and not out.unmodified_frames
    assert cdynamo.counters()["unmodified"] == 0


def printing_loop(x):
    for i in range(3):
        print("step", i)
        x = x * 2 + i
    return x


def test_print_in_loop_prints_in_order(capsys):
    expected = printing_loop(A)
    eager_out = capsys.readouterr().out
    compiled = cdynamo.compile(printing_loop, backend="eager")
    assert_same(compiled(A), expected)
    assert capsys.readouterr().out == eager_out == "step 0\nstep 1\nstep 2\n"


def break_continue_else(x):
    n = 0
    for i in range(8):
        if x[i % 4] > 0.5:
            continue
        x = x + 1
        n += 1
        if x.sum() > 12:
            break
    else:
        x = x * 100
    return x, n, i


@pytest.mark.parametrize("shift", [0.0, 10.0, -10.0])
def test_break_continue_and_for_else(shift):
    loop_case(break_continue_else, A + shift)


def return_inside_loop(x):
    for i in range(10):
        x = x * 2
        if x.sum() > 50:
            return x, i
    return x, -1


@pytest.mark.parametrize("x", [A.abs() + 1, -A.abs()], ids=["returns", "falls_through"])
def test_return_inside_loop(x):
    loop_case(return_inside_loop, x)


def nested_loops(x):
    for i in range(3):
        for j in range(2):
            x = x + i * j
            if x.sum() > 0:
                x = x - 1
    return x


def test_break_in_inner_loop():
    loop_case(nested_loops, A)


def dict_items_loop(x):
    weights = {"a": 1.0, "b": 2.0, "c": 3.0}
    for k, w in weights.items():
        if x.sum() > 0:
            x = x * w
        else:
            x = x + w
    return x


def zip_enumerate_loop(xs, ys):
    out = []
    for i, (a, b) in enumerate(zip(xs, ys)):
        if (a - b).sum() > 0:
            out.append(a * i)
        else:
            out.append(b - i)
    return out


def tensor_rows_loop(x):
    total = x.new_zeros(())
    for row in x:
        if row.sum() > 0:
            total = total + row.sum()
    return total


@pytest.mark.parametrize("fn,args", [
    (dict_items_loop, (A,)),
    (zip_enumerate_loop, ([A, A + 1, -A], [-A, A, A + 2])),
    (tensor_rows_loop, (torch.randn(5, 3, generator=torch.Generator().manual_seed(1)),)),
], ids=["dict_items", "zip_enumerate", "tensor_rows"])
def test_loops_over_iterables(fn, args):
    loop_case(fn, *args)


def item_in_loop(x):
    s = 0.0
    for i in range(3):
        s += x[i].item()          # .item() is a graph break (capture_scalar_outputs off)
        x = x * 2
    return x, s


def test_item_in_loop():
    loop_case(item_in_loop, A)


# ---- the loop's iterator crossing a break: traced by the resume functions ------------------

class PrintingStack(nn.Module):
    def __init__(self, n=4, d=8):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
            print(end="")            # a graph break in every iteration
        return x


def test_loop_iterator_handed_to_a_resume_function_is_traced():
    """The for loop's iterator reaches the resume function as a tuple iterator of the items
    left; the resume function's trace takes its next item (no break at its FOR_ITER, which
    made a graph-less resume function per iteration, CDB0013), and one entry serves every
    iteration but the last (the loop's end is another trace)."""
    torch.manual_seed(0)
    model, x = PrintingStack(), torch.randn(2, 8)
    out = cdynamo.explain(model)(x)
    assert {b.code for b in out.break_reasons} == {"CDB0003"}, out.break_reasons
    # traces: the frame (layer 0) and one resume function for layers 1-3 (then the loop's
    # end, a trace without ops): two graphs, each breaking at its print
    assert out.graph_break_count == 2 and out.graph_count == 2
    cdynamo.reset_counters()
    cdy, _ = loop_case(model, x)
    assert cdy.frame_count == 2 and cdynamo.counters()["compiles"] == 3


def takes_two(it, x):
    a = next(it)
    b = next(it)
    return x * a + b


def test_tuple_iterator_argument_is_advanced_as_in_eager():
    """A tuple iterator passed in is traced (its items guarded as taken) and left advanced as
    far as eager leaves it; the same entry serves another iterator with other items left."""
    cnt = CountingBackend()
    compiled = cdynamo.compile(takes_two, backend=cnt)
    for items in [(1.0, 2.0, 3.0), (1.0, 2.0, 3.0, 4.0)]:
        it_e, it_c = iter(items), iter(items)
        assert_same(compiled(it_c, A), takes_two(it_e, A))
        assert list(it_c) == list(it_e)
    assert cnt.frame_count == 1 and cdynamo.counters()["compiles"] == 1
    exhausted = iter((1.0,))
    with pytest.raises(StopIteration):
        compiled(exhausted, A)
    out = cdynamo.explain(takes_two)(iter((5, 6)), A)
    assert out.graph_break_count == 0


def iterator_local_and_loop(t, x):
    it = iter(t)
    for a in it:                  # the loop's iterator is also the local `it`
        x = x + a
        print(end="")
        if a > 1:
            break
    return x, list(it), next(it, None)


def test_loop_iterator_that_is_also_a_local_stays_one_object():
    expected = iterator_local_and_loop((0, 1, 2, 3, 4), A)
    compiled = cdynamo.compile(iterator_local_and_loop, backend="eager")
    for _ in range(2):
        assert_same(compiled((0, 1, 2, 3, 4), A), expected)
    out = cdynamo.explain(iterator_local_and_loop)((0, 1, 2, 3, 4), A)
    assert {b.code for b in out.break_reasons} == {"CDB0003"}, out.break_reasons


# ---- iterators the trace cannot advance: FOR_ITER run in Python ---------------------------

def over_iterator_argument(it, x):
    for v in it:
        x = x + v
    return x


def test_for_over_an_iterator_argument():
    """A tuple iterator handed in: traced (see above)."""
    expected = over_iterator_argument(iter((1, 2, 3)), A)
    cdy = CountingBackend()
    compiled = cdynamo.compile(over_iterator_argument, backend=cdy)
    for _ in range(2):
        assert_same(compiled(iter((1, 2, 3)), A), expected)
    assert cdy.frame_count >= 1 and cdynamo.counters()["unmodified"] == 0


def numbers(n):
    for i in range(n):
        yield i * 0.5


def test_for_over_a_generator_argument():
    """A real generator handed in: each FOR_ITER runs next() in Python."""
    expected = over_iterator_argument(numbers(4), A)
    cdy = CountingBackend()
    compiled = cdynamo.compile(over_iterator_argument, backend=cdy)
    for _ in range(2):
        assert_same(compiled(numbers(4), A), expected)
    assert cdy.frame_count >= 1 and cdynamo.counters()["unmodified"] == 0


# ---- while loops ------------------------------------------------------------------------

def while_tensor_condition(x):
    while x.sum() < 100:
        x = x * 2
    return x


def while_counter(x):
    i = 0
    while i < 7:
        if x.sum() > 0:
            x = x + i
        i += 1
    return x, i


def walrus_while(x):
    n = 0
    while (s := x.sum()) < 50:
        x = x * 1.5 + 1
        n += 1
    return x, n, s


@pytest.mark.parametrize("fn,x", [
    (while_tensor_condition, A.abs() + 0.1),
    (while_counter, A),
    (walrus_while, A.abs() + 0.5),
], ids=["tensor_condition", "counter", "walrus"])
def test_while_loops(fn, x):
    loop_case(fn, x)


# ---- many iterations: the trampoline keeps the Python stack flat -------------------------

def long_loop(x):
    for i in range(3000):
        if x[0] > 1e9:
            x = x * 0
        x = x + 1
    return x


def test_long_loop_does_not_nest_calls():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)   # a call per iteration would need 3000 levels
    try:
        cdy = CountingBackend()
        compiled = cdynamo.compile(long_loop, backend=cdy)
        out = compiled(A.clone())
    finally:
        sys.setrecursionlimit(limit)
    assert_same(out, long_loop(A.clone()))
    assert 1 <= cdy.frame_count <= 6


# ---- exceptions, try blocks, with blocks --------------------------------------------------

def raises_in_a_later_iteration(x):
    for i in range(5):
        if x.sum() > 0:
            x = x + 1
        if i == 3:
            raise KeyError("boom")
    return x


def test_user_exception_reaches_the_caller_with_its_traceback():
    compiled = cdynamo.compile(raises_in_a_later_iteration, backend="eager")
    with pytest.raises(KeyError, match="boom") as info:
        compiled(A)
    lines = [f.lineno for f in traceback.extract_tb(info.value.__traceback__)]
    raise_line = raises_in_a_later_iteration.__code__.co_firstlineno + 5
    assert raise_line in lines


def try_inside_loop(x):
    out = []
    for i in range(4):
        try:
            if x.sum() > i:
                raise ValueError(i)
            out.append(x + i)
        except ValueError as e:
            out.append(x - e.args[0])
    return out


def no_grad_inside_loop(x):
    for i in range(3):
        with torch.no_grad():
            y = x * 2
            if y.sum() > 0:
                y = y + 1
        x = x + y
    return x, torch.is_grad_enabled()


@pytest.mark.parametrize("fn,x", [
    (try_inside_loop, A),
    (no_grad_inside_loop, A.clone().requires_grad_()),
], ids=["try_except", "no_grad"])
def test_try_and_with_blocks_in_loops(fn, x):
    loop_case(fn, x)


# ---- what cannot be rebuilt still runs the frame unmodified --------------------------------

def closure_over_loop_variable(x):
    fns = []
    for i in range(3):
        fns.append(lambda: i)
        print(end="")
    return x + sum(g() for g in fns)   # late binding: every lambda sees i == 2


def closure_reassigned_in_loop(x):
    s = 1
    f = lambda t: t * s
    for i in range(3):
        x = f(x)
        print(end="")
        s = s + 1           # the rebuilt closure's cell would not see this
    return x


def closure_made_before_loop(x):
    scale = 2
    f = lambda t: t * scale
    for i in range(3):
        x = f(x) + i
        print(end="")
    return x


@pytest.mark.parametrize("fn", [closure_over_loop_variable, closure_reassigned_in_loop])
def test_closure_over_a_variable_the_loop_writes_runs_unmodified(fn):
    compiled = cdynamo.compile(fn, backend="eager")
    for _ in range(2):
        assert_same(compiled(A), fn(A))
    assert cdynamo.counters()["unmodified"] >= 1


def test_closure_made_before_the_loop_crosses_the_break():
    loop_case(closure_made_before_loop, A)


# ---- modules: a layer loop with a data-dependent branch ---------------------------------

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


class GatedStack(nn.Module):
    def __init__(self, n=6, d=8):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x)
            if x.abs().sum() > 1e4:      # data-dependent: a graph break in every iteration
                x = x / 2
        return x


def test_layer_loop_with_a_break_is_compiled():
    torch.manual_seed(0)
    model, x = GatedStack().eval(), torch.randn(3, 8)
    with torch.no_grad():
        cdy, dyn = loop_case(model, x)
    assert cdy.executed > dyn.executed   # torch._dynamo compiles the blocks, not the loop
    # the blocks are traced inside the loop's resume functions, not compiled one by one
    assert not cdynamo.cache_entries(Block.forward)
    assert cdy.frame_count <= 6


def test_layer_loop_training_matches_eager():
    torch.manual_seed(0)
    model, x = GatedStack(), torch.randn(3, 8)
    ref = copy.deepcopy(model)
    ref(x).pow(2).sum().backward()
    compiled = cdynamo.compile(model, backend="aot_eager")
    for _ in range(2):
        model.zero_grad()
        compiled(x).pow(2).sum().backward()
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-4), name


# ---- the switch -----------------------------------------------------------------------------

def test_graph_break_in_loops_off_skips_the_frame_as_dynamo():
    with cdynamo.config.patch(graph_break_in_loops=False):
        out = cdynamo.explain(branch_in_range_loop)(A)
    assert out.graph_count == 0
    assert [b.code for b in out.unmodified_frames] == ["CDB0005"]
    with pytest.raises(TypeError, match="graph_break_in_loops must be a bool"):
        cdynamo.config.graph_break_in_loops = 1


def test_fullgraph_still_refuses_a_break_in_a_loop():
    with pytest.raises(RuntimeError, match="CDB0001"):
        cdynamo.compile(branch_in_range_loop, backend="eager", fullgraph=True)(A)
