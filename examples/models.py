"""Small real models used by the demo, the benchmark and the tests."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    """Linear -> LayerNorm -> GELU -> Dropout -> Linear -> ReLU -> Linear."""

    def __init__(self, d_in=64, d_hidden=128, d_out=32, p=0.1):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.act = nn.GELU()
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.relu = nn.ReLU()
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        x = self.drop(self.act(self.norm(self.fc1(x))))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


class SelfAttention(nn.Module):
    """Multi-head self attention written with plain torch ops."""

    def __init__(self, dim, heads):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def split_heads(self, t, b, s):
        return t.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        b, s, d = x.shape
        q = self.split_heads(self.q(x), b, s)
        k = self.split_heads(self.k(x), b, s)
        v = self.split_heads(self.v(x), b, s)
        scores = torch.matmul(q, k.transpose(-2, -1)) / (self.head_dim ** 0.5)
        attn = torch.softmax(scores, dim=-1)
        y = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, d)
        return self.out(y)


class TransformerBlock(nn.Module):
    """Pre-norm block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, dim=64, heads=4, mlp_ratio=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_ratio), nn.GELU(),
                                 nn.Linear(dim * mlp_ratio, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class TransformerStack(nn.Module):
    """A ModuleList of TransformerBlocks iterated in forward, then a final LayerNorm."""

    def __init__(self, depth=2, dim=64, heads=4):
        super().__init__()
        self.blocks = nn.ModuleList([TransformerBlock(dim, heads) for _ in range(depth)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


class ConvNet(nn.Module):
    """Conv2d -> BatchNorm2d -> ReLU, twice, then global average pooling and a Linear head.
    Use in eval() mode (BatchNorm2d with running statistics)."""

    def __init__(self, channels=3, width=8, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.relu(self.bn2(self.conv2(x)))
        x = x.mean(dim=(2, 3))
        return self.head(x)


def mlp_inputs(batch=8, d_in=64):
    return (torch.randn(batch, d_in),)


def transformer_inputs(batch=2, seq=16, dim=64):
    return (torch.randn(batch, seq, dim),)


def convnet_inputs(batch=2, channels=3, size=16):
    return (torch.randn(batch, channels, size, size),)
