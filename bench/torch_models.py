"""PyTorch versions of mixlab's models, used only by the speed benchmark (bench/vs_torch.py).

Written from the specification, docs/mixers.md, and checked against mixlab's model definitions
(nn/models.cpp, nn/blocks.cpp, nn/mixers/*.cpp) so that each model has exactly mixlab's
trainable parameter count (the benchmark prints both counts and refuses a mismatch):

- `Classifier`: the image classifier of §1 (patch embedding, learned positions, an encoder of
  blocks with one mixer, final norm, mean over tokens, a linear head) for every mixer that
  mixlab registers. The benchmark's images have no padding and the encoder is not causal, so
  the mixers here implement that case only: no masks.
- `Translator`: the pre-LN attention encoder-decoder of bench/bench_train_step.cpp, written
  with torch.nn.Transformer (what a PyTorch user would write).

They are written the way a PyTorch user would write them in eager mode: attention and Linformer
use torch's fused scaled_dot_product_attention, lightconv a grouped conv1d, LayerNorm, GELU and
cross-entropy the library's own. Initial values follow the specification's distributions but
are not mixlab's numbers: the benchmark compares speed, not results.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

IMAGE_SIDE = 28
CLASSES = 10


def xavier_linear(d_in, d_out, bias=True):
    """Linear with §0's default initialisation: xavier weight, zero bias."""
    layer = nn.Linear(d_in, d_out, bias=bias)
    nn.init.xavier_uniform_(layer.weight)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


def normal_linear(d_in, d_out, std):
    layer = nn.Linear(d_in, d_out)
    nn.init.normal_(layer.weight, std=std)
    nn.init.zeros_(layer.bias)
    return layer


def uniform_parameter(shape, bound):
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))


def split_heads(x, heads):
    """[B, N, d] -> [B, h, N, d/h]"""
    b, n, d = x.shape
    return x.view(b, n, heads, d // heads).transpose(1, 2)


def merge_heads(x):
    """[B, h, N, d_h] -> [B, N, h·d_h]"""
    b, h, n, dh = x.shape
    return x.transpose(1, 2).reshape(b, n, h * dh)


# ---- mixers (docs/mixers.md §2-§12, §15), non-causal, no padding ----

class Attention(nn.Module):  # §2
    def __init__(self, d, heads, length, options):
        super().__init__()
        self.heads = heads
        self.w_q, self.w_k, self.w_v, self.w_o = (xavier_linear(d, d) for _ in range(4))

    def forward(self, x):
        q, k, v = (split_heads(w(x), self.heads) for w in (self.w_q, self.w_k, self.w_v))
        return self.w_o(merge_heads(F.scaled_dot_product_attention(q, k, v)))


def fd_factor(length):
    """§3 FD: the divisor a of ℓ nearest √ℓ, the smaller one on a tie."""
    best = 1
    for a in range(1, length + 1):
        if length % a == 0 and abs(a - math.sqrt(length)) < abs(best - math.sqrt(length)):
            best = a
    return best


class Synthesizer(nn.Module):  # §3: one component, or a mix of several
    def __init__(self, d, heads, length, components, mix, options):
        super().__init__()
        self.heads, self.components = heads, components
        dh = d // heads
        rank = int(options.get("rank", 8))
        for c in components:
            if c == "R":
                self.R = uniform_parameter((heads, length, length), math.sqrt(3 / length))
            elif c == "Fix":
                self.register_buffer(
                    "R_fix", torch.empty(heads, length, length).uniform_(-1, 1) * math.sqrt(3 / length))
            elif c == "D":
                self.w_1, self.w_2 = xavier_linear(d, d), xavier_linear(dh, length)
            elif c == "FR":
                self.R_1 = uniform_parameter((heads, length, rank), math.sqrt(3 / rank))
                self.R_2 = uniform_parameter((heads, length, rank), math.sqrt(3 / rank))
            elif c == "FD":
                self.fd_a = fd_factor(length)
                self.fd_b = length // self.fd_a
                self.w_a = xavier_linear(d, heads * self.fd_a)
                self.w_b = xavier_linear(d, heads * self.fd_b)
            elif c == "V":
                self.w_q, self.w_k = xavier_linear(d, d), xavier_linear(d, d)
            else:
                raise ValueError(f"unknown synthesizer component {c}")
        self.theta = nn.Parameter(torch.zeros(len(components))) if mix else None
        self.w_v, self.w_o = xavier_linear(d, d), xavier_linear(d, d)

    def logits(self, c, x):
        b, n, _ = x.shape
        if c in ("R", "Fix"):
            table = self.R if c == "R" else self.R_fix
            return table[:, :n, :n].unsqueeze(0)
        if c == "D":
            p = split_heads(torch.relu(self.w_1(x)), self.heads)
            return F.linear(p, self.w_2.weight[:n], self.w_2.bias[:n])
        if c == "FR":
            return (self.R_1[:, :n] @ self.R_2[:, :n].transpose(1, 2)).unsqueeze(0)
        if c == "FD":
            a = self.w_a(x).view(b, n, self.heads, self.fd_a, 1)
            bb = self.w_b(x).view(b, n, self.heads, 1, self.fd_b)
            return (a * bb).reshape(b, n, self.heads, -1).transpose(1, 2)[..., :n]
        q, k = split_heads(self.w_q(x), self.heads), split_heads(self.w_k(x), self.heads)
        return q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))

    def forward(self, x):
        if self.theta is None:
            logits = self.logits(self.components[0], x)
        else:
            alpha = torch.softmax(self.theta, 0)
            logits = sum(alpha[i] * self.logits(c, x) for i, c in enumerate(self.components))
        v = split_heads(self.w_v(x), self.heads)
        return self.w_o(merge_heads(torch.softmax(logits, -1) @ v))


class MlpMixer(nn.Module):  # §4 (N = ℓ here, so no padding to ℓ is needed)
    def __init__(self, d, heads, length, options):
        super().__init__()
        hidden = int(options.get("token-hidden", 0)) or 2 * length
        self.w_1 = normal_linear(length, hidden, 1 / math.sqrt(length))
        self.w_2 = normal_linear(hidden, length, 1 / math.sqrt(hidden))

    def forward(self, x):
        return self.w_2(F.gelu(self.w_1(x.transpose(1, 2)))).transpose(1, 2)


class ResMlp(nn.Module):  # §5 (its block's affine norms and LayerScale are in Block)
    def __init__(self, d, heads, length, options):
        super().__init__()
        self.A = nn.Parameter(torch.randn(length, length) * 0.02)
        self.a = nn.Parameter(torch.zeros(length))

    def forward(self, x):
        n = x.size(1)
        return self.A[:n, :n] @ x + self.a[:n, None]


class FfOnly(nn.Module):  # §6: LayerNorm and MLP across the ℓ tokens of each channel
    def __init__(self, d, heads, length, options):
        super().__init__()
        self.ln_t = nn.LayerNorm(length, eps=1e-5)
        self.fc1 = normal_linear(length, 4 * length, 0.02)
        self.fc2 = normal_linear(4 * length, length, 0.02)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.ln_t(x.transpose(1, 2))))).transpose(1, 2)


class External(nn.Module):  # §7
    def __init__(self, d, heads, length, options):
        super().__init__()
        self.e = int(options.get("expansion", 1))
        slots, dh = int(options.get("slots", 64)), d // heads
        self.heads = heads

        def truncated(d_in, d_out):
            layer = nn.Linear(d_in, d_out)
            nn.init.trunc_normal_(layer.weight, std=0.02, a=-0.04, b=0.04)
            nn.init.zeros_(layer.bias)
            return layer
        self.w_t, self.m_k = truncated(d, self.e * d), truncated(dh, slots)
        self.m_v, self.w_p = truncated(slots, dh), truncated(self.e * d, d)

    def forward(self, x):
        a_hat = torch.softmax(self.m_k(split_heads(self.w_t(x), self.e * self.heads)), dim=2)
        a = a_hat / (a_hat.sum(-1, keepdim=True) + 1e-9)
        return self.w_p(merge_heads(self.m_v(a)))


class FNet(nn.Module):  # §8: Re(FFT2) over (tokens, channels), no parameters
    def __init__(self, d, heads, length, options):
        super().__init__()

    def forward(self, x):
        return torch.fft.fft2(x, dim=(1, 2)).real


class GatedMlp(nn.Module):  # §9: the gMLP/aMLP unit (replaces mixer and FFN: see Block)
    def __init__(self, d, heads, length, options, tiny_attention, ffn_dim):
        super().__init__()
        f = int(options.get("hidden", 0)) or ffn_dim or 4 * d
        self.U, self.ln = xavier_linear(d, f), nn.LayerNorm(f // 2, eps=1e-5)
        self.W = uniform_parameter((length, length), 1e-3 / length)
        self.b = nn.Parameter(torch.ones(length))
        self.V = xavier_linear(f // 2, d)
        self.attention = tiny_attention
        if tiny_attention:
            da = int(options.get("attn-dim", 64))
            self.w_q, self.w_k, self.w_v = (xavier_linear(d, da, bias=False) for _ in range(3))
            self.w_o = xavier_linear(da, f // 2)

    def forward(self, x):
        n = x.size(1)
        z1, z2 = F.gelu(self.U(x)).chunk(2, dim=-1)
        g = self.W[:n, :n] @ self.ln(z2) + self.b[:n, None]
        if self.attention:
            q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
            g = g + self.w_o(F.scaled_dot_product_attention(q, k, v))
        return self.V(g * z1)


class Hcsa(nn.Module):  # §10: fixed Gaussian weights, offsets (−1, +1) cycling over heads
    def __init__(self, d, heads, length, options):
        super().__init__()
        self.heads = heads
        self.w_v, self.w_o = xavier_linear(d, d, bias=False), xavier_linear(d, d, bias=False)
        offsets = torch.tensor([-1.0 if k % 2 == 0 else 1.0 for k in range(heads)])
        i = torch.arange(length, dtype=torch.float32)
        diff = i.view(1, 1, -1) - i.view(1, -1, 1) - offsets.view(-1, 1, 1)  # j − i − o_k
        self.register_buffer("weights", torch.exp(-0.5 * diff * diff) / math.sqrt(2 * math.pi),
                             persistent=False)

    def forward(self, x):
        n = x.size(1)
        return self.w_o(merge_heads(self.weights[:, :n, :n] @ split_heads(self.w_v(x), self.heads)))


class Convolution(nn.Module):  # §11: lightconv (shared kernels) and dynconv (predicted kernels)
    def __init__(self, d, heads, length, options, dynamic):
        super().__init__()
        self.heads, self.dynamic = heads, dynamic
        self.kernel = int(options.get("kernel", 7))
        self.w_g = xavier_linear(d, 2 * d)
        if dynamic:
            self.w_dyn = xavier_linear(d, heads * self.kernel, bias=False)
        else:
            self.w = nn.Parameter(torch.empty(heads, self.kernel))
            nn.init.xavier_uniform_(self.w)
        self.w_o = xavier_linear(d, d)

    def forward(self, x):
        b, n, d = x.shape
        k, h = self.kernel, self.heads
        g = F.glu(self.w_g(x), dim=-1)
        if not self.dynamic:  # channel c uses kernel ⌊c/d_h⌋: a depthwise (grouped) conv1d
            taps = torch.softmax(self.w, -1).repeat_interleave(d // h, dim=0).unsqueeze(1)
            return self.w_o(F.conv1d(g.transpose(1, 2), taps, padding=k // 2, groups=d).transpose(1, 2))
        taps = torch.softmax(self.w_dyn(g).view(b, n, h, 1, k), -1)
        windows = F.pad(g, (0, 0, k // 2, k // 2)).unfold(1, k, 1)  # [B, N, d, K]
        return self.w_o((windows.view(b, n, h, d // h, k) * taps).sum(-1).reshape(b, n, d))


class Linformer(nn.Module):  # §12
    def __init__(self, d, heads, length, options):
        super().__init__()
        p = int(options.get("proj-len", 0)) or max(1, length // 4)
        self.heads = heads
        self.E, self.F = nn.Parameter(torch.empty(p, length)), nn.Parameter(torch.empty(p, length))
        nn.init.xavier_uniform_(self.E)
        nn.init.xavier_uniform_(self.F)
        self.w_q, self.w_k, self.w_v, self.w_o = (xavier_linear(d, d) for _ in range(4))

    def forward(self, x):
        n = x.size(1)
        q = split_heads(self.w_q(x), self.heads)
        k = split_heads(self.w_k(self.E[:, :n] @ x), self.heads)
        v = split_heads(self.w_v(self.F[:, :n] @ x), self.heads)
        return self.w_o(merge_heads(F.scaled_dot_product_attention(q, k, v)))


class LinearAttention(nn.Module):  # §15, non-causal
    def __init__(self, d, heads, length, options):
        super().__init__()
        self.heads = heads
        self.w_q, self.w_k, self.w_v, self.w_o = (xavier_linear(d, d) for _ in range(4))

    def forward(self, x):
        phi_q = split_heads(F.elu(self.w_q(x)) + 1, self.heads)
        phi_k = split_heads(F.elu(self.w_k(x)) + 1, self.heads)
        v = split_heads(self.w_v(x), self.heads)
        s = phi_k.transpose(2, 3) @ v
        denominator = (phi_q * phi_k.sum(2, keepdim=True)).sum(-1, keepdim=True)
        return self.w_o(merge_heads((phi_q @ s) / (denominator + 1e-6)))


class Mamba(nn.Module):  # §17: the selective state space unit (replaces mixer and FFN: see Block)
    """The selective scan as a plain sequential loop over the tokens (left to right in every
    mode, so the encoder's instance is the decoder's)."""

    def __init__(self, d, heads, length, options):
        super().__init__()
        e, n = int(options.get("expand", 2)) * d, int(options.get("state", 16))
        k, r = int(options.get("conv", 4)), int(options.get("dt-rank", 0)) or math.ceil(d / 16)
        self.e, self.n, self.r = e, n, r
        self.w_in = xavier_linear(d, 2 * e, bias=False)
        self.k = k  # mixlab's names and shapes: conv_weight [E, k], conv_bias [E]
        self.conv_weight = nn.Parameter(torch.empty(e, k).uniform_(-1 / math.sqrt(k), 1 / math.sqrt(k)))
        self.conv_bias = nn.Parameter(torch.zeros(e))
        self.w_x = xavier_linear(e, r + 2 * n, bias=False)
        self.w_dt = nn.Linear(r, e)
        nn.init.uniform_(self.w_dt.weight, -r ** -0.5, r ** -0.5)
        dt = torch.exp(torch.empty(e).uniform_(math.log(0.001), math.log(0.1))).clamp(min=1e-4)
        with torch.no_grad():
            self.w_dt.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(e, 1))
        self.D = nn.Parameter(torch.ones(e))
        self.w_out = xavier_linear(e, d, bias=False)

    def forward(self, x):
        b, length, _ = x.shape
        u, z = self.w_in(x).chunk(2, dim=-1)
        u = F.conv1d(u.transpose(1, 2), self.conv_weight[:, None], self.conv_bias,
                     padding=self.k - 1, groups=self.e)
        u = F.silu(u[..., :length].transpose(1, 2))
        delta_low, bm, cm = self.w_x(u).split([self.r, self.n, self.n], dim=-1)
        delta = F.softplus(self.w_dt(delta_low))
        a = -torch.exp(self.A_log)
        h = x.new_zeros(b, self.e, self.n)
        ys = []
        for i in range(length):
            h = torch.exp(delta[:, i, :, None] * a) * h + \
                (delta[:, i] * u[:, i])[:, :, None] * bm[:, i, None, :]
            ys.append((h @ cm[:, i, :, None]).squeeze(-1))
        y = torch.stack(ys, dim=1) + u * self.D
        return self.w_out(y * F.silu(z))


class RetNet(nn.Module):  # §19, non-causal: the two-sided decay γ^|n−m|
    def __init__(self, d, heads, length, options):
        super().__init__()
        self.heads, dh = heads, d // heads
        self.w_q, self.w_k, self.w_v, self.w_g, self.w_o = (
            xavier_linear(d, d, bias=False) for _ in range(5))
        self.ln = nn.LayerNorm(d)  # its affine only: the norm itself runs per head of d_h
        theta = 10000.0 ** (-2 * torch.arange(dh // 2, dtype=torch.float64) / dh)
        angle = torch.arange(length, dtype=torch.float64)[:, None] * theta[None]  # [ℓ, d_h/2]
        self.register_buffer("cos", angle.cos().float(), persistent=False)
        self.register_buffer("sin", angle.sin().float(), persistent=False)
        gamma = 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float64))
        pos = torch.arange(length)
        distance = (pos[:, None] - pos[None]).abs().double()
        self.register_buffer("decay", (gamma[:, None, None] ** distance).float(), persistent=False)

    def rotate(self, x):  # [B, h, N, d_h]: pair (2j, 2j+1) at position t turned by t·θ_j
        n = x.size(2)
        cos, sin = self.cos[:n, :, None], self.sin[:n, :, None]
        pairs = x.unflatten(-1, (-1, 2))
        even, odd = pairs[..., :1], pairs[..., 1:]
        return torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)

    def forward(self, x):
        n, dh = x.size(1), x.size(2) // self.heads
        q = self.rotate(split_heads(self.w_q(x), self.heads))
        k = self.rotate(split_heads(self.w_k(x), self.heads)) / math.sqrt(dh)
        v = split_heads(self.w_v(x), self.heads)
        ret = ((q @ k.transpose(2, 3)) * self.decay[:, :n, :n]) @ v
        o = merge_heads(F.layer_norm(ret, (dh,), eps=1e-5)) * self.ln.weight + self.ln.bias
        return self.w_o(F.silu(self.w_g(x)) * o)


def fft_conv(x, kernel):
    """y[:, i] = Σ_j kernel[(i − j) mod L] x[:, j] over x [B, N, d], kernel [L, d], L ≥ 2N − 1, by
    real FFT (torch.fft.rfft/irfft, as a PyTorch user would write it)."""
    n, length = x.shape[1], kernel.shape[0]
    y = torch.fft.irfft(torch.fft.rfft(x, n=length, dim=1) * torch.fft.rfft(kernel, n=length, dim=0),
                        n=length, dim=1)
    return y[:, :n]


class S4d(nn.Module):  # §16, non-causal: K_f at lags 0…N−1 and K_b at lags −1…−(N−1), one FFT
    def __init__(self, d, heads, length, options):
        super().__init__()
        n = int(options.get("state", 32))
        self.log_dt = nn.Parameter(torch.empty(d).uniform_(math.log(0.001), math.log(0.1)))
        self.A_re_log = nn.Parameter(torch.full((d, n), math.log(0.5)))
        self.A_im = nn.Parameter(math.pi * torch.arange(n, dtype=torch.float32).repeat(d, 1))
        self.C_f = nn.Parameter(torch.randn(d, n, 2) * math.sqrt(0.5))
        self.C_b = nn.Parameter(torch.randn(d, n, 2) * math.sqrt(0.5))
        self.D = nn.Parameter(torch.randn(d))
        self.w_out = xavier_linear(d, 2 * d)

    def kernel(self, c, lags):
        """K[l, c] = 2·Re(Σ_k C B̄ Ā^l) for the given lags, in complex arithmetic."""
        a = torch.complex(-torch.exp(self.A_re_log), self.A_im)
        dt_a = torch.exp(self.log_dt)[:, None] * a
        b_bar = (torch.exp(dt_a) - 1) / a
        w = torch.view_as_complex(c.contiguous()) * b_bar                 # [d, n]
        powers = torch.exp(dt_a[:, :, None] * lags.to(dt_a.dtype))        # [d, n, M]
        return (2 * torch.einsum("dn,dnm->dm", w, powers).real).t()       # [M, d]

    def forward(self, x):
        n = x.shape[1]
        length = 2 * n
        lags = torch.arange(n, device=x.device)
        k_f = self.kernel(self.C_f, lags)
        k_b = self.kernel(self.C_b, torch.arange(n - 1, 0, -1, device=x.device))
        gap = x.new_zeros(length - 2 * n + 1, x.shape[2])
        s = fft_conv(x, torch.cat([k_f, gap, k_b])) + self.D * x
        return F.glu(self.w_out(F.gelu(s)), dim=-1)


class Hyena(nn.Module):  # §18, order 2; left to right in every mode
    def __init__(self, d, heads, length, options):
        super().__init__()
        bands = int(options.get("bands", 8))
        self.d = d
        self.w_in = xavier_linear(d, 3 * d)
        self.w_conv = nn.Parameter(torch.empty(3 * d, 3))
        nn.init.uniform_(self.w_conv, -math.sqrt(6 / (3 * d + 3)), math.sqrt(6 / (3 * d + 3)))
        self.b_conv = nn.Parameter(torch.zeros(3 * d))
        self.w_out = xavier_linear(d, d)
        self.beta_1, self.beta_2 = nn.Parameter(torch.randn(d)), nn.Parameter(torch.randn(d))
        self.filter_1 = xavier_linear(1 + 2 * bands, 64)  # mixlab's names: filter_1 … filter_3
        self.filter_2 = xavier_linear(64, 64)
        self.filter_3 = xavier_linear(64, 2 * d)
        t = torch.arange(length, dtype=torch.float32)[:, None] / length
        f = torch.arange(1, bands + 1, dtype=torch.float32)[None, :]
        waves = torch.stack([torch.cos(2 * math.pi * f * t), torch.sin(2 * math.pi * f * t)], 2)
        self.register_buffer("features", torch.cat([t, waves.reshape(length, 2 * bands)], 1))
        self.register_buffer("window", torch.exp(-t * torch.linspace(3.07, 15.35, d)[None, :]))

    def forward(self, x):
        n, d = x.shape[1], self.d
        u = F.conv1d(self.w_in(x).transpose(1, 2), self.w_conv[:, None], self.b_conv, padding=2,
                     groups=3 * d)[..., :n].transpose(1, 2)
        v, x1, x2 = u.split(d, dim=-1)
        hidden = torch.sin(self.filter_2(torch.sin(self.filter_1(self.features[:n]))))
        h1, h2 = (self.filter_3(hidden) * self.window[:n].repeat(1, 2)).split(d, dim=-1)
        length = 2 * n
        z1 = x1 * (fft_conv(v, F.pad(h1, (0, 0, 0, length - n))) + self.beta_1 * v)
        z2 = x2 * (fft_conv(z1, F.pad(h2, (0, 0, 0, length - n))) + self.beta_2 * z1)
        return self.w_out(z2)


def make_mixer(name, d, heads, length, options, ffn_dim):
    """The mixer `name` (mixlab's registry names) and its block style (§1)."""
    simple = {"attention": Attention, "mlp-mixer": MlpMixer, "external": External, "fnet": FNet,
              "hcsa": Hcsa, "linformer": Linformer, "linear-attention": LinearAttention,
              "retnet": RetNet, "s4d": S4d, "hyena": Hyena}
    if name in simple:
        return simple[name](d, heads, length, options), "prenorm"
    if name == "resmlp":
        return ResMlp(d, heads, length, options), "resmlp"
    if name == "ffonly":
        return FfOnly(d, heads, length, options), "noprenorm"
    if name == "mamba":
        return Mamba(d, heads, length, options), "unit"
    if name in ("gmlp", "amlp"):
        return GatedMlp(d, heads, length, options, name == "amlp", ffn_dim), "unit"
    if name in ("lightconv", "dynconv"):
        return Convolution(d, heads, length, options, name == "dynconv"), "prenorm"
    singles = {"synth-random": "R", "synth-fixed": "Fix", "synth-dense": "D",
               "synth-frandom": "FR", "synth-fdense": "FD"}
    if name in singles:
        return Synthesizer(d, heads, length, [singles[name]], False, options), "prenorm"
    if name.startswith("synth-mix:"):
        return Synthesizer(d, heads, length, name.split(":", 1)[1].split("+"), True, options), "prenorm"
    raise KeyError(name)


# ---- blocks and models (§1) ----

class Affine(nn.Module):  # §5's Aff(x) = α ⊙ x + β
    def __init__(self, d):
        super().__init__()
        self.alpha, self.beta = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return x * self.alpha + self.beta


def block_norm(style, d):
    return Affine(d) if style == "resmlp" else nn.LayerNorm(d, eps=1e-5)


class Block(nn.Module):
    """Pre-LN encoder block with the mixer's exceptions: resmlp (affine norms, LayerScale 0.1),
    ffonly (no norm before the mixer), gmlp/amlp (the unit is the whole block)."""

    def __init__(self, mixer, style, d, ffn_dim, dropout):
        super().__init__()
        self.mixer, self.style = mixer, style
        self.norm1 = None if style == "noprenorm" else block_norm(style, d)
        self.drop = nn.Dropout(dropout)
        self.ffn = None
        if style != "unit":
            self.norm2 = block_norm(style, d)
            self.ffn = nn.Sequential(xavier_linear(d, ffn_dim), nn.GELU(), xavier_linear(ffn_dim, d))
        if style == "resmlp":
            self.scale1 = nn.Parameter(torch.full((d,), 0.1))
            self.scale2 = nn.Parameter(torch.full((d,), 0.1))

    def forward(self, x):
        h = self.mixer(self.norm1(x) if self.norm1 is not None else x)
        if self.style == "resmlp":
            h = h * self.scale1
        y = x + self.drop(h)
        if self.ffn is None:
            return y
        f = self.ffn(self.norm2(y))
        if self.style == "resmlp":
            f = f * self.scale2
        return y + self.drop(f)


class Classifier(nn.Module):
    """§1's image classifier: p×p patches in raster order, each flattened (channel, row, column)."""

    def __init__(self, mixer, dim, layers, patch, dropout, heads=4, options=None):
        super().__init__()
        options = options or {}
        self.patch = patch
        grid = IMAGE_SIDE // patch
        length = grid * grid  # ℓ = the patch count
        self.embed = xavier_linear(patch * patch, dim)
        self.positions = nn.Parameter(torch.randn(length, dim) * 0.02)
        blocks, style = [], "prenorm"
        for _ in range(layers):
            m, style = make_mixer(mixer, dim, heads, length, options, 4 * dim)
            blocks.append(Block(m, style, dim, 4 * dim, dropout))
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = block_norm(style, dim)
        self.head = xavier_linear(dim, CLASSES)

    def forward(self, images):
        b, p, g = images.size(0), self.patch, IMAGE_SIDE // self.patch
        x = images.view(b, 1, g, p, g, p).permute(0, 2, 4, 1, 3, 5).reshape(b, g * g, p * p)
        h = self.embed(x) + self.positions
        for block in self.blocks:
            h = block(h)
        return self.head(self.final_norm(h).mean(1))


class Translator(nn.Module):
    """bench_train_step's translator: pre-LN attention encoder-decoder, GELU FFN of width 4d,
    learned positions, final LayerNorms, 4 heads."""

    def __init__(self, dim, layers, length, dropout, src_vocab=31, tgt_vocab=43):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, dim)
        self.tgt_embed = nn.Embedding(tgt_vocab, dim)
        self.src_pos = nn.Parameter(torch.randn(length, dim) * 0.02)
        self.tgt_pos = nn.Parameter(torch.randn(length, dim) * 0.02)
        self.core = nn.Transformer(d_model=dim, nhead=4, num_encoder_layers=layers,
                                   num_decoder_layers=layers, dim_feedforward=4 * dim,
                                   dropout=dropout, activation="gelu", batch_first=True,
                                   norm_first=True)
        # mixlab drops out only each residual branch's output (§1); torch's layers also drop
        # the attention weights and the FFN's hidden units: those two are turned off.
        for layer in list(self.core.encoder.layers) + list(self.core.decoder.layers):
            layer.dropout = nn.Identity()  # the FFN's inner dropout
            for attention in (getattr(layer, "self_attn", None), getattr(layer, "multihead_attn", None)):
                if attention is not None:
                    attention.dropout = 0.0
        self.head = nn.Linear(dim, tgt_vocab)

    def forward(self, src, tgt_in):
        s, t = src.size(1), tgt_in.size(1)
        # True: masked, like the padding masks; on the batch's device (a GPU's too)
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)
        h = self.core(self.src_embed(src) + self.src_pos[:s], self.tgt_embed(tgt_in) + self.tgt_pos[:t],
                      tgt_mask=causal, src_key_padding_mask=src.eq(0),
                      tgt_key_padding_mask=tgt_in.eq(0), memory_key_padding_mask=src.eq(0))
        return self.head(h)


def synthetic_translation_batch(batch, length, src_vocab=31, tgt_vocab=43):
    """The batch of bench_train_step.cpp: example i has len - i % (len // 2) tokens."""
    src = torch.zeros(batch, length, dtype=torch.long)
    tgt = torch.zeros(batch, length, dtype=torch.long)
    for i in range(batch):
        n = length - i % (length // 2)
        for t in range(n):
            src[i, t] = 3 + (i * 7 + t * 3) % (src_vocab - 3)
            tgt[i, t] = 3 + (i * 5 + t * 11) % (tgt_vocab - 3)
        tgt[i, 0] = 1
        tgt[i, n - 1] = 2
    return src, tgt


# ---- the classifier on token sequences (bench/scaling.py: cost against length) ----

TOKEN_VOCAB = 16  # bench_train_step --input tokens: about ListOps' symbol count


class TokenClassifier(nn.Module):
    """§1's classifier on token ids: embedding, learned positions (ℓ = the sequence length), the
    encoder, final norm, mean over tokens, a linear head; every sequence full length (no mask)."""

    def __init__(self, mixer, dim, layers, length, dropout, heads=4, options=None):
        super().__init__()
        options = options or {}
        self.embed = nn.Embedding(TOKEN_VOCAB, dim)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.positions = nn.Parameter(torch.randn(length, dim) * 0.02)
        blocks, style = [], "prenorm"
        for _ in range(layers):
            m, style = make_mixer(mixer, dim, heads, length, options, 4 * dim)
            blocks.append(Block(m, style, dim, 4 * dim, dropout))
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = block_norm(style, dim)
        self.head = xavier_linear(dim, CLASSES)

    def forward(self, ids):
        h = self.embed(ids) + self.positions[:ids.size(1)]
        for block in self.blocks:
            h = block(h)
        return self.head(self.final_norm(h).mean(1))


def synthetic_token_batch(batch, length):
    """bench_train_step --input tokens' batch: token t of example i is (7i + 3t) mod the vocabulary,
    its label i mod 10."""
    i = torch.arange(batch).view(-1, 1)
    t = torch.arange(length).view(1, -1)
    return (i * 7 + t * 3) % TOKEN_VOCAB, torch.arange(batch) % CLASSES
