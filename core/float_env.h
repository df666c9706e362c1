// Subnormal ("denormal") floats, flushed to zero inside the CPU kernels.
//
// Why: x86 cores handle a subnormal operand or result in microcode, 10-100x slower than a normal
// one. Softmax makes them all the time (exp of a score 90 below the row's maximum is subnormal
// in float32), and they travel on into the products: in a G2P training step 6% of the rows of
// some matrices were subnormal, and OpenBLAS's sgemm ran 4-20x slower on them than on the same
// shapes with zeros (measured: 1152x128 @ 128x512 with every 16th row subnormal, 24 ms against
// 1.06 ms flushed). A value below 1.2e-38 (float32) or 2.2e-308 (float64) carries nothing a
// model can use, so the kernels run with the CPU's flush-to-zero and denormals-are-zero modes,
// as TensorFlow's and oneDNN's do.
//
// The modes are per thread: a ScopedFlushDenormals sets them for the kernel that runs under it
// and restores the caller's modes after, so code outside the engine is unaffected. They are
// on unless set_flush_denormals(false) is called. On CPUs
// other than x86-64 the guard does nothing.
#pragma once

namespace mixlab {

bool flush_denormals();
void set_flush_denormals(bool on);

class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  unsigned saved_ = 0;
  bool changed_ = false;
};

}  // namespace mixlab
