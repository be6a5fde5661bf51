# One device-tool call on the H100 for issue 19: special values through every shared float model
# (fp32, fp16) against LiteRT outputs saved beforehand, and an A/B of MobileNetV2 batch 1 against the
# tree before the change (.ab_old: `git archive <rev> | tar -x -C .ab_old`).
# carry: [.gl, .whl, .models, .ab_old]    AB_MODELS: the models timed (default MobileNetV2)    Save the references first, here:
#   python benchmarks/nonfinite_models.py --models-dir .models --save-refs .models/nfrefs NAME...
source benchmarks/device_setup.sh || exit 1
nvidia-smi -L
M=.models
NAMES="mlp_small_f32 mobilenet_v2_224_f32 unet_small_128_f32 mp_hand_landmark_lite mp_selfie_segmentation text_conv1d_lstm_tfkeras_f32 attention/timm_efficientformerv2_s0"
python3 -c "from gpuc.runtime.device import Device; d = Device(); print(d.name, 'SignedZeroInfNanPreserve widths:', sorted(d.nan_preserve_widths)); d.close()"
for p in fp32 fp16; do
  echo "== special values, $p =="
  GPUC_CACHE_DIR=/tmp/cache-new python3 -m benchmarks.nonfinite_models --models-dir $M --refs $M/nfrefs --precision $p \
    --json $OUT/nonfinite_$p.json $NAMES
done
echo "== A/B MobileNetV2 batch 1 (old = before issue 19) =="
for d in .ab_old/compiler .ab_old/runtime .ab_old/shaders; do ln -sfn "$PWD/$d" .ab_old/gpuc/$(basename $d); done
for round in 1 2 3; do
  for tree in old new; do
    if [ $tree = old ]; then pp=/tmp/site:$PWD/.ab_old; else pp=/tmp/site:$PWD; fi
    for m in ${AB_MODELS:-mobilenet_v2_224_f32}; do
      PYTHONPATH=$pp GPUC_CACHE_DIR=/tmp/cache-$tree python3 -m benchmarks.run_model $M/$m.tflite \
        --ref-dir $M/ref --runs 500 --json | sed "s/^/$tree round $round: /"
    done
  done
done
