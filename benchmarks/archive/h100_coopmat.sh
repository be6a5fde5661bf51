# The H100 run behind benchmarks/results/nvidia-h100-2026-11-24-coopmat.md (issue 14, branch coopmat):
# fp16 vs fp32 at batch 1, square 4096 and ResNet-50 b32 layers vs torch, batch-32 fp16 profiles.
# Run from the worktree root after `source benchmarks/device_setup.sh`; writes into $OUT.
set -u
python3 ../devmodels/tools/skeleton.py fill ../devmodels/skel --out /tmp/skel > /dev/null 2>&1
mkdir -p $OUT/j
for m in torchvision_convnext_tiny torchvision_swin_t torchvision_resnet50 torchvision_mobilenet_v2; do
  python3 -m benchmarks.archive.fp16_b1_ab /tmp/skel/$m.tflite --json $OUT/j/$m-b1-ab.json 2>&1 | grep -v Warn
done
python3 benchmarks/gemm_speed.py --square 4096 --json $OUT/j/gemm_speed.json > $OUT/gemm_speed.txt 2>&1
tail -32 $OUT/gemm_speed.txt
for m in torchvision_resnet50 torchvision_convnext_tiny torchvision_swin_t; do
  python3 -m benchmarks.archive.profile_dump /tmp/skel/$m.tflite --batch 32 --precision fp16 --json $OUT/j/$m-b32-fp16.json 2>&1 | tail -1
done
tar -czf $OUT/j.tgz -C $OUT j && rm -rf $OUT/j
