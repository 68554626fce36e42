# Thin wrapper over CMake. `make train` and `make test` are the two commands of the README.
BUILD ?= build
ARGS ?=
JOBS ?= $(shell nproc)

.PHONY: deps configure build train test test-cpu test-gpu gpu-check plots docs-check clean

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Trains the default model: on the GPU when one is present, otherwise on the CPU (it says so).
train: build
	./$(BUILD)/tiny_llama $(ARGS)

# CPU tests always; the GPU tests (label gpu) too when a GPU is present.
test: build
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L 'cpu|gpu'; \
	else \
	  echo "No GPU found: running the CPU tests (label cpu)"; \
	  cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L cpu; \
	fi

test-cpu: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L cpu

test-gpu: build
	cd $(BUILD) && ctest --output-on-failure -L gpu

gpu-check:
	bash scripts/gpu-check.sh

# gnuplot and numpy for the charts of tools/plot_results.py (PyTorch is needed only for
# tools/pytorch_reference.py, on a GPU machine).
plots:
	@bash scripts/install-deps.sh plots
	@echo "Charts: python3 tools/plot_results.py --help"

# Every relative link and image of the docs resolves; the workshop's CPU commands run.
docs-check: build
	bash scripts/check-docs.sh

clean:
	rm -rf $(BUILD)
