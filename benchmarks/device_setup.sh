# Source this at the start of a device-tool command (H100 machine): installs the carried Vulkan
# loader debs (.gl) and cp312 wheels (.whl), and makes `import gpuc` work from the working tree
# (device copy only: links the package-dir mapping of pyproject.toml into gpuc/; no pip build).
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
if [ -d .whl_litert ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_litert/*.whl || return 1
fi
# python -m puts the repo root first on sys.path, so its gpuc/ is the package: link the mapped dirs into it
for d in compiler runtime shaders; do [ -e gpuc/$d ] || ln -s "$PWD/$d" gpuc/$d; done
# byte-compile our sources as a pip install would (that image may not write .pyc files itself), so
# start-up timings are not charged for recompiling every module in every fresh process
python3 -m compileall -q -j 0 compiler runtime gpuc benchmarks >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
gpuc() { python3 -c "import sys; from gpuc.launch import main; sys.exit(main())" "$@"; }   # the console script's entry
