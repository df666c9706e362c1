// Index checks, the embedding lookup (a gather of table rows) and its backward (a scatter-add).
#include "backends/reference/reference_backend.h"

namespace mixlab {

// Every idx[i] in [0, limit) or equal to `allowed`, else Error("<what> <value> <why>").
void ReferenceBackend::check_indices(const View& idx, int64_t limit, int64_t allowed,
                                     const char* what, const char* why) {
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int64_t v = idx.as<int32_t>()[i];
    if ((v < 0 || v >= limit) && v != allowed) fail(what, " ", v, " ", why);
  }
}

// out[i, :] = table[idx[i], :]   (a row of zeros for an index outside the table, e.g. −1)
void ReferenceBackend::gather_rows(const View& table, const View& idx, const View& out,
                                   int64_t count, int64_t dim) {
  dispatch_all(table.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = idx.as<int32_t>()[i];
      const bool inside = row >= 0 && row < table.shape[0];
      for (int64_t c = 0; c < dim; ++c)
        out.as<T>()[i * dim + c] = inside ? table.as<T>()[row * dim + c] : T(0);
    }
  });
}

// dtable[idx[i], :] += grad[i, :]   (in order of i; an index outside the table adds nothing)
void ReferenceBackend::scatter_add_rows(const View& grad, const View& idx, const View& dtable,
                                        int64_t count, int64_t dim) {
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = idx.as<int32_t>()[i];
      if (row < 0 || row >= dtable.shape[0]) continue;
      for (int64_t c = 0; c < dim; ++c) dtable.as<T>()[row * dim + c] += grad.as<T>()[i * dim + c];
    }
  });
}

}  // namespace mixlab
