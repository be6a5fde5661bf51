# gpuc developer commands.  `make setup` once on a fresh Debian machine, then `make test`.
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := mesa-vulkan-drivers libvulkan1

.PHONY: setup test shaders unit bench clean

setup:
	$(SUDO) apt-get update -q
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(APT_PACKAGES)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[test]'

shaders:
	$(PYTHON) scripts/check_shaders.py

unit:
	$(PYTHON) -m pytest -q tests

test: shaders unit

clean:
	rm -rf build dist *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
