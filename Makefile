# mxserve: the two commands a newcomer runs are `make run` and `make test`.
# Both install what they need (scripts/install-deps.sh, apt-get only) and build first.
.PHONY: all npm-deps deps shared-check train-model build run test test-release test-asan format check-format check-tidy check-thread-safety fuzz reference-fixtures clean

JOBS ?= $(shell nproc)
MXSERVE := ./build/release/src/cli/mxserve

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# The main job: build, then serve the bundled model on 127.0.0.1:30000; the server prints a
# ready-to-paste curl line once the model is loaded. Ctrl-C (or SIGTERM) drains and exits.
run: build
	$(MXSERVE) serve models/glm-moe-dsa-arith-6m --host 127.0.0.1 --port 30000

test: deps shared-check check-format check-tidy check-thread-safety test-release test-asan

shared-check:
	@test -d ../shared/configs || { echo "make test: ../shared (test data and configs) must sit beside the repository"; exit 1; }

# The thousand-stream client test (1000 streams on one client thread against an 1100-thread
# mock server) runs alone after the rest: beside the other tests on 2 cores its mock server
# cannot accept and serve 1000 connections in time and drops some.
SERIAL_TESTS := Client.OneThreadDrivesAThousandStreams

test-release: build npm-deps
	ctest --preset release -E '$(SERIAL_TESTS)'
	ctest --preset release -R '$(SERIAL_TESTS)'

test-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -E '$(SERIAL_TESTS)'
	ctest --preset asan -R '$(SERIAL_TESTS)'

# The server's end-to-end tests drive it with the official openai and @anthropic-ai/sdk clients
# from npm (pinned in tests/server/package-lock.json); the web page's test drives Chromium with
# playwright-core (pinned in tests/webui/package-lock.json).
npm-deps:
	@test -d tests/server/node_modules/openai -a -d tests/server/node_modules/@anthropic-ai/sdk || \
	  npm --prefix tests/server ci --no-audit --no-fund
	@test -d tests/webui/node_modules/playwright-core || npm --prefix tests/webui ci --no-audit --no-fund

check-format:
	@scripts/check-format.sh

format:
	@scripts/check-format.sh --fix

# clang-tidy (.clang-tidy) on the C++ files changed since the merge base with main.
check-tidy:
	@scripts/check-tidy.sh

# clang's -Wthread-safety over the files with GUARDED_BY state (base/mutex.h), syntax only.
check-thread-safety:
	@scripts/check-thread-safety.sh

# libFuzzer targets (clang): each runs FUZZ_SECONDS (default 60).
fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

# Regenerates the test checkpoints and golden fixtures with the PyTorch reference (not in CI:
# needs Debian's python3-torch, installed by install-deps.sh --train; CI uses the committed files).
# tiny-mxfp4, tiny-fp8 and tiny-glm52-fp8 are the bf16 test checkpoints through `mxserve quantize`;
# their fixtures (and the bundled model's in FP8) are the reference on those weights dequantized
# by the Python tool (tools/make_quantized_fixtures.py).
reference-fixtures: build
	@scripts/install-deps.sh --train
	/usr/bin/python3 tools/make_fixtures.py
	$(MXSERVE) quantize tests/data/tiny tests/data/tiny-mxfp4 --overwrite
	$(MXSERVE) quantize tests/data/tiny tests/data/tiny-fp8 --format fp8 --overwrite
	$(MXSERVE) quantize tests/data/tiny-glm52 tests/data/tiny-glm52-fp8 --format fp8 --overwrite
	/usr/bin/python3 tools/make_quantized_fixtures.py
	$(MXSERVE) quantize models/glm-moe-dsa-arith-6m /tmp/mxserve-bundled-fp8 --format fp8 --overwrite
	/usr/bin/python3 tools/make_quantized_fixtures.py --ckpt /tmp/mxserve-bundled-fp8 \
	  --name glm-moe-dsa-arith-6m-fp8 --lens 3,17,40

# Trains the bundled model under models/ (PyTorch on Debian's python3; not in CI): ~80 min on
# one core (stage 1 then stage 2; MODEL_CARD.md).
train-model:
	@scripts/install-deps.sh --train
	/usr/bin/python3 tools/train.py

clean:
	rm -rf build
