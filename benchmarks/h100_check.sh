# One device-tool call on the H100: acceptance checks, timings, validation-layer test run, soak.
# carry: [.gl, .whl, .whl_litert, .models]      usage: bash benchmarks/h100_check.sh [quick]
source benchmarks/device_setup.sh || exit 1
for f in .gl/vulkan-validationlayers*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
export GPUC_SHARED_MODELS=$PWD/.models GPUC_CACHE_DIR=/tmp/gpuc-cache
M=.models
nvidia-smi -L; python3 -m gpuc.cli devices
python3 -m gpuc.cli compile $M/mobilenet_v2_224_f32.tflite -o /tmp/m.bundle || exit 1
python3 -m gpuc.cli run /tmp/m.bundle --input $M/ref/mobilenet_v2_224_f32.in0.npy --output /tmp/o.npz || exit 1
python3 - <<'PY'
import numpy as np
o = np.load("/tmp/o.npz"); o = o[o.files[0]]
r = np.load(".models/ref/mobilenet_v2_224_f32.out0.npy")
err = float(np.abs(o - r).max()); tol = 1e-3 * float(np.abs(r).max())
print(f"ACCEPTANCE mobilenet_v2_224_f32: max|o-ref| = {err:.3g}, bound {tol:.3g}: {'PASS' if err <= tol else 'FAIL'}")
PY
for m in $M/*.tflite; do python3 -m benchmarks.run_model $m --runs 50 --ref-dir $M/ref --json; done
echo "== profile =="; python3 -m gpuc.cli profile /tmp/m.bundle --runs 20 | head -14
echo "== bench =="; python3 -m gpuc.cli bench /tmp/m.bundle --runs 200 --json
echo "== fp16 =="; python3 -m gpuc.cli compile $M/mobilenet_v2_224_f32.tflite -o /tmp/m16.bundle --precision fp16 \
  && python3 -m gpuc.cli verify $M/mobilenet_v2_224_f32.tflite --precision fp16 -i $M/ref/mobilenet_v2_224_f32.in0.npy \
  && python3 -m gpuc.cli profile /tmp/m16.bundle --runs 20 | head -14 && python3 -m gpuc.cli bench /tmp/m16.bundle --runs 200 --json
[ "$1" = quick ] && exit 0
echo "== coopmat =="; python3 -m benchmarks.coopmat_check --runs 20 --json $OUT/coopmat_check.json
GPUC_VARIANTS=off python3 -m gpuc.cli profile /tmp/m16.bundle --runs 20 | head -6   # fp16 without variants, for comparison
echo "== startup =="; python3 -m benchmarks.startup $M/mobilenet_v2_224_f32.tflite --runs 50
echo "== verify =="; python3 -m gpuc.cli verify $M/mobilenet_v2_224_f32.tflite
echo "== harness =="; python3 -m benchmarks.harness $M --runs 100 --precision fp32,fp16 --out /tmp/results && cp /tmp/results/*.json $OUT/ 2>/dev/null
echo "== kernels =="; python3 -m benchmarks.kernel_bench $M/mobilenet_v2_224_f32.tflite --runs 100 2>&1 | head -30
echo "== async overlap =="; python3 -m benchmarks.async_overlap /tmp/m.bundle --runs 200 --cpu-ms 0.3
echo "== validation-layer test run =="
GPUC_VALIDATION=1 python3 -m pytest -q -p no:cacheprovider tests/ops/test_catalogue.py tests/runtime/test_models.py tests/runtime/test_misuse_and_faults.py \
  tests/compiler/test_passes.py tests/cli/test_profile.py tests/ops/test_gemm_depthwise_tiles.py tests/ops/test_edges.py \
  tests/compiler/test_precision.py tests/ops/test_dynamic_range.py 2>&1 | tail -4
echo "== soak =="; python3 -m benchmarks.soak /tmp/m.bundle --runs 10000
