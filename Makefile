# Thin entry points over CMake. `make demo` and `make test` work on a fresh Debian 12 machine:
# both install the Debian packages we build with (if missing) before they build.
PRESET    ?= release
BUILD_DIR ?= build/$(PRESET)
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)

APT_PACKAGES := cmake ninja-build g++ make python3 python3-numpy python3-yaml \
  libyaml-cpp-dev libyaml-dev pkg-config libcli11-dev libeigen3-dev libfmt-dev libspdlog-dev \
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev nettle-dev \
  help2man dpkg-dev bash-completion protobuf-compiler python3-protobuf
# protobuf-compiler: protoc encodes the binary HloProto test dumps (tests/cli/hlo_overlap_test.py);
# a test dependency only, hlo-overlap reads the wire format itself. python3-protobuf: the Python
# reader make bench measures profile-report against (tests/perf/profile_baseline.py).
# help2man: the man pages, generated from each tool's --help at build time; dpkg-dev: make deb's
# dpkg-shlibdeps, which computes the package's Depends; bash-completion: the install test loads
# the completions through its loader, as a user's shell does.
# make lint (cmake/lint-python.sh) checks every Python file with pyflakes3, yapf3 and mypy: yapf
# rather than black because it keeps the driver's Google style with 2-space indents; mypy reads
# NumPy's own annotations (python3-numpy) and PyYAML's stubs in python3-typeshed, which mypy only
# recommends (deps installs no recommends).
LINT_PACKAGES := pyflakes3 yapf3 mypy python3-typeshed
# clang and its runtime libraries: the sanitizer build (make test-asan, make fuzz).
FUZZ_PACKAGES := clang-14 libclang-rt-14-dev
FUZZ_SECONDS ?= 60
# CI's smoke run of each fuzzer (make fuzz-ci); the long runs are `make fuzz`'s.
CI_FUZZ_SECONDS := 8
FUZZ_PARALLEL ?= $(JOBS)

.PHONY: all deps build demo test test-asan fuzz fuzz-ci lint ci bench install deb format clean

all: build

# Installs only what is missing, so a machine that has everything never calls apt-get.
deps:
	@./cmake/install-deps.sh $(APT_PACKAGES) $(LINT_PACKAGES)

$(BUILD_DIR)/build.ninja:
	cmake --preset $(PRESET)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	$(BUILD_DIR)/bin/render-bench --demo --name abtest-bench

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# One clang build (build/asan: ASan + UBSan + libFuzzer's coverage instrumentation) serves both
# the unit tests under sanitizers (halt on error) and the fuzz targets, so CI compiles the
# library twice (release and this), not three times. It keeps line tables only (-gline-tables-only,
# CMakePresets.json): enough for the file:line of sanitizer stack traces, and a faster build.
# The asan test preset runs the library domains' unit tests (ctest label domain_unit: base, k8s,
# payload, hlo, logs, profile, bench; about 840 cases), and make test-asan builds only those
# (target domain_tests) before make fuzz adds the fuzzers. CI must stay well under 20 minutes on 2
# cores, and on 2026-12-06 the whole suite under sanitizers took 16 minutes with the fuzz run
# (build 11, tests 3.7): most of it the tools, their in-process tests, their man pages and the
# CLI tests, whose C++ is the thin option parsing and printing over the same library. What runs
# unsanitized there still runs in make test; untrusted input reaches the library's parsers, which
# the fuzzers (make fuzz, built in this same tree) drive under ASan and UBSan. The library compiles
# at -O1 here, as ASan's documentation advises for a usable speed, rather than -O2: a shorter
# build; and 8 files to a unit (the preset's RTB_UNITY_LIBRARY, CMakeLists.txt says why).
# `cmake --build build/asan && ctest --test-dir build/asan` still runs everything sanitized, for a
# change to a tool's own code.
build/asan/build.ninja:
	cmake --preset asan

test-asan: deps
	@./cmake/install-deps.sh $(FUZZ_PACKAGES)
	$(MAKE) build/asan/build.ninja
	cmake --build build/asan -j $(JOBS) --target domain_tests
	ctest --preset asan -j $(JOBS)

# Every libFuzzer target for FUZZ_SECONDS each, FUZZ_PARALLEL at a time (default: one per core),
# corpora seeded from testdata/ and fuzz/seeds/.
fuzz: deps
	@./cmake/install-deps.sh $(FUZZ_PACKAGES)
	$(MAKE) build/asan/build.ninja
	cmake --build build/asan -j $(JOBS) --target fuzzers
	FUZZ_PARALLEL=$(FUZZ_PARALLEL) ./fuzz/run.sh build/asan $(FUZZ_SECONDS)

# Python: no pyflakes3 finding, no yapf3 change (.style.yapf), no mypy error (mypy.ini) in the
# driver, its tests, the CLI tests or any other .py file (CONTRIBUTING.md, "Python").
lint: deps
	./cmake/lint-python.sh

# What CI runs (.ci/run): the Python lint, every test, the tests again under sanitizers, and a
# smoke run of each fuzzer.
ci: lint test test-asan fuzz-ci

fuzz-ci:
	$(MAKE) fuzz FUZZ_SECONDS=$(CI_FUZZ_SECONDS)

bench: build
	cmake --build $(BUILD_DIR) -j $(JOBS) --target perf_benchmarks
	$(BUILD_DIR)/bin/perf_benchmarks

# The tools, their man pages and bash completions under PREFIX (DESTDIR=... stages them).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# The Debian package, $(BUILD_DIR)/rl-trainer-bench_<version>_<arch>.deb: install it with
# `apt install ./rl-trainer-bench_*.deb`.
deb: build
	cd $(BUILD_DIR) && cpack -G DEB

# Formats the code: clang-format for C++, yapf3 for Python (the format make lint checks).
format:
	clang-format -i $$(git ls-files '*.cc' '*.h')
	yapf3 -i $$(git ls-files '*.py')

clean:
	rm -rf build
