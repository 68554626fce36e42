# Timing only: TT_SKIP_ADAMW=1 makes every AdamW launch return without launching (no update at all).
set -e
sed -i 's/^  const unsigned blocks = blocks_for(p.numel, kThreads);$/  if (std::getenv("TT_SKIP_ADAMW")) return;\n&/' src/ops/adamw.cu
sed -i '0,/^#include "ops\/adamw.h"$/s//#include "ops\/adamw.h"\n\n#include <cstdlib>/' src/ops/adamw.cu
grep -q TT_SKIP_ADAMW src/ops/adamw.cu
