# Fenec's entry points. `make run` and `make test` are the two set-up commands of the README; every
# target that builds first installs what is missing (ci/setup). `make` alone prints the targets.
#
#   make build    BUILD=dir JOBS=n CMAKE_ARGS='-D...'   configure with Ninja and build
#   make ci                                             what .ci/run runs

BUILD ?= build
JOBS ?= 2
# How many test executables ctest runs at once. `make test` runs one at a time; CI runs two.
TEST_JOBS ?= 1
FUZZ_SECONDS ?= 30
HOSTILE_BEFORE ?=
DRILL_RUNS ?= 3
DEMO_DIR ?= /tmp/fenec-demo
LISTEN ?= 127.0.0.1:8081
ROUTER_LISTEN ?= 127.0.0.1:8080
CMAKE_ARGS ?=

ASAN_BUILD := build-asan
# The sanitizer build's flags: asserts on (no -DNDEBUG), full debug info unless CI asks for less.
ASAN_OPT_FLAGS ?= -O1 -g
FUZZ_BUILD := build-fuzz
FUZZ_WORK := $(FUZZ_BUILD)/corpus-work
FUZZ_ARTIFACTS := $(FUZZ_BUILD)/artifacts

# The optimisation and debug-info flags of a RelWithDebInfo build. CI builds twice from nothing on
# two cores, and full debug info is most of a compile's time (ASan at -O2 -g: 70 s for one test
# file, at -O1 -g1: 28 s), so `make ci` asks for line tables only (-g1: stacks and perf still name
# file and line) and the sanitizer build for -O1 with asserts on.
OPT_FLAGS ?= -O2 -g -DNDEBUG

# Options the Makefile states on every configure, so a build folder always reflects the last
# command that configured it (CMake caches -D values). CMAKE_ARGS comes last and wins.
CMAKE_DEFAULTS = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFENEC_WERROR=OFF -DFENEC_UNITY=OFF -DFENEC_TEST_OPT= \
    -DFENEC_TEST_UBSAN=ON -DFENEC_MIMALLOC=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='$(OPT_FLAGS)'

FORMAT_DIRS := $(wildcard engine index ql server shard tools test bench fuzz)

.DEFAULT_GOAL := help
.PHONY: help deps deps-dev configure build run run-cluster test test-slow test-asan ci fuzz bench format clean

help:
	@echo "Fenec make targets:"
	@echo "  make run         build, then start fenec-node on LISTEN ($(LISTEN)) and fenec-shard"
	@echo "                   on ROUTER_LISTEN ($(ROUTER_LISTEN)), create the tenant demo through"
	@echo "                   the router, files in DEMO_DIR ($(DEMO_DIR)); print curl examples"
	@echo "  make run-cluster build, then start three nodes under --lease, a router under"
	@echo "                   --auto-failover 2 --replicas and a standby router on loopback, create"
	@echo "                   demo with its replica, and print how to cut a node off and watch demo"
	@echo "                   fail over"
	@echo "  make test        build, then run the unit suite (ctest -L unit)"
	@echo "  make test-slow   build, then run the slow suites (ctest -L slow)"
	@echo "  make test-asan   the unit suite in an ASan+UBSan build ($(ASAN_BUILD)/)"
	@echo "  make ci          what CI runs: test and test-asan with warnings as errors"
	@echo "  make fuzz        build the libFuzzer targets with clang ($(FUZZ_BUILD)/) and run"
	@echo "                   each for FUZZ_SECONDS ($(FUZZ_SECONDS)) over its seed corpus"
	@echo "  make bench       build, then run every $(BUILD)/bench/*_bench"
	@echo "  make node-bench  build fenec-node, then wrk it beside PostgreSQL 15 pgbench -S"
	@echo "                   (ci/setup-bench installs both); report in $(BUILD)/node-bench.txt"
	@echo "  make shard-bench build fenec-node and fenec-shard, then time a row-by-id read straight,"
	@echo "                   through the router, through HAProxy and a loopback round trip"
	@echo "                   (ci/setup-bench installs HAProxy); report in $(BUILD)/shard-bench.txt;"
	@echo "                   ARGS=fanout: POST /_shard/query over 100 tenants on three nodes"
	@echo "                   beside a client asking them 16 at once ($(BUILD)/fanout-bench.txt)"
	@echo "  make node-bench ARGS=image   a 100 000-document @hnsw tenant's image GET from one node"
	@echo "                   and PUT onto another (curl); report in $(BUILD)/node-bench-image.txt"
	@echo "  make node-bench ARGS=small-vectors   200 tenants of 10 vector<64> rows each: RSS a"
	@echo "                   tenant without an index, with @hnsw, with a kept graph"
	@echo "  make node-bench ARGS=writes   durable single-row inserts at 8 and 64 connections, one"
	@echo "                   tenant and 16, beside PostgreSQL INSERTs under synchronous_commit=on"
	@echo "                   ($(BUILD)/node-bench-writes.txt)"
	@echo "  make node-bench ARGS=tenants   100 000 tenants created and written on one node, then"
	@echo "                   each read cold (opening it) and warm, twice: RSS, tenants open,"
	@echo "                   cold and warm p50/p99; a vector<64> @hnsw variant of 10 000"
	@echo "                   ($(BUILD)/node-bench-tenants.txt)"
	@echo "  make node-bench ARGS=replication   replication lag p50/p99 from a primary's 200 to its"
	@echo "                   follower's /changes event, 300 puts/s for 10 s"
	@echo "                   ($(BUILD)/node-bench-replication.txt)"
	@echo "  make shard-bench ARGS=leases three nodes under --lease, ten tenants on n1 with replicas and a"
	@echo "                   writer each; n1 SIGSTOPped: cut to each tenant's first write on its"
	@echo "                   replica at a lease of 1 s and 5 s, four runs each, lost writes counted"
	@echo "                   ($(BUILD)/shard-bench-leases.txt)"
	@echo "  make shard-bench ARGS=move   that tenant moved between two nodes through the router, and"
	@echo "                   the first near query after; report in $(BUILD)/shard-bench-move.txt"
	@echo "  make shard-bench ARGS=standby one node, a primary router and a standby following it: a"
	@echo "                   row-by-id read straight, through each, in turns; each router's added"
	@echo "                   p50, five runs ($(BUILD)/shard-bench-standby.txt)"
	@echo "  make shard-bench ARGS=throughput wrk -t2 -c8 reading rows by id straight to a node,"
	@echo "                   through the router, HAProxy and a hop that does no work: req/s and"
	@echo "                   CPU per request of each process, three rounds"
	@echo "                   ($(BUILD)/shard-bench-throughput.txt)"
	@echo "  make shard-bench ARGS=regions a global router, us's router (--region us) and HAProxy for"
	@echo "                   the link: a read relayed to us beside us's router and the node straight,"
	@echo "                   five runs; then, the link down, a us node cut off under --lease: cut to"
	@echo "                   its last write, cut to writes on replicas, ten runs at 1 s and 5 s"
	@echo "                   ($(BUILD)/shard-bench-regions.txt)"
	@echo "  make drill       (root) three nodes under --lease and a router, each in a network"
	@echo "                   namespace; a node cut off (veth down) and killed: when its tenants'"
	@echo "                   writers write again, with the router's cut and with requests left to"
	@echo "                   time out; lost writes and the lease-safety checker ($(BUILD)/drill.txt);"
	@echo "                   DRILL_RUNS ($(DRILL_RUNS)) runs of each"
	@echo "  make drill ARGS=resolver  the same, nodes known by name and unknown names sent to a"
	@echo "                   name server that never answers: the dead node's failover, the other"
	@echo "                   tenants' longest write pause ($(BUILD)/drill-resolver.txt)"
	@echo "  make drill ARGS=regions  a partition between the levels (router.md §11.10): the nodes"
	@echo "                   under region us's own router, the link to a global router refused"
	@echo "                   in the namespaces throughout, n1 cut and killed; then 502/503 across"
	@echo "                   the link and the changes going through once it is back"
	@echo "                   ($(BUILD)/drill-regions.txt)"
	@echo "  make hostile HOSTILE_BEFORE=dir   build fenec-node and fenec-shard, then replay issue"
	@echo "                   17's attacks (slow loris, a large in list, foreign Host, credentials"
	@echo "                   before body, file modes, a resumed subscription, dead share...)"
	@echo "                   against the binaries in dir and those in $(BUILD)/; table attack |"
	@echo "                   before | after in $(BUILD)/hostile.txt"
	@echo "  make console-test  the operator console (/_console) in headless Chromium against a"
	@echo "                   live router and two nodes; ci/setup-browser installs chromium and"
	@echo "                   playwright-core into $(BUILD)/console-test; screenshot there"
	@echo "  make build       install missing packages, configure and build in BUILD ($(BUILD)/)"
	@echo "  make deps        install the Debian packages that are missing (ci/setup)"
	@echo "  make deps-dev    the same, and clang and clang-format for make fuzz and make format"
	@echo "  make format      clang-format -i every .h and .cc"
	@echo "  make clean       remove the build folders"
	@echo "Variables: BUILD=$(BUILD) JOBS=$(JOBS) FUZZ_SECONDS=$(FUZZ_SECONDS)" \
	      "DEMO_DIR=$(DEMO_DIR) LISTEN=$(LISTEN) ROUTER_LISTEN=$(ROUTER_LISTEN) CMAKE_ARGS='$(CMAKE_ARGS)'"

deps:
	@bash ci/setup

deps-dev:
	@bash ci/setup --dev

configure: deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_DEFAULTS) $(CMAKE_ARGS)

build: configure
	ninja -C $(BUILD) -j$(JOBS)

run: build
	@for bin in $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard; do \
	    if [ ! -x $$bin ]; then echo "make run: $$bin was not built" >&2; exit 1; fi; done
	tools/run-demo.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard $(DEMO_DIR) \
	    $(LISTEN) $(ROUTER_LISTEN)

run-cluster: build
	tools/run-cluster.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard $(DEMO_DIR)-cluster

test: build
	ctest --test-dir $(BUILD) --output-on-failure --no-tests=error -L unit -j$(TEST_JOBS)

test-slow: build
	ctest --test-dir $(BUILD) --output-on-failure -L slow -j1

# The same unit suite under ASan+UBSan; leaks are errors, UB stops the test with a stack. Both
# builds run every test that needs the test hooks (Fenec-Test-Stall, Fenec-Test-Now, a paused
# move): the integration tests start fenec-node-hooks and fenec-shard-hooks, built beside the
# release binaries, which `make run` starts and which carry no hook (test/README.md).
test-asan:
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    $(MAKE) --no-print-directory test BUILD=$(ASAN_BUILD) OPT_FLAGS='$(ASAN_OPT_FLAGS)' \
	    CMAKE_ARGS="-DFENEC_SANITIZE=ON -DFENEC_BENCH=OFF $(CMAKE_ARGS)"

# Both CI builds are unity builds (FENEC_UNITY, CMakeLists.txt): a cold build parses the heavy
# headers once per batch of sources rather than once per file (docs/benchmarks.md, "CI's builds").
# Both compile the sources under test/ at -O0 (FENEC_TEST_OPT, CMakeLists.txt): they are more than
# half of each build's compile time and cost 2.5 times less to compile at -O0 than at -O2, while
# the code under test keeps its -O2 (-O1 under the sanitizers). The sanitizer build leaves UBSan's
# checks out of the sources under test/ (FENEC_TEST_UBSAN): 40% of their compile, no product code
# in them. Each build's suites run two executables at a time (TEST_JOBS), the longest first (COST,
# test/CMakeLists.txt): most of a suite's time is spent waiting on processes and sockets, not on a
# core.
ci:
	$(MAKE) --no-print-directory test CMAKE_ARGS='-DFENEC_WERROR=ON -DFENEC_UNITY=ON -DFENEC_TEST_OPT=-O0' \
	    OPT_FLAGS='-O2 -g1 -DNDEBUG' TEST_JOBS=2
	$(MAKE) --no-print-directory test-asan \
	    CMAKE_ARGS='-DFENEC_WERROR=ON -DFENEC_UNITY=ON -DFENEC_TEST_OPT=-O0 -DFENEC_TEST_UBSAN=OFF' \
	    ASAN_OPT_FLAGS='-O1 -g1' TEST_JOBS=2

# Each fuzz/<name>_fuzz.cc builds $(FUZZ_BUILD)/fuzz/fuzz_<name>; it runs over a copy of
# fuzz/corpus/<name>/ so what libFuzzer adds never lands in the committed corpus. Crash inputs go
# to $(FUZZ_ARTIFACTS)/<name>/. Every target runs; the target fails if any of them failed.
fuzz: deps-dev
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja $(CMAKE_DEFAULTS) \
	    -DFENEC_FUZZ=ON -DFENEC_TESTS=OFF -DFENEC_BENCH=OFF $(CMAKE_ARGS)
	ninja -C $(FUZZ_BUILD) -j$(JOBS)
	@found=0; failed=""; \
	for bin in $(FUZZ_BUILD)/fuzz/fuzz_*; do \
	    [ -f "$$bin" ] && [ -x "$$bin" ] || continue; \
	    found=$$((found + 1)); \
	    name=$$(basename "$$bin"); name=$${name#fuzz_}; \
	    work=$(FUZZ_WORK)/$$name; artifacts=$(FUZZ_ARTIFACTS)/$$name; \
	    rm -rf "$$work"; mkdir -p "$$work" "$$artifacts"; \
	    if [ -d fuzz/corpus/$$name ]; then cp -R fuzz/corpus/$$name/. "$$work"/; \
	    else echo "make fuzz: no seed corpus fuzz/corpus/$$name/, starting empty"; fi; \
	    echo "== fuzz_$$name for $(FUZZ_SECONDS)s over $$(ls -A "$$work" | wc -l) seeds"; \
	    if ! "$$bin" -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	            -artifact_prefix="$$artifacts/" "$$work"; then \
	        failed="$$failed fuzz_$$name"; \
	        echo "== fuzz_$$name FAILED; inputs in $$artifacts/"; \
	    fi; \
	done; \
	if [ $$found -eq 0 ]; then echo "make fuzz: no fuzz targets in $(FUZZ_BUILD)/fuzz" >&2; exit 1; fi; \
	if [ -n "$$failed" ]; then echo "make fuzz: failed:$$failed" >&2; exit 1; fi; \
	echo "make fuzz: $$found target(s) ran $(FUZZ_SECONDS)s each without a crash"

bench: build
	@found=0; failed=""; \
	for bin in $(BUILD)/bench/*_bench; do \
	    [ -f "$$bin" ] && [ -x "$$bin" ] || continue; \
	    found=$$((found + 1)); \
	    echo "== $$bin"; \
	    "$$bin" || failed="$$failed $$(basename $$bin)"; \
	done; \
	if [ $$found -eq 0 ]; then echo "make bench: no benchmarks in $(BUILD)/bench" >&2; exit 1; fi; \
	if [ -n "$$failed" ]; then echo "make bench: failed:$$failed" >&2; exit 1; fi

format: deps-dev
	find $(FORMAT_DIRS) -path fuzz/corpus -prune -o \( -name '*.h' -o -name '*.cc' \) -print \
	    | xargs -r clang-format -i

clean:
	rm -rf -- build $(ASAN_BUILD) $(FUZZ_BUILD) $(filter-out /,$(BUILD))

# fenec-node against PostgreSQL 15 in one run (bench/node_bench.sh says what and how): row by id
# and a filtered get under wrk beside pgbench -S, at 1 and 8 connections, ratios and the issue's
# goals. wrk and PostgreSQL come from ci/setup-bench, not ci/setup, so CI never installs them.
# ARGS=writes: durable single-row inserts beside PostgreSQL INSERTs (bench/node_bench_writes.sh).
.PHONY: node-bench
node-bench: configure
ifeq ($(ARGS),image)
	ninja -C $(BUILD) -j$(JOBS) fenec-node
	bash bench/node_bench.sh image $(BUILD)/server/fenec-node $(BUILD)/node-bench-image.txt
else ifeq ($(ARGS),small-vectors)
	ninja -C $(BUILD) -j$(JOBS) fenec-node
	bash bench/node_bench_small_vectors.sh $(BUILD)/server/fenec-node \
	    $(BUILD)/node-bench-small-vectors.txt
else ifeq ($(ARGS),writes)
	@bash ci/setup-bench
	ninja -C $(BUILD) -j$(JOBS) fenec-node
	bash bench/node_bench_writes.sh $(BUILD)/server/fenec-node $(BUILD)/node-bench-writes.txt
else ifeq ($(ARGS),tenants)
	ninja -C $(BUILD) -j$(JOBS) fenec-node
	bash bench/node_bench_tenants.sh $(BUILD)/server/fenec-node $(BUILD)/node-bench-tenants.txt
else ifeq ($(ARGS),replication)
	ninja -C $(BUILD) -j$(JOBS) fenec-node
	bash bench/node_bench_replication.sh $(BUILD)/server/fenec-node \
	    $(BUILD)/node-bench-replication.txt
else
	@bash ci/setup-bench
	ninja -C $(BUILD) -j$(JOBS) fenec-node
	bash bench/node_bench.sh $(BUILD)/server/fenec-node $(BUILD)/node-bench.txt
endif

# The router's added latency against HAProxy's and a loopback round trip, in one run
# (bench/shard_bench.sh says what and how). HAProxy comes from ci/setup-bench. ARGS=move: a
# 100 000-vector @hnsw tenant moved between two nodes (bench/shard_bench_move.sh). ARGS=standby:
# a standby router's added latency beside its primary's (bench/shard_bench_standby.sh) ARGS=regions:
# a read relayed to a region's router, and a partition's failover in that region
# (bench/shard_bench_regions.sh). ARGS=throughput: reads a second under wrk straight, through the
# router, through HAProxy and through a hop that does no work (bench/shard_bench_throughput.sh).
.PHONY: shard-bench
shard-bench: configure
ifeq ($(ARGS),leases)
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard
	bash bench/shard_bench_leases.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	    $(BUILD)/shard-bench-leases.txt
else ifeq ($(ARGS),move)
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard
	bash bench/shard_bench_move.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	    $(BUILD)/shard-bench-move.txt
else ifeq ($(ARGS),standby)
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard
	bash bench/shard_bench_standby.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	    $(BUILD)/shard-bench-standby.txt
else ifeq ($(ARGS),throughput)
	@bash ci/setup-bench
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard
	bash bench/shard_bench_throughput.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	    $(BUILD)/shard-bench-throughput.txt
else ifeq ($(ARGS),regions)
	@bash ci/setup-bench
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard fenec
	bash bench/shard_bench_regions.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	    $(BUILD)/tools/fenec $(BUILD)/shard-bench-regions.txt
else
	@bash ci/setup-bench
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard
	if [ "$(ARGS)" = fanout ]; then \
	    bash bench/fanout_bench.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	        $(BUILD)/fanout-bench.txt; \
	else \
	    bash bench/shard_bench.sh $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	        $(BUILD)/shard-bench.txt; \
	fi
endif

# The failover drills (router.md §17; bench/drill.sh says what and how): real processes in network
# namespaces, so root. `check` refuses before the build when the machine cannot run them. The
# baseline's router is fenec-shard-hooks (FENEC_TEST_NO_CUT), built only with the tests.
.PHONY: drill
drill:
	@bash bench/drill.sh check
	@$(MAKE) --no-print-directory configure
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard fenec-shard-hooks fenec-lease-check
ifeq ($(ARGS),resolver)
	DRILL_RUNS=$(DRILL_RUNS) bash bench/drill.sh resolver $(BUILD)/server/fenec-node \
	    $(BUILD)/shard/fenec-shard $(BUILD)/shard/fenec-shard-hooks $(BUILD)/test/fenec-lease-check \
	    $(BUILD)/drill-resolver.txt
else ifeq ($(ARGS),regions)
	DRILL_RUNS=$(DRILL_RUNS) bash bench/drill.sh regions $(BUILD)/server/fenec-node \
	    $(BUILD)/shard/fenec-shard $(BUILD)/shard/fenec-shard-hooks $(BUILD)/test/fenec-lease-check \
	    $(BUILD)/drill-regions.txt
else
	DRILL_RUNS=$(DRILL_RUNS) bash bench/drill.sh failover $(BUILD)/server/fenec-node \
	    $(BUILD)/shard/fenec-shard $(BUILD)/shard/fenec-shard-hooks $(BUILD)/test/fenec-lease-check \
	    $(BUILD)/drill.txt
endif

# Issue 17's attacks replayed against real processes of two versions (bench/hostile.sh says
# which and how): HOSTILE_BEFORE holds an older fenec-node and fenec-shard (or is a build folder),
# $(BUILD) the ones built here. Refused before the build when HOSTILE_BEFORE is unset.
.PHONY: hostile
hostile:
	@if [ -z "$(HOSTILE_BEFORE)" ]; then \
	    echo "make hostile: set HOSTILE_BEFORE to a folder holding the fenec-node and fenec-shard" \
	        "to compare against (e.g. a build of an older commit)" >&2; exit 2; fi
	@$(MAKE) --no-print-directory configure
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard
	bash bench/hostile.sh $(HOSTILE_BEFORE) $(BUILD) $(BUILD)/hostile.txt

# The operator console end to end in headless Chromium (test/console/README.md). The browser and
# playwright-core come from ci/setup-browser (apt, and npm into $(BUILD)/console-test, outside the
# source tree), never from ci/setup, so `make ci` installs no browser.
.PHONY: console-test
console-test: configure
	@bash ci/setup-browser $(BUILD)/console-test
	ninja -C $(BUILD) -j$(JOBS) fenec-node fenec-shard
	node test/console/console_test.mjs $(BUILD)/server/fenec-node $(BUILD)/shard/fenec-shard \
	    $(BUILD)/console-test
