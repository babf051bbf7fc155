"""A decode loop with a KV cache: a tiny Hugging Face Llama (random weights from a LlamaConfig,
nothing downloaded) compiled with torch.compile, a prefill of 6 tokens, then 8 one-token decode
steps. It recompiles twice: the prompt's length 6 becomes 1 (a size of 1 is always specialized,
so the decode step is a compile of its own), then the cache grows by one each step (automatic
dynamic makes its length a symbol on the next compile).

    tuidebug trace examples/decode_loop.py
    tuidebug advise TRACE --try
"""
import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicCache


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()
    step = torch.compile(model)
    input_ids = torch.randint(0, 128, (1, 6))
    cache = DynamicCache()
    with torch.no_grad():
        out = step(input_ids=input_ids, past_key_values=cache, use_cache=True)
        tokens = [int(out.logits[0, -1].argmax())]
        for _ in range(args.steps):
            nxt = torch.tensor([[tokens[-1]]])
            out = step(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
            tokens.append(int(out.logits[0, -1].argmax()))
    print("decode_loop: tokens", tokens)


if __name__ == "__main__":
    main()
