# One device-tool call: start-up figures (issue 5) on the H100, plus a correctness pass after the
# threaded loads.  carry: [.gl, .whl, .whl_litert, .models, .snap]   usage: bash benchmarks/archive/h100_startup.sh
source benchmarks/device_setup.sh || exit 1
export GPUC_SHARED_MODELS=$PWD/.models GPUC_CACHE_DIR=/tmp/gpuc-cache
M=.models
echo "PYTHONDONTWRITEBYTECODE=$PYTHONDONTWRITEBYTECODE"; nvidia-smi -L
python3 -X importtime -c "import numpy" 2>&1 | tail -1
echo "== startup (mobilenet_v2_224_f32) =="
python3 -m benchmarks.startup $M/mobilenet_v2_224_f32.tflite --runs 200 --repeat 5 --json $OUT/startup_h100.json
gpuc compile $M/mobilenet_v2_224_f32.tflite -o /tmp/m.bundle -q
echo "== load overlap off / on =="
GPUC_LOAD_THREADS=0 gpuc bench /tmp/m.bundle --runs 50 --json
GPUC_LOAD_THREADS=1 gpuc bench /tmp/m.bundle --runs 50 --json
echo "== load breakdown (inline, so each step is charged once) =="
GPUC_LOAD_THREADS=0 __GL_SHADER_DISK_CACHE=0 python3 -m benchmarks.load_breakdown /tmp/m.bundle --runs 2 | tail -16
echo "== every model: bench + reference check =="
for m in $M/*.tflite; do
  n=$(basename $m .tflite); gpuc compile $m -o /tmp/$n.bundle -q || continue
  echo "$n $(gpuc bench /tmp/$n.bundle --runs 50 --json)"
  python3 -m benchmarks.run_model $m --runs 20 --ref-dir $M/ref --json | tail -1
done
echo "== tests under the validation layer =="
for f in .gl/vulkan-validationlayers*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
GPUC_VALIDATION=1 python3 -m pytest -q -p no:cacheprovider tests/runtime/test_load_overlap.py tests/runtime/test_misuse_and_faults.py \
  tests/compiler/test_compile_cache.py tests/cli/test_launch_fast_path.py tests/runtime/test_models.py tests/cli/test_cli.py 2>&1 | tail -4
