"""Hugging Face transformers models as they ship, built from tiny configs (no weights are
downloaded), for the demo, the benchmark and the tests.

Each builder returns (model in eval mode, example inputs tuple). Requires transformers
(installed by `make`), seeded for reproducibility.
"""
import torch

VOCAB = 128


def _ids(batch=2, seq=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (batch, seq), generator=g)


def gpt2(n_layer=2, seq=16):
    """GPT2Model: 2 layers, hidden 64, 4 heads; inputs (input_ids,)."""
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=n_layer, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=128,
                     bos_token_id=0, eos_token_id=0)
    return GPT2Model(cfg).eval(), (_ids(seq=seq),)


def gpt2_lm(n_layer=2):
    """GPT2LMHeadModel (for generate and training); inputs (input_ids,)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=n_layer, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=128,
                     bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval(), (_ids(),)


def llama():
    """LlamaModel: 2 layers, hidden 64, 4 heads (2 KV heads); inputs (input_ids,)."""
    from transformers import LlamaConfig, LlamaModel
    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=128, vocab_size=VOCAB,
                      max_position_embeddings=128)
    return LlamaModel(cfg).eval(), (_ids(),)


def qwen2():
    """Qwen2Model: 2 layers, hidden 64, 4 heads (2 KV heads); inputs (input_ids,)."""
    from transformers import Qwen2Config, Qwen2Model
    torch.manual_seed(0)
    cfg = Qwen2Config(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=128, vocab_size=VOCAB,
                      max_position_embeddings=128)
    return Qwen2Model(cfg).eval(), (_ids(),)


def bert():
    """BertModel: 2 layers, hidden 64, 4 heads; inputs (input_ids,)."""
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                     intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=128)
    return BertModel(cfg).eval(), (_ids(),)


def t5():
    """T5Model: 2 encoder + 2 decoder layers, d_model 64; inputs (input_ids, attention_mask,
    decoder_input_ids), positional as forward takes them."""
    from transformers import T5Config, T5Model
    torch.manual_seed(0)
    cfg = T5Config(num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, d_ff=128,
                   num_heads=4, vocab_size=VOCAB, decoder_start_token_id=0)
    return T5Model(cfg).eval(), (_ids(), torch.ones(2, 16, dtype=torch.long), _ids(seq=8, seed=1))


def vit():
    """ViTModel: 2 layers, hidden 64, 32x32 images, patch 8; inputs (pixel_values,)."""
    from transformers import ViTConfig, ViTModel
    torch.manual_seed(0)
    cfg = ViTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                    intermediate_size=128, image_size=32, patch_size=8)
    return ViTModel(cfg).eval(), (torch.randn(2, 3, 32, 32),)


def whisper():
    """WhisperModel: 2+2 layers, d_model 64, 80 mel bins, 200 frames; inputs
    (input_features, attention_mask=None, decoder_input_ids), positional."""
    from transformers import WhisperConfig, WhisperModel
    torch.manual_seed(0)
    cfg = WhisperConfig(encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                        vocab_size=VOCAB, num_mel_bins=80, max_source_positions=100,
                        max_target_positions=64, pad_token_id=0, bos_token_id=0,
                        eos_token_id=0, decoder_start_token_id=0)
    return WhisperModel(cfg).eval(), (torch.randn(1, 80, 200), None, _ids(batch=1, seq=8))


def transformer_encoder():
    """torch.nn.TransformerEncoder: 2 layers, d_model 64; inputs (src,)."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2).eval(), (torch.randn(2, 16, 64),)


BUILDERS = {"gpt2": gpt2, "llama": llama, "bert": bert, "t5": t5, "qwen2": qwen2, "vit": vit,
            "whisper": whisper, "transformer_encoder": transformer_encoder}


def main_output(out):
    """The tensor to compare of a model's output (last_hidden_state or the tensor itself)."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]
