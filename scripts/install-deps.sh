#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the build needs, only those that are missing; does
# nothing when everything is present (as on the GPU machine, which has no package registry).
# The CUDA toolkit is expected at /usr/local/cuda; without nvcc the CPU backend alone is built.
set -euo pipefail

missing=()
need() {  # need PACKAGE TEST...: the package is missing when none of the tests succeeds
  local pkg=$1; shift
  for t in "$@"; do eval "$t" >/dev/null 2>&1 && return 0; done
  missing+=("$pkg")
}
need make          "command -v make"
need g++           "command -v g++"
need cmake         "command -v cmake"
need ninja-build   "command -v ninja"
need libcli11-dev  "test -f /usr/include/CLI/CLI.hpp"
need nlohmann-json3-dev "test -f /usr/include/nlohmann/json.hpp"
need libfmt-dev    "test -f /usr/include/fmt/format.h"
need libgtest-dev  "test -f /usr/include/gtest/gtest.h"
need libopenblas-dev "ls /usr/include/x86_64-linux-gnu/openblas*/cblas.h" "test -f /usr/include/openblas/cblas.h" \
                     "ls /usr/include/*/openblas*/cblas.h"

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
