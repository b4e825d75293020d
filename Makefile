# mxserve: the two commands a newcomer runs are `make run` and `make test`.
# Both install what they need (scripts/install-deps.sh, apt-get only) and build first.
.PHONY: all deps shared-check train-model build run test test-release test-asan format check-format fuzz reference-fixtures clean

JOBS ?= $(shell nproc)
MXSERVE := ./build/release/src/cli/mxserve

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# The main job. Until the server lands: inspect the real GLM-5.2 config and the bundled test
# checkpoint (the server issue makes this serve the bundled model).
run: build
	$(MXSERVE) inspect --config ../shared/configs/glm-5.2.json
	$(MXSERVE) inspect tests/data/tiny-glm52

test: deps shared-check check-format test-release test-asan

shared-check:
	@test -d ../shared/configs || { echo "make test: ../shared (test data and configs) must sit beside the repository"; exit 1; }

test-release: build
	ctest --preset release

test-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan

check-format:
	@scripts/check-format.sh

format:
	@scripts/check-format.sh --fix

# libFuzzer targets (clang): each runs FUZZ_SECONDS (default 60).
fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

# Regenerates the test checkpoints and golden fixtures with the PyTorch reference (not in CI:
# needs Debian's python3-torch; CI uses the committed files).
reference-fixtures:
	/usr/bin/python3 tools/make_fixtures.py

# Trains the bundled model under models/ (PyTorch on Debian's python3; not in CI).
train-model:
	/usr/bin/python3 tools/train.py

clean:
	rm -rf build
