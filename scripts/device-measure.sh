#!/usr/bin/env bash
# One device lend's measurements for issues 11 and 14, run on the H200 from the repository root
# (docs/PERF.md's figures come from runs like these). Bring `.gl`, `target/release/wginfer`
# (stripped) and, for `tests`, what scripts/build-device-tests.sh writes to target/device.
#   scripts/device-measure.sh PHASE...   PHASE: tests | prefill | decode | flash | batch | batch-shapes | shapes
#                                        | crossover | split | ab
#                                        | ab-shaders (with VARIANT=DIR)
# Each phase appends to $OUT/PHASE.txt (the device tool returns a few files): the command, then
# its output. One phase fits in a call's 10 minutes; a cold machine spends ~1 of them starting.
set -uo pipefail
out=${OUT:-target/device-out}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=./target/release/wginfer

# run FILE COMMAND...: the command and its output (stdout and stderr) appended to FILE.
run() {
    local file=$1
    shift
    echo "== $(date +%T) $*" >>"$out/$file.txt"
    timeout 300 "$@" >>"$out/$file.txt" 2>&1
    echo "== exit $?" >>"$out/$file.txt"
}

e2e=("$bin" bench e2e --synthetic qwen2.5-0.5b --json)
# Decode at depths 0, 512 and 4096 after a 512-token prompt, for any binary (the A/B phases).
depths=(bench e2e --synthetic qwen2.5-0.5b --json --type f16 --prefill 512 --decode 128 --runs 3 --depth 0,512,4096)

for phase in "$@"; do
    case $phase in
    tests)
        run tests "$bin" info
        for t in kernels quant gguf; do run tests target/device/$t; done
        run tests target/device/golden --skip cli_json --test-threads=1
        ;;
    prefill)
        # f16 and the quantized types, q4_0 also without dequantize-once; q4_k on Llama 3.2 1B's
        # shapes (Qwen2.5-0.5B's 896 columns are not whole 256-value blocks).
        for ty in f16 q4_0 q8_0; do run prefill "${e2e[@]}" --type $ty; done
        run prefill env WGINFER_DEQUANT_ONCE=0 "${e2e[@]}" --type q4_0
        for ty in f16 q4_k; do run prefill "$bin" bench e2e --synthetic llama-3.2-1b --json --type $ty; done
        # The staged prefill core's k split over workgroups: off (1), and other rules (target,min_slices).
        for t in 1 528 264,8 1056,8; do
            run prefill env WGINFER_PREFILL_SPLIT_K=$t "${e2e[@]}" --type f16
        done
        run prefill "$bin" bench kernels --quick --types q4_0 --json
        # Where the f16 copy starts to pay: both prefill forms at each row count.
        run prefill "$bin" bench kernels --types q4_0,q4_k --shapes 9728x896,896x4864 --rows 64,128,256,512 --reps 20
        ;;
    decode)
        # Decode after long contexts, with K and V as f32 (the default) and as f16.
        for kv in f32 f16; do
            run decode "${e2e[@]}" --type f16 --kv-type $kv --prefill 512 --decode 128 --runs 3 --depth 0,1024,4096
        done
        # Where a decode step's time goes now (each kernel's mean carries one timestamp's cost).
        run decode "$bin" bench e2e --synthetic qwen2.5-0.5b --type f16 --prefill 512 --decode 4 --runs 1 --profile
        ;;
    flash)
        # The flash kernel's shape (WGINFER_FLASH = threads,score_lanes,max_splits; built in:
        # 128,2,128 for heads of 64 dimensions, 256,4,128 for wider ones) at depths 0, 512 and 4096,
        # on Qwen2.5-0.5B (head_dim 64) and Qwen2.5-1.5B (128); then where one-row steps should
        # leave the plain kernel (--attn-threshold: 256 built in on GPUs).
        for s in 128,2,128 256,4,128 128,2,64; do
            run flash env WGINFER_FLASH=$s "$bin" "${depths[@]}"
        done
        for s in 256,4,128 128,2,128 128,4,128 512,8,128; do
            run flash env WGINFER_FLASH=$s "$bin" bench e2e --synthetic qwen2.5-1.5b --json --type f16 --prefill 512 \
                --decode 128 --runs 3 --depth 0,512,4096
        done
        for t in 1024 256 128; do
            run flash "$bin" bench e2e --synthetic qwen2.5-0.5b --json --type f16 --prefill 512 --decode 128 \
                --runs 3 --depth 0,128,256,512 --attn-threshold $t
        done
        ;;
    batch)
        sweep=(bench batch-sweep --synthetic qwen2.5-0.5b --type f16 --requests 64 --batches 1,8,64)
        run batch "$bin" "${sweep[@]}"
        run batch "$bin" "${sweep[@]}" --kv-type f16
        run batch env WGINFER_ATTN_GROUPED=1 "$bin" "${sweep[@]}"
        ;;
    batch-shapes)
        # The 8-row GEMV variant's shape per weight (WGINFER_GEMV_BATCH = "NxK=LANES,ROWS,THREADS
        # ..."), timed by whole steps: shapes that `bench kernels --sweep` found faster lost in
        # the step (docs/PERF.md, thirty-sixth session). The built-in shapes ("") come between
        # the candidates, so that drift shows.
        sweep=(bench batch-sweep --synthetic qwen2.5-0.5b --type f16 --requests 64 --batches 8,16 --json)
        for s in "" "896x4864=128,2,128" "1152x896=64,2,128 896x896=64,2,128" "" "9728x896=16,4,128" \
            "896x4864=64,2,256" "896x896=128,2,256" ""; do
            run batch-shapes env WGINFER_GEMV_BATCH="$s" "$bin" "${sweep[@]}"
        done
        ;;
    shapes)
        # The tensor-core prefill core's shape: the kept one against 2,2,2,128 (best at one 64-row
        # tile of the 896x4864 weight and on the matmul probe, slower on the LM head).
        for s in 2,2,1,64 2,2,2,128; do
            run shapes env WGINFER_COOP_PREFILL=$s "$bin" bench kernels --types f16 \
                --shapes 9728x896,896x4864,151936x896 --rows 64,512 --reps 20
            # The one challenger of the seventeenth session's table, end to end.
            run shapes env WGINFER_COOP_PREFILL=$s "${e2e[@]}" --type f16
            run shapes env WGINFER_COOP_PREFILL=$s "$bin" bench batch-sweep --synthetic qwen2.5-0.5b \
                --type f16 --requests 64 --batches 1,8,64
        done
        ;;
    crossover)
        # Where the prefill core, k split over workgroups (the "k/N" column), overtakes the split
        # core on long-k weights (split_runs still counts the prefill core's tiles alone).
        run crossover "$bin" bench kernels --types f16,q4_0 --shapes 896x4864,2048x8192,896x896,1152x896 \
            --rows 64,128,256 --reps 20
        ;;
    split)
        # The split attention kernel (a KV group's query heads per workgroup, positions split over
        # workgroups) against the flash kernel for decode rows past the threshold.
        run split target/device/kernels attention
        for s in 0 1; do
            for kv in f32 f16; do
                run split env WGINFER_ATTN_SPLIT=$s "${e2e[@]}" --type f16 --kv-type $kv --prefill 512 --decode 128 \
                    --runs 3 --depth 0,1024,2048,4096,8192
            done
        done
        run split "$bin" bench kernels --types f16 --shapes 896x896 --rows 1 --reps 20
        run split env WGINFER_ATTN_SPLIT=1 "$bin" bench e2e --synthetic llama-3.2-1b --json --type f16 --prefill 512 \
            --decode 128 --runs 3 --depth 0,4096
        ;;
    ab)
        # A candidate (target/release/wginfer, e.g. built from a branch) against a baseline
        # (target/release/wginfer-old, built from main), alternating so that drift hits both:
        # decode at depths 0, 512 and 4096 with prefill 512, then the batch-size sweep.
        old=./target/release/wginfer-old
        for b in "$old" "$bin" "$old" "$bin"; do
            run ab "$b" "${depths[@]}"
        done
        for b in "$old" "$bin"; do
            run ab "$b" bench batch-sweep --synthetic qwen2.5-0.5b --type f16 --requests 64 --batches 1,8,64
        done
        ;;
    ab-shaders)
        # A shader change timed without a second binary: the WGSL files in $VARIANT (e.g.
        # target/variants/NAME/attention_flash.wgsl, replacing shaders/attention_flash.wgsl)
        # against the embedded ones, alternating, at depths 0, 512 and 4096; then its kernel tests.
        : "${VARIANT:?set VARIANT to a folder of replacement .wgsl files}"
        variant=$(realpath "$VARIANT")
        for _ in 1 2 3; do
            for shaders in -uWGINFER_SHADERS WGINFER_SHADERS="$variant"; do
                run ab-shaders env "$shaders" "$bin" "${depths[@]}"
            done
        done
        run ab-shaders env WGINFER_SHADERS="$variant" target/device/kernels
        ;;
    *) echo "unknown phase $phase (tests, prefill, decode, flash, batch, batch-shapes, shapes, crossover, split, ab, ab-shaders)" >&2; exit 2 ;;
    esac
done
