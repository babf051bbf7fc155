"""One real-model workload for bench/real_models.py, chosen by environment variables (so that
bench/_run_example.py can run it as a script, plain or under capture):

    REAL_MODEL=gpt2_train REAL_MODE=default REAL_DEVICE=cpu REAL_DTYPE=float32 python _real_model.py

Models come from ``transformers`` and ``timm`` configs with random weights (nothing is
downloaded), kept tiny on the CPU (2 layers, hidden 64) and wider on a GPU (REAL_WIDE=1).
REAL_LAYERS and REAL_HIDDEN change the depth and width; REAL_COMPILE_OPT=1 compiles the training
step's AdamW step too (issue 30's 24-layer Llama: REAL_LAYERS=24 REAL_HIDDEN=128).
"""

from __future__ import annotations

import os

import torch

NAME = os.environ.get("REAL_MODEL", "gpt2_train")
MODE = os.environ.get("REAL_MODE", "default")
DEVICE = os.environ.get("REAL_DEVICE", "cpu")
DTYPE = getattr(torch, os.environ.get("REAL_DTYPE", "float32"))
WIDE = os.environ.get("REAL_WIDE") == "1"  # the GPU overhead measurement: a realistic width
LAYERS = int(os.environ.get("REAL_LAYERS", "2"))
H = int(os.environ.get("REAL_HIDDEN", "1024" if WIDE else "64"))
COMPILE_OPT = os.environ.get("REAL_COMPILE_OPT") == "1"


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    model = model.to(DEVICE, DTYPE)
    return torch.compile(model, mode=None if MODE == "default" else MODE)


def tokens(batch: int, seq: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), device=DEVICE)


def _train_step(model: torch.nn.Module, vocab: int) -> None:
    """One compiled training step of a causal LM (loss from labels) with AdamW."""
    step = compiled(model.train())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = tokens(4 if WIDE else 2, 256 if WIDE else 16, vocab)
    loss = step(input_ids=ids, labels=ids).loss
    loss.backward()
    (torch.compile(opt.step) if COMPILE_OPT else opt.step)()


def gpt2_train() -> None:
    """A decoder LM training step with AdamW (dropout on: compiled and eager draw differently)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=512, n_positions=256, n_embd=H, n_layer=LAYERS,
                     n_head=16 if WIDE else 4)
    _train_step(GPT2LMHeadModel(cfg), cfg.vocab_size)


def llama_train() -> None:
    """A Llama-style decoder LM training step with AdamW (no dropout)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=512, hidden_size=H, intermediate_size=4 * H,
                      num_hidden_layers=LAYERS, num_attention_heads=16 if WIDE else 4,
                      num_key_value_heads=4 if WIDE else 2, max_position_embeddings=512)
    _train_step(LlamaForCausalLM(cfg), cfg.vocab_size)


def bert_lengths() -> None:
    """An encoder called with three sequence lengths (recompiles, then dynamic shapes)."""
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=512, hidden_size=H, num_hidden_layers=LAYERS,
                     num_attention_heads=4, intermediate_size=2 * H)
    model = compiled(BertModel(cfg).eval())
    with torch.no_grad():
        for seq in (8, 16, 24):
            model(input_ids=tokens(2, seq, cfg.vocab_size))


def vit() -> None:
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(image_size=32, patch_size=8, hidden_size=H, num_hidden_layers=LAYERS,
                    num_attention_heads=4, intermediate_size=2 * H, num_labels=10)
    model = compiled(ViTForImageClassification(cfg).eval())
    with torch.no_grad():
        model(pixel_values=torch.randn(2, 3, 32, 32, device=DEVICE, dtype=DTYPE))


def convnet() -> None:
    from transformers import ResNetConfig, ResNetForImageClassification

    cfg = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                       layer_type="basic", num_labels=10)
    model = compiled(ResNetForImageClassification(cfg).eval())
    with torch.no_grad():
        model(pixel_values=torch.randn(2, 3, 32, 32, device=DEVICE, dtype=DTYPE))


def moe() -> None:
    """A mixture-of-experts decoder (Mixtral: 4 experts, top-2 routing), one forward."""
    from transformers import MixtralConfig, MixtralForCausalLM

    cfg = MixtralConfig(vocab_size=512, hidden_size=H, intermediate_size=2 * H,
                        num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                        num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128)
    model = compiled(MixtralForCausalLM(cfg).eval())
    with torch.no_grad():
        model(input_ids=tokens(2, 16, cfg.vocab_size))


def t5() -> None:
    """An encoder-decoder (T5) forward with labels."""
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=512, d_model=H, d_kv=16, d_ff=2 * H, num_layers=LAYERS,
                   num_decoder_layers=LAYERS, num_heads=4, dropout_rate=0.0,
                   decoder_start_token_id=0, pad_token_id=0)
    model = compiled(T5ForConditionalGeneration(cfg).eval())
    with torch.no_grad():
        model(input_ids=tokens(2, 16, cfg.vocab_size), labels=tokens(2, 8, cfg.vocab_size))


def timm_resnet() -> None:
    import timm

    model = compiled(timm.create_model("resnet18", pretrained=False, num_classes=10).eval())
    with torch.no_grad():
        model(torch.randn(2, 3, 32, 32, device=DEVICE, dtype=DTYPE))


def timm_vit() -> None:
    import timm

    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32,
                              patch_size=8, embed_dim=H, depth=LAYERS, num_heads=4,
                              num_classes=10)
    with torch.no_grad():
        compiled(model.eval())(torch.randn(2, 3, 32, 32, device=DEVICE, dtype=DTYPE))


MODELS = {f.__name__: f for f in (gpt2_train, llama_train, bert_lengths, vit, convnet, moe, t5,
                                  timm_resnet, timm_vit)}
NEEDS = {name: ("timm" if name.startswith("timm_") else "transformers") for name in MODELS}

if __name__ == "__main__":
    torch.manual_seed(0)
    MODELS[NAME]()
