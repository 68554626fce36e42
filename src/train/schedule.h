// The learning rate of each step (--lr-schedule): a linear warmup over the first W steps from
// peak/W to the peak, then
//   constant  the peak;
//   cosine    half a cosine from the peak down to the minimum at the last step;
//   linear    a straight line from the peak down to the minimum at the last step;
//   wsd       warmup-stable-decay: the peak until the last D steps, then a straight line down
//             to the minimum at the last step.
// A function of the step alone (1-based, the optimizer's t), so a resumed run follows the same
// curve. The trainer hands each step's value to the optimizer with its other scalars, which the
// CUDA backend copies to device memory before the step: a replayed CUDA graph reads it there.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

namespace tt {

struct LrSchedule {
  std::string kind = "constant";  // constant, cosine, linear, wsd
  double peak = 3e-4, min = 0.0;
  int64_t warmup = 0;      // steps of the linear warmup
  int64_t decay = 0;       // wsd: steps of the final decay (0: a fifth of the run)
  // wsd's decay: `decay`, else a fifth of the schedule and at least its last step, so that even a
  // short run ends at `min`.
  int64_t wsd_decay() const { return decay ? decay : std::max<int64_t>(1, total / 5); }
  int64_t total = 50;      // the schedule's last step (--lr-schedule-steps, else --num-steps); the minimum after it

  // UsageError naming the flag for a schedule that cannot be.
  void validate() const;
  double at(int64_t step) const;
  // "cosine from 0.0003 to 3e-05 over 5000 steps, after 100 warmup steps", for the run's header
  // and checkpoints.
  std::string describe() const;
};

}  // namespace tt
