"""Exceptions raised and caught inside the traced code (issue 7: try/except/finally): the
handler is traced too, so the function stays one graph, as torch._dynamo 2.13."""
import pytest
import torch
import torch._dynamo

import cdynamo
from helpers import CountingBackend


def helper(x, bad):
    if bad:
        raise ValueError("bad input", 3)
    return x + 1


def caught_from_callee(x):
    try:
        y = helper(x, True)
    except ValueError as e:
        y = x - e.args[1]
    return y * 2


def tuple_clause_and_finally(x):
    try:
        raise KeyError("k")
    except (TypeError, KeyError):
        x = x + 10
    finally:
        x = x * 2
    return x


def raise_through_with(x):
    try:
        with torch.no_grad():
            y = x * 2
            raise IndexError("in with")
    except IndexError:
        return y, torch.is_grad_enabled()


class MyError(Exception):
    pass


def raises_user_class(x):
    raise MyError()


def caught_user_class(x):
    try:
        raises_user_class(x)
    except MyError:
        return x + 5
    return x


def nested_handlers(x):
    try:
        try:
            raise ValueError
        except TypeError:
            x = x + 100
    except ValueError:
        x = x + 1
    return x


@pytest.mark.parametrize("fn", [caught_from_callee, tuple_clause_and_finally,
                                raise_through_with, caught_user_class, nested_handlers],
                         ids=lambda f: f.__name__)
def test_caught_exception_stays_in_one_graph_like_dynamo(fn):
    x = torch.ones(3)
    expected = fn(x)
    counter = CountingBackend()
    out = cdynamo.compile(fn, backend=counter)(x)
    assert str(out) == str(expected)
    torch._dynamo.reset()
    dyn = CountingBackend()
    torch.compile(fn, backend=dyn)(x)
    assert counter.frame_count == dyn.frame_count == 1


def uncaught(x):
    return helper(x * 2, True)


def test_uncaught_exception_reaches_the_user_with_its_values():
    with pytest.raises(ValueError) as e:
        cdynamo.compile(uncaught, backend="eager")(torch.ones(2))
    assert e.value.args == ("bad input", 3)


def _raises_with_kwargs(a, **kw):
    raise ValueError("boom", sorted(kw))


def keyword_call_that_raises(x, y):
    return _raises_with_kwargs(a=y, z=x)


def test_keyword_call_that_raises_keeps_its_keywords():
    # fuzzer, seed 3 program 7145: the call that raised was re-run by Python as a graph
    # break without its KW_NAMES (TypeError: takes 1 positional argument but 2 were given)
    cdynamo.reset()
    with pytest.raises(ValueError) as e:
        cdynamo.compile(keyword_call_that_raises, backend="eager")(torch.ones(2), torch.ones(2))
    assert e.value.args == ("boom", ["z"])


def _attr_of_function_default(x=4, y=2):
    return x + y


def test_missing_attributes_raise_in_the_trace():
    """A missing attribute of a Python function read through a source (guarded absent: setting
    it later recompiles), of a static builtin type (`type(fn).__exit__`) and of a builtin
    container (`frozenset().add`, `[].nope`) raises AttributeError in the traced code, with
    eager's text, so a try/except around it is one graph (torch._dynamo's test_functions
    test_func_attrs, test_getattr, test_frozenset_illegal_call_method); each was a break."""
    def fn(x):
        try:
            _attr_of_function_default.dynamo + 1
        except AttributeError as e:
            x = torch.sin(x) + len(str(e))

        def inner(y):
            return y + 1
        try:
            type(inner).__exit__
        except AttributeError as e:
            x = x + len(str(e))
        try:
            frozenset((1, 2)).add(3)
        except AttributeError as e:
            x = x * len(str(e))
        return x

    x = torch.randn(3)
    counter = CountingBackend()
    cdynamo.reset()
    compiled = cdynamo.compile(fn, backend=counter, fullgraph=True)
    assert torch.equal(compiled(x), fn(x))
    assert counter.frame_count == 1
    _attr_of_function_default.dynamo = 1   # now present: the guarded absence fails
    try:
        assert torch.equal(compiled(x), fn(x))   # no sin: recompiled, not the old graph
        assert counter.frame_count == 2
    finally:
        del _attr_of_function_default.dynamo
