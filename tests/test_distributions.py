"""torch.distributions objects made in compiled code (issue 7 Scope 4: torch objects made in
the frame): constructed and used in the trace, one graph as torch._dynamo; Python non-data
descriptors (lazy_property) on objects made in the trace."""
import torch
import torch.distributions as D
from torch.distributions.utils import lazy_property

import cdynamo
from helpers import CountingBackend, compare, run_torch_dynamo


def test_normal_made_in_frame_one_graph():
    def fn(x):
        d = D.Normal(torch.zeros(4), torch.ones(4) * 2)
        return d.log_prob(x) + d.mean + d.stddev + d.variance

    counter = compare(fn, torch.randn(4), exact=False)
    assert counter.frame_count == 1
    assert counter.op_count >= 8   # log_prob's body traced op by op, not one opaque call


def test_normal_of_input_parameters():
    def fn(x, loc, scale):
        return D.Normal(loc, scale).log_prob(x).sum()

    compare(fn, torch.randn(5), torch.randn(5), torch.rand(5) + 0.5, exact=False)


def test_user_lazy_property_on_object_made_in_trace():
    class Box:
        def __init__(self, t):
            self.t = t

        @lazy_property
        def sq(self):
            return self.t * self.t

    def fn(x):
        b = Box(x)
        return b.sq + b.sq   # the second read finds the value __get__ stored

    counter = compare(fn, torch.randn(3))
    _, dyn = run_torch_dynamo(fn, torch.randn(3))
    assert counter.frame_count == 1 and counter.op_count == dyn.op_count


def test_validation_default_off_as_torch_compile():
    """cdynamo.compile turns Distribution's default validation off as torch.compile's first
    use does; an explicit validate_args=True still validates (a break where it checks)."""
    cdynamo.compile(lambda x: x, backend="eager")
    assert D.Distribution._validate_args is False

    def fn(x, scale):
        return D.Normal(torch.zeros(3), scale, validate_args=True).log_prob(x)

    compiled = cdynamo.compile(fn, backend=CountingBackend())
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x, torch.ones(3)), fn(x, torch.ones(3)))
    try:
        compiled(x, -torch.ones(3))
    except ValueError as e:
        assert "scale" in str(e)
    else:
        raise AssertionError("an invalid scale with validate_args=True must raise")
