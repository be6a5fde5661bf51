# Source this at the start of a device-tool command (H100 machine): installs the carried Vulkan
# loader debs (.gl) and cp312 wheels (.whl), and makes `import gpuc` work from the working tree
# (a symlink tree mirroring the package-dir mapping in pyproject.toml; no pip build needed).
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
if [ -d .whl_litert ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_litert/*.whl || return 1
fi
rm -rf /tmp/gpuc_pkg && mkdir -p /tmp/gpuc_pkg/gpuc
for f in gpuc/*.py; do ln -s "$PWD/$f" /tmp/gpuc_pkg/gpuc/; done
for d in compiler runtime shaders; do ln -s "$PWD/$d" /tmp/gpuc_pkg/gpuc/$d; done
export PYTHONPATH=/tmp/site:/tmp/gpuc_pkg PYTHONUNBUFFERED=1
gpuc() { python3 -m gpuc.cli "$@"; }
