#!/bin/bash
# Ray (ray[serve,data]) on the H100 machine, which has no package index: cp312 wheels carried in two
# device calls.  The ray wheel (79 MB) is stripped of ray/jars (32 MB, the Java workers' jar, unused
# from Python): 47 MB.  Wheels the machine's image already has (numpy, pandas, pyarrow, aiohttp, grpcio,
# protobuf, nvidia-ml-py, ...) are not carried.
#   here:            bash benchmarks/carry_ray.sh prepare     -> .whl_ray/a (ray), .whl_ray/b (its other needs)
#   device call 1:   carry [".whl_ray/a"]                       command: bash benchmarks/carry_ray.sh stage
#   device call 2:   carry [".whl_ray/b", ".gl", ".whl", ...]   command: source benchmarks/carry_ray.sh install && ...
# (back to back: the machine keeps /tmp between calls only while warm, 30 s after a call)
RAY_VERSION=${RAY_VERSION:-2.60.0}
MISSING="aiohttp_cors annotated_types colorful distlib fastapi starlette uvicorn httptools jsonschema
jsonschema_specifications referencing rpds_py opencensus opencensus_context google_api_core google_auth
googleapis_common_protos proto_plus pyasn1 pyasn1_modules opentelemetry_api opentelemetry_sdk
opentelemetry_exporter_prometheus opentelemetry_proto opentelemetry_semantic_conventions py_spy pydantic
pydantic_core typing_inspection python_dotenv smart_open virtualenv python_discovery platformdirs
watchfiles websockets mmh3 grpcio_reflection"
case "$1" in
prepare)
  set -e
  rm -rf .whl_ray/dl .whl_ray/a .whl_ray/b; mkdir -p .whl_ray/dl .whl_ray/a .whl_ray/b
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d .whl_ray/dl "ray[serve,data]==$RAY_VERSION"
  python3 - "$RAY_VERSION" <<'PY'
import glob, os, sys, zipfile
src = glob.glob(f".whl_ray/dl/ray-{sys.argv[1]}-cp312-*.whl")[0]
dst = os.path.join(".whl_ray/a", os.path.basename(src))
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zo:
    for i in zi.infolist():
        if i.filename.startswith("ray/jars/"):
            continue
        data = zi.read(i)
        if i.filename.endswith(".dist-info/RECORD"):
            data = b"".join(l + b"\n" for l in data.splitlines() if not l.startswith(b"ray/jars/"))
        zo.writestr(i, data)
print(f"{dst}: {os.path.getsize(src) / 1e6:.1f} MB -> {os.path.getsize(dst) / 1e6:.1f} MB (ray/jars stripped)")
PY
  for n in $MISSING; do cp .whl_ray/dl/${n}-[0-9]*.whl .whl_ray/b/ 2>/dev/null || echo "not needed by this ray: $n"; done
  rm -rf .whl_ray/dl
  du -sh .whl_ray/a .whl_ray/b ;;
stage)       # device call 1: keep the ray wheel outside the working tree
  mkdir -p /tmp/ray_carry && cp .whl_ray/a/*.whl /tmp/ray_carry/ && ls -la /tmp/ray_carry ;;
install)     # device call 2 (source it): the ray wheel from call 1 + the rest, into /tmp/site_ray
  ls /tmp/ray_carry/ray-*.whl >/dev/null 2>&1 || { echo "no /tmp/ray_carry/ray-*.whl: run call 1 (stage) just before"; return 1 2>/dev/null || exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site_ray \
    /tmp/ray_carry/*.whl .whl_ray/b/*.whl || { return 1 2>/dev/null || exit 1; }
  export PYTHONPATH=/tmp/site_ray${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site_ray/bin:$PATH
  python3 -c "import ray, ray.serve, ray.data; print('ray', ray.__version__, 'imports')" ;;
*) echo "usage: carry_ray.sh prepare|stage|install"; exit 2 ;;
esac
