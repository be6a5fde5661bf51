# One device-tool call: issue #2 acceptance on the H100 plus timings.
# run with carry [.gl, .whl, .models]:  bash benchmarks/h100_check.sh
source benchmarks/device_setup.sh || exit 1
nvidia-smi -L
python3 -m gpuc.cli devices
M=.models
python3 -m gpuc.cli compile $M/mobilenet_v2_224_f32.tflite -o /tmp/m.bundle || exit 1
python3 -m gpuc.cli run /tmp/m.bundle --input $M/ref/mobilenet_v2_224_f32.in0.npy --output /tmp/o.npz || exit 1
python3 - <<'PY'
import numpy as np
o = np.load("/tmp/o.npz"); o = o[o.files[0]]
r = np.load(".models/ref/mobilenet_v2_224_f32.out0.npy")
err = float(np.abs(o - r).max()); tol = 1e-3 * float(np.abs(r).max())
print(f"ACCEPTANCE mobilenet_v2_224_f32: max|o-ref| = {err:.3g}, bound {tol:.3g}: {'PASS' if err <= tol else 'FAIL'}")
PY
for m in $M/*.tflite; do python3 benchmarks/run_model.py $m --runs 20 --ref-dir $M/ref --json; done
echo "== gpuc bench (mobilenet_v2_224_f32) =="
python3 -m gpuc.cli bench /tmp/m.bundle --runs 100 --json
echo "== startup comparison =="
python3 benchmarks/startup.py $M/mobilenet_v2_224_f32.tflite --runs 50
