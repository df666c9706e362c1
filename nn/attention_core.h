// Which softmax-attention core the mixers run, as PyTorch's sdpa_kernel() picks one for
// scaled_dot_product_attention:
//   Fused (the default): the backends' fused kernels (fused_attention, fused_self_attention,
//         fused_synthesized_attention); a head's scores never exist whole, P is recomputed in
//         the backward;
//   Math: the equation's own ops, each a kernel of its own: matmul(q, kᵀ), the scale, the
//         masked softmax, matmul(P, v); the [B, h, N, M] scores and probabilities are formed and
//         kept for the backward.
// Both give the same numbers up to float32 rounding. Math exists to compare against: a kernel
// writer checks a fused core against it, and `MIXLAB_DEBUG` shows where each spends its time
// (docs/speed.md measures both on the attention classifier). A mixing recorder (`mixlab
// inspect`) needs the probabilities, so it always gets Math.
//
// Chosen per process: MIXLAB_ATTENTION_CORE=fused|math (read once, at first use), or
// set_attention_core(), which overrides it.
#pragma once

namespace mixlab {

enum class AttentionCore { Fused, Math };

// The core chosen: set_attention_core()'s, else MIXLAB_ATTENTION_CORE's, else Fused. An
// unknown MIXLAB_ATTENTION_CORE value is an error (it names the variable and the values).
AttentionCore attention_core();
void set_attention_core(AttentionCore core);
// "fused" or "math"; and back (an Error naming `what` and the accepted values otherwise).
const char* attention_core_name(AttentionCore core);
AttentionCore parse_attention_core(const char* text, const char* what);

// Whether the mixers take their attention's equation path here: Math chosen, or a mixing
// recorder active on this thread.
bool math_attention();

}  // namespace mixlab
