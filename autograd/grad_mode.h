// Whether ops record the graph. A NoGradGuard turns recording off for its scope (evaluation,
// optimizer updates, the backward pass itself), like torch.no_grad().
#pragma once

namespace mixlab {

bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace mixlab
