#include "core/error.h"

namespace tt {

void fail(const std::string& message) { throw Error(message); }
void usage_fail(const std::string& message) { throw UsageError(message); }

}  // namespace tt
