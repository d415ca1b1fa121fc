"""First training step with backend "aot_eager" on the models of PyTorch's Hugging Face
benchmark list (benchmarks/dynamo/huggingface_models_list.txt), built from small configs (4
layers, hidden 64, no dropout), cdynamo vs torch.compile (not a timed test).

Each (model, engine) runs in a fresh process: from just before the engine is imported
(`import cdynamo`; torch.compile imports torch._dynamo on its first call) to the end of the
first forward + backward (trace, AOTAutograd's joint graph, the run). Prints seconds per
engine, the ratio per model, and the median and largest ratio.
Usage: python bench/bench_hf_first_step.py [ModelClass ...]
"""
import json
import statistics
import subprocess
import sys

import torch
import transformers as T


SMALL = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
             vocab_size=256, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_layers=2,
             num_decoder_layers=2, num_heads=4, d_ff=128, d_kv=16, embedding_size=64, ffn_dim=128,
             max_position_embeddings=128, n_layer=4, n_head=4, n_embd=64, n_positions=128,
             attention_window=[16] * 4, embedding_dim=64, num_hidden_groups=1)
MODELS = [
    ("AlbertForMaskedLM", "AlbertConfig", "mlm"), ("AlbertForQuestionAnswering", "AlbertConfig", "qa"),
    ("BartForCausalLM", "BartConfig", "clm"), ("BartForConditionalGeneration", "BartConfig", "s2s"),
    ("BertForMaskedLM", "BertConfig", "mlm"), ("BertForQuestionAnswering", "BertConfig", "qa"),
    ("BlenderbotSmallForCausalLM", "BlenderbotSmallConfig", "clm"),
    ("BlenderbotSmallForConditionalGeneration", "BlenderbotSmallConfig", "s2s"),
    ("BlenderbotForCausalLM", "BlenderbotConfig", "clm"),
    ("CamembertForMaskedLM", "CamembertConfig", "mlm"),
    ("DebertaV2ForMaskedLM", "DebertaV2Config", "mlm"), ("DebertaV2ForQuestionAnswering", "DebertaV2Config", "qa"),
    ("DistilBertForMaskedLM", "DistilBertConfig", "mlm"), ("DistilBertForQuestionAnswering", "DistilBertConfig", "qa"),
    ("ElectraForCausalLM", "ElectraConfig", "clm"), ("ElectraForQuestionAnswering", "ElectraConfig", "qa"),
("GPT2LMHeadModel", "GPT2Config", "clm"),
    ("FNetForMaskedLM", "FNetConfig", "mlm"),
    ("LayoutLMForMaskedLM", "LayoutLMConfig", "mlm"), ("LayoutLMForSequenceClassification", "LayoutLMConfig", "seq"),
    ("M2M100ForConditionalGeneration", "M2M100Config", "s2s"),
    ("MBartForCausalLM", "MBartConfig", "clm"), ("MBartForConditionalGeneration", "MBartConfig", "s2s"),
    ("MT5ForConditionalGeneration", "MT5Config", "s2s"),
    ("MegatronBertForCausalLM", "MegatronBertConfig", "clm"), ("MegatronBertForQuestionAnswering", "MegatronBertConfig", "qa"),
    ("MobileBertForMaskedLM", "MobileBertConfig", "mlm"), ("MobileBertForQuestionAnswering", "MobileBertConfig", "qa"),
    ("OPTForCausalLM", "OPTConfig", "clm"),
    ("PLBartForCausalLM", "PLBartConfig", "clm"), ("PLBartForConditionalGeneration", "PLBartConfig", "s2s"),
    ("PegasusForCausalLM", "PegasusConfig", "clm"), ("PegasusForConditionalGeneration", "PegasusConfig", "s2s"),
    ("RobertaForCausalLM", "RobertaConfig", "clm"), ("RobertaForQuestionAnswering", "RobertaConfig", "qa"),
    ("T5ForConditionalGeneration", "T5Config", "s2s"), ("TrOCRForCausalLM", "TrOCRConfig", "clm"),
    ("XGLMForCausalLM", "XGLMConfig", "clm"), 
    ("ConvBertForMaskedLM", "ConvBertConfig", "mlm"), ("LongformerForMaskedLM", "LongformerConfig", "mlm"),
]

def build(name):
    """(model in train mode's default state, keyword inputs of one training step) of MODELS'
    `name`: its config with the SMALL sizes it has, dropout 0, token ids below 256."""
    mcls, ccls, task = next(m for m in MODELS if m[0] == name)
    cfg_cls = getattr(T, ccls)
    cfg = cfg_cls()
    for k, v in SMALL.items():
        if hasattr(cfg, k):
            setattr(cfg, k, v)
    if ccls == "MobileBertConfig":
        cfg.embedding_size = cfg.intra_bottleneck_size = cfg.true_hidden_size = 32
    for k in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
              "activation_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout_rate", "classifier_dropout"):
        if hasattr(cfg, k) and isinstance(getattr(cfg, k), float):
            setattr(cfg, k, 0.0)
    for k in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id"):
        if getattr(cfg, k, None) is not None and isinstance(getattr(cfg, k), int) and getattr(cfg, k) >= 256:
            setattr(cfg, k, 1)
    torch.manual_seed(0)
    model = getattr(T, mcls)(cfg)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 256, (2, 32), generator=g)
    kw = {"input_ids": ids}
    if task in ("mlm", "clm"):
        kw["labels"] = ids
    elif task == "s2s":
        kw.update(labels=ids, decoder_input_ids=ids)
    elif task == "qa":
        kw.update(start_positions=torch.tensor([1, 2]), end_positions=torch.tensor([3, 4]))
    elif task == "seq":
        kw["labels"] = torch.tensor([0, 1])
    return model, kw


CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[3])
import torch, transformers
transformers.logging.set_verbosity_error()
from bench_hf_first_step import build
engine, name = sys.argv[1], sys.argv[2]
model, kw = build(name)
model.train()
t0 = time.perf_counter()
# the window starts before the engine is imported: torch.compile imports torch._dynamo
# on its first call, cdynamo imports it (and its own package) here
if engine == "cdynamo":
    import cdynamo
compiled = (cdynamo.compile if engine == "cdynamo" else torch.compile)(model, backend="aot_eager")
torch.manual_seed(1)
out = compiled(**kw)
(out.loss if hasattr(out, "loss") else out[0]).backward()
print(json.dumps({"s": time.perf_counter() - t0}))
"""


def main():
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    names = sys.argv[1:] or [m[0] for m in MODELS]
    ratios = []
    for name in names:
        secs = {}
        for engine in ("cdynamo", "torch"):
            p = subprocess.run([sys.executable, "-c", CHILD, engine, name, here],
                               capture_output=True, text=True)
            try:
                secs[engine] = json.loads(p.stdout.strip().splitlines()[-1])["s"]
            except (IndexError, ValueError):
                secs[engine] = None
        if None in secs.values():
            print(f"{name:42} failed: {secs}")
            continue
        ratios.append(secs["cdynamo"] / secs["torch"])
        print(f"{name:42} cdynamo {secs['cdynamo']:6.2f} s  torch.compile {secs['torch']:6.2f} s"
              f"  {ratios[-1]:.2f}x", flush=True)
    if ratios:
        print(f"median {statistics.median(ratios):.2f}x, largest {max(ratios):.2f}x over "
              f"{len(ratios)} models")


if __name__ == "__main__":
    main()
