// The depthwise token convolution of lightconv and dynconv as one op: the kernel reads the K
// neighbouring rows of g itself, where the unfused form padded g with zero rows, stacked K
// shifted windows into a [B, N, K, d] tensor, multiplied them by the broadcast taps and summed
// over K (a copy, a product and a reduction over K·N·d elements each way). The backward gives
// both gradients from one kernel call.
#include "autograd/ops/op_utils.h"

namespace mixlab {
using namespace ops_detail;

namespace {

void check_shapes(const Tensor& g, const Tensor& taps, int64_t left) {
  const char* op = "token_conv";
  check_same(op, {&g, &taps});
  check(g.dim() == 3 && taps.dim() == 4, op,
        ": needs g [B, N, d] and taps [B or 1, N or 1, H, K], got g ", shape_str(g.shape()),
        ", taps ", shape_str(taps.shape()));
  int64_t b = g.size(0), n = g.size(1), d = g.size(2), h = taps.size(2), k = taps.size(3);
  bool batch_fits = taps.size(0) == b || taps.size(0) == 1;
  bool tokens_fit = taps.size(1) == n || taps.size(1) == 1;
  check(batch_fits && tokens_fit && h > 0 && k > 0 && d % h == 0, op,
        ": taps must be [B or 1, N or 1, H, K] with H > 0 dividing d and K > 0 for g [B, N, d]: g ",
        shape_str(g.shape()), ", taps ", shape_str(taps.shape()));
  check(left >= 0 && left < k, op, ": left padding ", left, " must be in [0, K) for K = ", k,
        " (taps ", shape_str(taps.shape()), ")");
}

}  // namespace

Tensor token_conv(const Tensor& g_in, const Tensor& taps_in, int64_t left) {
  check_shapes(g_in, taps_in, left);
  Tensor g = dense(g_in), taps = dense(taps_in);
  Tensor out = Tensor::empty(g.shape(), g.dtype(), g.device());
  if (out.numel() > 0) backend_of(g).token_conv(g.view(), taps.view(), left, out.view());
  return record("token_conv", out, {g_in, taps_in},
                [g = g.detach(), taps = taps.detach(), left](const Tensor& grad) {
                  Tensor dout = dense(grad);
                  Tensor dg = Tensor::empty(g.shape(), g.dtype(), g.device());
                  Tensor dtaps = Tensor::empty(taps.shape(), taps.dtype(), taps.device());
                  if (dg.numel() > 0 || dtaps.numel() > 0)
                    backend_of(g).token_conv_backward(g.view(), taps.view(), dout.view(), left,
                                                      dg.view(), dtaps.view());
                  return std::vector<Tensor>{dg, dtaps};
                });
}

}  // namespace mixlab
