// `tiny_llama bench --nproc-per-node N TRAIN-FLAGS...`: data-parallel scaling on this node.
// The same training (train's flags; --batch-size is per process, so the work per GPU stays
// the same) runs on one GPU, on each of the N GPUs at once, then on 2, 4, 8, ... GPUs and on N,
// each with plain all-reduce (--zero 0) and with ZeRO-1 (--zero 1). Each run's tokens/s is its
// summary's (the mean step after the warm-up); the efficiency is the N-GPU tokens/s over N times
// the one-GPU runs' mean, and over N times the slowest GPU's. --json PATH writes the table.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace tt {

// Returns the exit code: 0, or the failed run's (its log is printed).
int run_scaling_bench(int nproc, const std::vector<std::string>& train_args, std::ostream& out);

}  // namespace tt
