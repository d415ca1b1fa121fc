"""Reads of transformers config properties on the per-call path (issue 9 point 7).

transformers' PreTrainedConfig (and its HeterogeneousConfigMixin) override __getattribute__
with Python code that, for an ordinary config, only delegates to object's lookup. A property
read on such a config (`config.per_layer_config`, `config.is_heterogeneous`) is traced by
inlining its getter, with the delegation pinned by guards that run no Python code (the
instance has no `_heterogeneity_spec`, the name is not in `attribute_map`): a cache hit calls
no Python __getattribute__ or getter. Each change that makes the delegation do something else
recompiles, with eager's result.
"""
import sys

import pytest
import torch

import cdynamo
from helpers import CountingBackend

transformers = pytest.importorskip("transformers")


def uses_properties(x, cfg):
    view = cfg.per_layer_config
    n = len(view)
    return x + n if cfg.is_heterogeneous else x - n


def _python_calls(fn, *args):
    """Names of the Python functions run by fn(*args) (sys.setprofile), and its result."""
    names = []

    def prof(frame, event, arg):
        if event == "call":
            names.append(frame.f_code.co_name)
    sys.setprofile(prof)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(None)
    return names, out


def _config():
    return transformers.GPT2Config(n_layer=2)


def test_cache_hit_runs_no_config_code():
    cdynamo.reset()
    cfg, x = _config(), torch.randn(3)
    counter = CountingBackend()
    f = cdynamo.compile(uses_properties, backend=counter)
    assert torch.equal(f(x, cfg), uses_properties(x, cfg))
    names, out = _python_calls(f, x, cfg)
    assert torch.equal(out, uses_properties(x, cfg))
    assert not {"__getattribute__", "per_layer_config", "is_heterogeneous"} & set(names), names
    assert counter.frame_count == 1
    guards = "\n".join(cdynamo.cache_entries(uses_properties)[0].guards)
    assert "per_layer_config TYPE_MATCH" not in guards
    assert "_heterogeneity_spec HASATTR absent" in guards


def test_property_aliased_in_attribute_map_recompiles():
    cdynamo.reset()
    cfg, x = _config(), torch.randn(3)
    counter = CountingBackend()
    f = cdynamo.compile(uses_properties, backend=counter)
    f(x, cfg)
    other = _config()
    # an instance attribute_map that sends is_heterogeneous to a true attribute: the
    # property is not read any more (eager takes the other branch)
    other.__dict__["attribute_map"] = dict(type(other).attribute_map,
                                           is_heterogeneous="scale_attn_weights")
    assert other.is_heterogeneous is True
    assert torch.equal(f(x, other), uses_properties(x, other))
    assert torch.equal(f(x, other), x + 2)
    assert counter.frame_count == 2


def test_heterogeneous_config_recompiles():
    cdynamo.reset()
    cfg, x = _config(), torch.randn(3)
    counter = CountingBackend()
    f = cdynamo.compile(uses_properties, backend=counter)
    f(x, cfg)
    other = _config()
    other.__dict__["_heterogeneity_spec"] = None   # read by HeterogeneousConfigMixin
    assert torch.equal(f(x, other), uses_properties(x, other))
    assert counter.frame_count == 2


def test_property_redefined_on_the_class_recompiles():
    class MyConfig(transformers.GPT2Config):
        @property
        def is_heterogeneous(self):
            return False

    cdynamo.reset()
    cfg, x = MyConfig(n_layer=3), torch.randn(3)
    counter = CountingBackend()
    f = cdynamo.compile(uses_properties, backend=counter)
    assert torch.equal(f(x, cfg), uses_properties(x, cfg))
    MyConfig.is_heterogeneous = property(lambda self: True)
    assert torch.equal(f(x, cfg), uses_properties(x, cfg))
    assert counter.frame_count == 2
