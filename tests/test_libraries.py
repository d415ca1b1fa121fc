"""Real libraries that call torch.compile inside, unchanged, compiled by cdynamo through
cdynamo.install() (issue 26, point 2).

Each test runs the same program three times: eager (no compile), with torch.compile as torch
ships it (torch._dynamo; its graphs counted by torch._dynamo.utils.counters), and with
cdynamo.install() in effect (its graphs counted by cdynamo.counters()["compiles"], while
torch._dynamo's graph counter must stay 0). The compiled runs must give eager's results, and
cdynamo must make at least one graph and no more than torch._dynamo did.

Libraries (pinned in the Makefile's setup): transformers (Trainer with torch_compile=True,
which compiles through accelerate; generate() with a static cache and its automatic compile
path), timm (create_model + torch.compile forward and SGD steps), PyTorch Lightning (a
compiled LightningModule given to pl.Trainer). A test skips when its library is missing.

timm imports torchvision at module load in every release (timm.layers imports
torchvision.ops.misc.FrozenBatchNorm2d, timm.data its transforms and datasets), and torchvision
is kept out of this CPU-torch environment. When torchvision is not installed, timm is imported
behind a stand-in for the torchvision modules it names (_torchvision_stand_in): the names timm
only refers to at import (transforms, datasets) are placeholders that refuse to be
instantiated, and FrozenBatchNorm2d is torchvision's definition. The stand-in is removed from
sys.modules and sys.meta_path right after the import, and the models tested here use none of it.
"""
from __future__ import annotations

import contextlib
import enum
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import time
import types

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters as dynamo_counters

from conftest import requires_engine

pytestmark = requires_engine


# --- running one program under each engine -------------------------------------------------

def _dynamo_graphs() -> int:
    return int(dynamo_counters["stats"]["unique_graphs"])


def run_with_torch_dynamo(fn):
    """fn() with torch.compile as torch ships it; returns (result, graphs torch._dynamo made)."""
    import cdynamo
    assert not cdynamo.is_installed()
    torch._dynamo.reset()
    dynamo_counters.clear()
    try:
        result = fn()
        return result, _dynamo_graphs()
    finally:
        torch._dynamo.reset()
        dynamo_counters.clear()


def run_with_cdynamo(fn):
    """fn() with cdynamo.install() in effect (undone after); returns (result, graphs cdynamo
    compiled). torch._dynamo must make no graph meanwhile."""
    import cdynamo
    torch._dynamo.reset()
    cdynamo.reset()
    cdynamo.reset_counters()
    dynamo_counters.clear()
    cdynamo.install()
    try:
        assert cdynamo.is_installed()
        result = fn()
        assert _dynamo_graphs() == 0, "torch._dynamo compiled a graph while cdynamo was installed"
        return result, cdynamo.counters()["compiles"]
    finally:
        cdynamo.uninstall()
        cdynamo.reset()


def check_graph_counts(name, cdynamo_graphs, dynamo_graphs):
    print(f"\n[{name}] graphs: cdynamo {cdynamo_graphs}, torch._dynamo {dynamo_graphs}")
    assert cdynamo_graphs > 0, "cdynamo compiled nothing"
    assert dynamo_graphs > 0, "torch._dynamo compiled nothing: the program does not compile"
    assert cdynamo_graphs <= dynamo_graphs


@pytest.fixture(autouse=True)
def _never_left_installed():
    """However a test ends, torch.compile is torch's again afterwards."""
    yield
    import cdynamo
    cdynamo.uninstall()


@pytest.fixture(autouse=True)
def _timed(request):
    t0 = time.perf_counter()
    yield
    print(f"\n[{request.node.name}] {time.perf_counter() - t0:.1f} s")


# --- transformers: Trainer(torch_compile=True) ---------------------------------------------

def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg)


class _TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n=16, seq=16, vocab=100):
        self.ids = torch.randint(0, vocab, (n, seq), generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _train_with_hf_trainer(out_dir, compile: bool):
    from transformers import Trainer, TrainingArguments
    model = _tiny_llama()
    args = TrainingArguments(
        output_dir=str(out_dir), torch_compile=compile,
        torch_compile_backend="aot_eager" if compile else None,
        max_steps=4, per_device_train_batch_size=4, use_cpu=True, report_to=[],
        save_strategy="no", logging_steps=1, seed=0, data_seed=0, dataloader_num_workers=0,
        disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=_TokenDataset())
    trainer.train()
    losses = torch.tensor([h["loss"] for h in trainer.state.log_history if "loss" in h],
                          dtype=torch.float64)
    assert len(losses) == 4
    return losses, type(trainer.model_wrapped)


def test_hf_trainer_torch_compile(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import cdynamo
    eager, eager_type = _train_with_hf_trainer(tmp_path / "eager", compile=False)
    assert not issubclass(eager_type, torch._dynamo.eval_frame.OptimizedModule)
    (dyn, dyn_type), dyn_graphs = run_with_torch_dynamo(
        lambda: _train_with_hf_trainer(tmp_path / "dynamo", compile=True))
    assert issubclass(dyn_type, torch._dynamo.eval_frame.OptimizedModule)
    (cd, cd_type), cd_graphs = run_with_cdynamo(
        lambda: _train_with_hf_trainer(tmp_path / "cdynamo", compile=True))
    # accelerate's prepare() called torch.compile on the model: cdynamo's CompiledModule
    assert issubclass(cd_type, cdynamo.CompiledModule)
    torch.testing.assert_close(dyn, eager, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cd, eager, rtol=1e-5, atol=1e-5)
    check_graph_counts("hf Trainer", cd_graphs, dyn_graphs)


# --- transformers: generate() with a static cache and its compile path ----------------------

_PROMPT = torch.randint(0, 100, (2, 5), generator=torch.Generator().manual_seed(1))


def _generate(compile_config=None):
    """Greedy generation with a static cache. With compile_config, transformers compiles the
    decoding steps' forward itself (get_compiled_call -> torch.compile(self.__call__, ...));
    on CPU only when the config allows every device (_compile_all_devices)."""
    model = _tiny_llama().eval()
    kwargs = {}
    if compile_config is None:
        kwargs["disable_compile"] = True
    else:
        compile_config._compile_all_devices = True
        kwargs["compile_config"] = compile_config
    out = model.generate(_PROMPT, attention_mask=torch.ones_like(_PROMPT), max_new_tokens=8,
                         do_sample=False, cache_implementation="static", pad_token_id=0,
                         **kwargs)
    assert out.shape == (2, 13)
    return out


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph-breaks-allowed", "fullgraph"])
def test_hf_generate_static_cache_compiled(fullgraph):
    pytest.importorskip("transformers")
    from transformers import CompileConfig
    eager = _generate()
    dyn, dyn_graphs = run_with_torch_dynamo(
        lambda: _generate(CompileConfig(backend="eager", fullgraph=fullgraph, mode=None)))
    cd, cd_graphs = run_with_cdynamo(
        lambda: _generate(CompileConfig(backend="eager", fullgraph=fullgraph, mode=None)))
    assert torch.equal(dyn, eager)
    assert torch.equal(cd, eager)
    check_graph_counts(f"hf generate fullgraph={fullgraph}", cd_graphs, dyn_graphs)


def test_hf_generate_default_compile_config_mode():
    pytest.importorskip("transformers")
    from transformers import CompileConfig
    eager = _generate()
    cd, cd_graphs = run_with_cdynamo(lambda: _generate(CompileConfig(backend="eager")))
    assert torch.equal(cd, eager)
    assert cd_graphs > 0


# --- timm: create_model + torch.compile -----------------------------------------------------

class _Placeholder:
    """A torchvision class timm names at import; this stand-in cannot be used."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("torchvision is not installed (tests/test_libraries.py stand-in)")


class _InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class _FrozenBatchNorm2d(torch.nn.Module):
    """torchvision.ops.misc.FrozenBatchNorm2d (torchvision, BSD-3-Clause)."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        w = self.weight.reshape(1, -1, 1, 1)
        b = self.bias.reshape(1, -1, 1, 1)
        rv = self.running_var.reshape(1, -1, 1, 1)
        rm = self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + self.eps).rsqrt()
        return x * scale + (b - rm * scale)


class _StandInModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        cls = type(name, (_Placeholder,), {"__module__": self.__name__})
        setattr(self, name, cls)
        return cls


class _TorchvisionStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandInModule(spec.name)
        module.__path__ = []
        if spec.name == "torchvision.transforms.functional":
            module.InterpolationMode = _InterpolationMode
        elif spec.name == "torchvision.ops.misc":
            module.FrozenBatchNorm2d = _FrozenBatchNorm2d
        return module

    def exec_module(self, module):
        pass


@contextlib.contextmanager
def _torchvision_stand_in():
    finder = _TorchvisionStandIn()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n, m in sys.modules.items()
                     if (n == "torchvision" or n.startswith("torchvision."))
                     and isinstance(m, _StandInModule)]:
            del sys.modules[name]


def _import_timm():
    if importlib.util.find_spec("timm") is None:
        pytest.skip("timm is not installed")
    if "timm" in sys.modules or importlib.util.find_spec("torchvision") is not None:
        import timm
        return timm
    pytest.importorskip("PIL")   # timm.data imports Pillow
    with _torchvision_stand_in():
        import timm
    return timm


_TIMM_MODELS = {
    "resnet18": {},
    "mobilenetv3_small_050": {},
    "vit_tiny_patch16_224": {"img_size": 32},
}


def _timm_run(timm, name, compile: bool):
    """An eval forward, then two SGD steps in train mode, of the same model object; with
    compile, through torch.compile(model) (one wrapper for both)."""
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10, **_TIMM_MODELS[name])
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([1, 7])
    run = torch.compile(model, backend="eager") if compile else model
    model.eval()
    with torch.no_grad():
        out = run(x)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(run(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    weights = next(iter(model.parameters())).detach().clone()
    return out, torch.stack(losses), weights


@pytest.mark.parametrize("name", list(_TIMM_MODELS))
def test_timm_create_model_compile(name):
    timm = _import_timm()
    eager = _timm_run(timm, name, compile=False)
    dyn, dyn_graphs = run_with_torch_dynamo(lambda: _timm_run(timm, name, compile=True))
    cd, cd_graphs = run_with_cdynamo(lambda: _timm_run(timm, name, compile=True))
    torch.testing.assert_close(dyn, eager, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(cd, eager, rtol=1e-4, atol=1e-5)
    check_graph_counts(f"timm {name}", cd_graphs, dyn_graphs)
    assert not isinstance(sys.modules.get("torchvision"), _StandInModule)


# --- PyTorch Lightning: a compiled LightningModule given to pl.Trainer ---------------------

def _import_lightning():
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    pytest.skip("neither lightning nor pytorch_lightning is installed")


def _lightning_fit(pl, compile: bool):
    class Regressor(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                           torch.nn.Linear(16, 1))
            self.losses = []

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self(x), y)
            self.losses.append(loss.detach())
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8, generator=g),
                                          torch.randn(32, 1, generator=g))
    torch.manual_seed(0)
    module = Regressor()
    model = torch.compile(module, backend="eager") if compile else module
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8))
    assert len(module.losses) == 4
    return torch.stack(module.losses)


def test_lightning_trainer_compiled_module():
    pl = _import_lightning()
    eager = _lightning_fit(pl, compile=False)
    dyn, dyn_graphs = run_with_torch_dynamo(lambda: _lightning_fit(pl, compile=True))
    torch.testing.assert_close(dyn, eager)
    cd, cd_graphs = run_with_cdynamo(lambda: _lightning_fit(pl, compile=True))
    torch.testing.assert_close(cd, eager)
    check_graph_counts("lightning", cd_graphs, dyn_graphs)
