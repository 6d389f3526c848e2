# gdrpeer: top-level build. `make help` lists the targets.
#
#   make                 gdrpeer.ko for the running kernel (KVER=/KDIR= to choose) + userspace
#   make deps            install every Debian package the project needs (idempotent)
#   make demo            the main job on the emulated node (VM_KERNEL=6.1 by default)
#   make test            the whole test suite (host unit tests + emulated node, VM_KERNEL)
#   make test-kernels    boot all four guest kernels (5.10 6.1 6.12 7.2) and load gdrpeer.ko
#   make test-debug      the driver's campaign on the debug kernel (KASAN, lockdep, ...): selftests,
#                        race tests, 1,000,000-op fuzzer, hot-unplug, kill -9 (builds it once)
#   make test-mutants    plant each bug of tests/mutation/mutants.py; every one must fail a host test
#   make kernel-check    W=1 + sparse build of the kernel code against VM_KERNEL's headers

VM_KERNEL ?= 6.1
PYTHON    ?= /usr/bin/python3
BUILD     ?= $(CURDIR)/build
KVER      ?= $(shell uname -r)
KDIR      ?= /lib/modules/$(KVER)/build
MODOUT    ?= $(BUILD)/kmod/host-$(KVER)
JOBS      ?= $(shell nproc)
EMUNODE    = PYTHONPATH=$(CURDIR)/tests $(PYTHON) -m emunode
PYTEST_ARGS ?=

# Debian packages: build tools, QEMU and the guest's userspace, RDMA, C++ libraries.
DEBS := build-essential make cmake pkg-config clang libclang-rt-14-dev kmod cpio xz-utils zstd \
	dwarves bc flex bison libelf-dev sparse debootstrap \
	qemu-system-x86 busybox-static pciutils iproute2 \
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev perftest \
	libpci-dev libbz2-dev libcli11-dev nlohmann-json3-dev googletest libgtest-dev libgmock-dev \
	libbenchmark-dev hwloc libhwloc-dev graphviz python3 python3-pytest \
	dpkg-dev patch meson ninja-build libglib2.0-dev libpixman-1-dev libfdt-dev
# (the last line builds tests/emunode's "acs" QEMU: switch downstream ports with ACS)

.DEFAULT_GOAL := all
all: module userspace

help:
	@sed -n 's/^#   //p' Makefile

deps:
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "deps: installing $$missing"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends $$missing; \
	else echo "deps: all $(words $(DEBS)) Debian packages present"; fi

# ---- kernel module -------------------------------------------------------------------------
module:
	@test -f $(KDIR)/Makefile || { echo "make: no kernel headers at $(KDIR) (kernel $(KVER)):" \
		"install linux-headers-$(KVER), or set KVER= or KDIR=; for the emulated node use" \
		"'make vm-modules VM_KERNEL=6.1'" >&2; exit 2; }
	$(MAKE) modules KDIR=$(KDIR) MODOUT=$(MODOUT)
	@ls $(MODOUT)/*.ko

# Stage a copy of the module sources into MODOUT and build it there against KDIR.
modules: modules-stage
	$(MAKE) -C $(MODOUT) -f Makefile.modules modules-build KDIR=$(KDIR) MODOUT=$(MODOUT)

modules-stage:
	@mkdir -p $(MODOUT)/selftests
	@rm -rf $(MODOUT)/driver $(MODOUT)/uapi $(MODOUT)/selftests/kmod
	@cp -r driver uapi $(MODOUT)/
	@if [ -d selftests/kmod ]; then cp -r selftests/kmod $(MODOUT)/selftests/; fi
	@cp tests/emunode/modules.mk $(MODOUT)/Makefile.modules

# gdrpeer.ko and the test modules for the emulated node's kernel (fetched into build/cache).
vm-modules:
	$(EMUNODE) build --kernel $(VM_KERNEL)

# W=1 + sparse (C=1) build of the driver and the test modules against the guest kernel's
# headers, in a staged copy; any warning fails. (Host-gcc kernels: 5.10, 6.1, 6.12.) The driver
# is checked twice: as built without OFED, and with the peer-memory client against the test-only
# host's OFED-style headers (ofa-stage).
kernel-check:
	$(MAKE) modules-stage MODOUT=$(BUILD)/kcheck/$(VM_KERNEL)
	kdir=$$($(EMUNODE) kdir --kernel $(VM_KERNEL)) && \
	$(MAKE) -C $(BUILD)/kcheck/$(VM_KERNEL)/driver KDIR=$$kdir CC=gcc check && \
	$(MAKE) -C $(BUILD)/kcheck/$(VM_KERNEL)/selftests/kmod KDIR=$$kdir CC=gcc check && \
	$(MAKE) -f $(BUILD)/kcheck/$(VM_KERNEL)/Makefile.modules ofa-stage \
		MODOUT=$(BUILD)/kcheck/$(VM_KERNEL) && \
	$(MAKE) -C $(BUILD)/kcheck/$(VM_KERNEL)/driver KDIR=$$kdir CC=gcc \
		OFA_DIR=$(BUILD)/kcheck/$(VM_KERNEL)/ofa_kernel check

vm-kernel:
	$(EMUNODE) fetch --kernel $(VM_KERNEL)

# The emulated node's "acs" QEMU (Debian's QEMU source + tests/emunode/qemu-xio3130-acs.patch),
# built once into build/cache/qemu/acs; only the switch-port ACS test boots it.
vm-qemu:
	$(EMUNODE) qemu --name acs

# ---- userspace -----------------------------------------------------------------------------
userspace:
	cmake -S userspace -B $(BUILD)/userspace -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD)/userspace -j$(JOBS)
	@mkdir -p $(BUILD)/bin
	@cp $(BUILD)/userspace/cli/gdrpeer $(BUILD)/userspace/tests/test_lib_driver $(BUILD)/bin/

# kselftest programs (TAP) for the guest; the harness header comes from linux-source-6.1.
selftests:
	@mkdir -p $(BUILD)/bin
	@if [ -f selftests/Makefile ]; then \
		$(MAKE) -C selftests KSELFTEST_DIR=$$($(EMUNODE) kselftest-headers) OUT=$(BUILD)/bin; fi

# libFuzzer targets, one per parser, each run for a fixed number of inputs (clang + ASan/UBSan).
FUZZ_RUNS ?= 20000
fuzz:
	cmake -S userspace -B $(BUILD)/fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
		-DGDRPEER_BUILD_FUZZ=ON -DGDRPEER_BUILD_TESTS=OFF -DGDRPEER_BUILD_BENCH=OFF \
		-DGDRPEER_FUZZ_RUNS=$(FUZZ_RUNS) >/dev/null
	cmake --build $(BUILD)/fuzz -j$(JOBS) --target fuzz_all
	ctest --test-dir $(BUILD)/fuzz/fuzz -L fuzz --output-on-failure

# ---- the emulated node ---------------------------------------------------------------------
guest: userspace selftests vm-modules

demo: deps guest
	$(EMUNODE) demo --kernel $(VM_KERNEL)

test: deps guest vm-qemu
	cd $(BUILD)/userspace && ctest --output-on-failure -j$(JOBS)
	$(MAKE) test-mutants
	$(MAKE) fuzz
	$(MAKE) kernel-check
	VM_KERNEL=$(VM_KERNEL) GDRPEER_BIN=$(BUILD)/bin/gdrpeer PYTHONPATH=$(CURDIR)/tests \
		GDRPEER_KILL_ITERATIONS=$(KILL_ITERATIONS) $(PYTHON) -m pytest -ra tests $(PYTEST_ARGS)

# The kill -9 loop: 30 iterations keep `make test` inside its time on 2 cores; the campaign
# (make test-debug) runs the full 100.
KILL_ITERATIONS ?= 30

# Mutation check (host only): each bug listed in tests/mutation/mutants.py is planted in a scratch
# copy of the sources (build/mutants), rebuilt incrementally at -O0, and the fast host tests run;
# a bug no test notices, or a list entry whose code is gone, fails the target. docs/tests.md.
test-mutants: deps
	$(PYTHON) tests/mutation/run.py --build $(BUILD)/mutants --jobs $(JOBS)

# Every guest kernel: build the modules for 5.10, 6.1, 6.12 and 7.2, boot each, load gdrpeer;
# then real verbs traffic into gdrpeer memory on the other kernels the dma-buf rxe follows
# (6.1 runs in `make test`).
ALL_KERNELS := 5.10 6.1 6.12 7.2
RXE_DMABUF_KERNELS := 6.12 7.2
test-kernels: deps userspace selftests
	for k in $(ALL_KERNELS); do $(EMUNODE) build --kernel $$k || exit 1; done
	GDRPEER_ALL_KERNELS=1 PYTHONPATH=$(CURDIR)/tests $(PYTHON) -m pytest -ra tests/test_kernels.py \
		tests/test_nvidia.py tests/test_peermem.py -k "kernels"
	for k in $(RXE_DMABUF_KERNELS); do VM_KERNEL=$$k PYTHONPATH=$(CURDIR)/tests \
		$(PYTHON) -m pytest -ra tests/test_rxe_dmabuf.py || exit 1; done

# The debug guest kernel (Debian's linux-source-6.1 of the stock image's version, KASAN, KFENCE,
# lockdep, DEBUG_ATOMIC_SLEEP, DMA_API_DEBUG, DEBUG_OBJECTS; tests/emunode/debug-kernel.config),
# built once with nice into build/cache/kernels/6.1-debug. Its cold build is long on 2 cores
# (docs/driver.md, "Reliability campaign"), so it is not part of `make test`.
DEBUG_KERNEL := 6.1-debug
DEBUG_TESTS  := tests/test_driver.py tests/test_nvidia.py tests/test_fuzz.py tests/test_hotplug.py \
	tests/test_kill.py
FUZZ_OPS_DEBUG ?= 1000000
debug-kernel:
	$(EMUNODE) fetch --kernel $(DEBUG_KERNEL)

# Zero KASAN/KFENCE/lockdep/DMA-API/ODEBUG/WARN reports is the bar: Node.run fails a boot whose
# kernel log has one.
test-debug: deps userspace selftests debug-kernel
	$(EMUNODE) build --kernel $(DEBUG_KERNEL)
	VM_KERNEL=$(DEBUG_KERNEL) GDRPEER_FUZZ_OPS=$(FUZZ_OPS_DEBUG) GDRPEER_KILL_ITERATIONS=100 \
		GDRPEER_BIN=$(BUILD)/bin/gdrpeer \
		PYTHONPATH=$(CURDIR)/tests $(PYTHON) -m pytest -ra $(DEBUG_TESTS) -k "not other_kernels" \
		$(PYTEST_ARGS)

clean:
	rm -rf $(BUILD)/userspace $(BUILD)/fuzz $(BUILD)/kcheck $(BUILD)/bin $(BUILD)/kmod $(BUILD)/runs \
		$(BUILD)/mutants

distclean:
	rm -rf $(BUILD)

.PHONY: all help deps module modules modules-stage vm-modules vm-kernel vm-qemu userspace selftests \
	guest demo test test-kernels test-debug debug-kernel test-mutants fuzz kernel-check clean distclean
