"""GPT-2 in PyTorch, structured like nanoGPT (pre-LayerNorm blocks, tanh-GELU
MLP, causal attention, LM head tied to wte), with nanoGPT's parameter names.
Used by make_golden.py (the reference) and bench/torch_train.py (the
side-by-side benchmark). Config keys: n_layer, n_head, n_embd, n_ctx, vocab_size.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn.c_proj(y)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, m):
        super().__init__()
        C = m["n_embd"]
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(m["vocab_size"], C)
        self.transformer.wpe = nn.Embedding(m["n_ctx"], C)
        self.transformer.h = nn.ModuleList(Block(C, m["n_head"]) for _ in range(m["n_layer"]))
        self.transformer.ln_f = nn.LayerNorm(C)

    def forward(self, idx):
        T = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for b in self.transformer.h:
            x = b(x)
        return self.transformer.ln_f(x) @ self.transformer.wte.weight.t()  # tied head


def init_and_adamw(model, lr):
    """The benchmarks' set-up: weights of two or more dimensions drawn from
    N(0, 0.02) (biases and LayerNorms keep PyTorch's), and AdamW as the
    trainer runs it: weight decay 0.1 on those weights only, betas (0.9, 0.95)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)
