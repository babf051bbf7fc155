"""Training steps whose numerics tests/compiler/test_numerics.py judges.

    python numerics_models.py train          # a correct MLP training step: nothing flagged
    python numerics_models.py backward_bug   # Inductor's relu bug knob, with relu only in a
                                             # custom backward: the forward right, gradients wrong
    python numerics_models.py pass_bug       # a post-grad pass the user set scales one backward
                                             # op by 1.5: the forward is right, a gradient wrong
    python numerics_models.py random         # dropout in training: random numbers, not a bug
    python numerics_models.py hf             # a tiny Hugging Face Llama (random init) trained
                                             # one step: outputs and gradients named by its
                                             # output structure and parameter names
"""
import copy
import sys

import torch
from torch import nn
from torch._inductor import config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files


class Mlp(nn.Module):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.fc2(self.drop(torch.relu(self.fc1(x))))
        loss = (logits - y).pow(2).mean()
        return loss


class GatedSilu(torch.autograd.Function):
    """``x * sigmoid(x)`` with a hand-written backward that uses relu (the only relu of the
    model: Inductor's ``inject_relu_bug_TESTING_ONLY`` then breaks a backward kernel only)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s + torch.relu(x) * s * (1 - s))


class GatedMlp(Mlp):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.fc2(GatedSilu.apply(self.fc1(x)))
        loss = (logits - y).pow(2).mean()
        return loss


class ScaleReluBackward(CustomGraphPass):
    """A wrong post-grad pass: in a backward graph (it has tangents), relu's backward (a
    ``where``) is multiplied by 1.5. The forward graph is left alone."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        if not any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes):
            return
        aten = torch.ops.aten
        for node in graph.nodes:
            if node.op == "call_function" and node.target in (aten.where.self,
                                                              aten.threshold_backward.default):
                with graph.inserting_after(node):
                    wrong = graph.call_function(aten.mul.Tensor, (node, 1.5))
                node.replace_all_uses_with(wrong, delete_user_cb=lambda u: u is not wrong)
                wrong.meta.update(node.meta)
                return

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,))


def step(model: nn.Module, same_as_eager: bool) -> None:
    """One SGD step through the compiled model; with ``same_as_eager``, the gradients left in
    ``.grad`` are checked against an eager copy's (a check that accumulated into them, or
    changed them, would fail this)."""
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    ref = copy.deepcopy(model)
    ref(x, y).backward()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.compile(model)(x, y)
    loss.backward()
    if same_as_eager:
        for (name, p), r in zip(model.named_parameters(), ref.parameters()):
            assert torch.allclose(p.grad, r.grad, rtol=1e-4, atol=1e-5), name
        print("grads as eager")
    opt.step()
    print("loss", float(loss))


def hf_step() -> None:
    """One training step of a tiny Llama (transformers, random init) through the compiled
    model: it returns a ``CausalLMOutputWithPast`` (loss, logits, a cache of keys and values)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    model = LlamaForCausalLM(cfg).train()
    ids = torch.randint(0, 64, (1, 8))
    out = torch.compile(model)(input_ids=ids, labels=ids, use_cache=True)
    out.loss.backward()
    print("loss", float(out.loss))


if __name__ == "__main__":
    torch.manual_seed(0)
    mode = sys.argv[1]
    if mode == "pass_bug":
        inductor_config.post_grad_custom_post_pass = ScaleReluBackward()
    if mode == "backward_bug":
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
        inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"
        step(GatedMlp().train(), same_as_eager=False)
    elif mode == "hf":
        hf_step()
    else:
        step(Mlp(0.2 if mode == "random" else 0.0).train(), same_as_eager=mode == "train")
