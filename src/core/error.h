// Errors. A UsageError is the user's to fix (bad flag, unreadable file, no GPU, not enough
// memory): the program prints one line and exits with code 2. Any other Error is a failure
// of the program or the device (exit code 1).
#pragma once
#include <stdexcept>
#include <string>

namespace tt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : Error {
  using Error::Error;
};

[[noreturn]] void fail(const std::string& message);
[[noreturn]] void usage_fail(const std::string& message);

}  // namespace tt

// Internal invariant or library call that must hold; the message names what failed.
#define TT_CHECK(cond, message)                                                            \
  do {                                                                                     \
    if (!(cond)) ::tt::fail(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                            (message));                                                    \
  } while (0)
