#include "train/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tt {

void LrSchedule::validate() const {
  if (kind != "constant" && kind != "cosine" && kind != "linear" && kind != "wsd")
    usage_fail("--lr-schedule: constant, cosine, linear or wsd (got '" + kind + "')");
  if (!(std::isfinite(min) && min >= 0 && min <= peak))
    usage_fail(fmt::format("--min-lr: must be in [0, --learning-rate {:g}] (got {:g})", peak, min));
  if (warmup < 0 || warmup >= total)
    usage_fail(fmt::format("--lr-warmup-steps: must be in [0, the schedule's {} steps) (got {})", total, warmup));
  if (decay < 0 || (kind == "wsd" && warmup + wsd_decay() > total))
    usage_fail(fmt::format("--lr-decay-steps: the warmup and the decay must fit in the schedule's {} steps (got {} and {})", total,
                           warmup, decay));
  if (decay != 0 && kind != "wsd") usage_fail("--lr-decay-steps: the length of wsd's decay (--lr-schedule wsd)");
  if (min != 0 && kind == "constant") usage_fail("--min-lr: where a schedule decays to (cosine, linear or wsd)");
}

double LrSchedule::at(int64_t step) const {
  if (step <= warmup) return peak * double(step) / double(warmup);
  if (kind == "constant") return peak;
  const int64_t decay_steps = kind == "wsd" ? wsd_decay() : total - warmup;
  const int64_t start = total - decay_steps;  // the last step before the decay
  if (step <= start || decay_steps <= 0) return peak;
  const double p = std::min(1.0, double(step - start) / double(decay_steps));  // 1 at the last step
  if (kind == "cosine") return min + 0.5 * (1.0 + std::cos(M_PI * p)) * (peak - min);
  return peak - p * (peak - min);  // linear, and wsd's decay
}

std::string LrSchedule::describe() const {
  std::string s = kind == "constant" ? fmt::format("constant {:g}", peak)
                                     : fmt::format("{} from {:g} to {:g} over {} steps", kind, peak, min, total);
  if (kind == "wsd") s += fmt::format(" (the decay in the last {})", wsd_decay());
  if (warmup > 0) s += fmt::format(", after {} warmup steps", warmup);
  return s;
}

}  // namespace tt
