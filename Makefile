# gpuc developer commands.  `make setup` once on a fresh Debian machine, then `make test`.
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := mesa-vulkan-drivers libvulkan1 vulkan-validationlayers

.PHONY: setup test shaders unit validate fuzz clean

setup:
	$(SUDO) apt-get update -q
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(APT_PACKAGES)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[test]'
	$(PYTHON) -m compileall -q compiler runtime gpuc   # .pyc files, as a regular install has: no per-process recompiles

shaders:
	$(PYTHON) scripts/check_shaders.py

unit:
	$(PYTHON) -m pytest -q tests

# the runtime-facing tests once more with VK_LAYER_KHRONOS_validation: any message fails a test
validate:
	GPUC_VALIDATION=1 $(PYTHON) -m pytest -q tests/test_ops.py tests/test_models.py tests/test_passes.py tests/test_cache.py tests/test_runtime.py tests/test_batch.py tests/test_device_tensor.py tests/test_precision.py \
	  tests/test_ops_random_configs.py tests/test_ops_fp16_issue3.py tests/test_ops_lstm_basic.py \
	  tests/test_cpu_fallback.py tests/test_control_flow.py tests/test_variables.py tests/test_coopmat.py tests/test_subgroup_reduce.py \
	  tests/test_load_overlap.py tests/test_nonfinite.py

# long fuzz run (make test runs a short one): mutated models through the whole compiler, and bundle bit flips
FUZZ_CASES ?= 10000
fuzz:
	$(PYTHON) scripts/fuzz.py --cases $(FUZZ_CASES)

test: shaders unit validate

clean:
	rm -rf build dist *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
