// The kernels of kernels/*.cu, compiled for the CPU through HIP-CPU and
// cuda_shim.h, behind one C entry point that takes arguments as CUDA's
// cuLaunchKernel does (an array of pointers to the argument values). Built
// by build.rs with the `kernel-emulation` feature; the Rust side is
// src/compute/gpu/emulator.rs.
#include "cuda_shim.h"

// Dynamic shared memory of `softmax_rows` (see the end of cuda_shim.h).
constexpr unsigned kDynamicSharedBytes = 48 * 1024;
thread_local float dynamic_shared[kDynamicSharedBytes / sizeof(float)];

#include "../attention_aggregate.cu"
#include "../propagate.cu"

namespace {

// Runs `Kernel` for one thread of a block, inside the emulation's
// scheduling (see `begin_block` and `end_block`).
template <auto Kernel>
struct Block {
    template <typename... Args>
    static void run(const char* name, Args... args) {
        ::edudb_emulation::begin_block(name);
        Kernel(args...);
        ::edudb_emulation::end_block();
    }
};

// The value of argument `i`.
template <typename T>
T arg(void* const* args, int i) {
    T value;
    std::memcpy(&value, args[i], sizeof value);
    return value;
}

// Kernel ids, as `Kernel` in src/compute/gpu/launch.rs numbers them.
enum KernelId : unsigned {
    kSegmentMean,
    kFusedAttention,
    kSumQueryTiles,
    kSoftmaxRows,
    kPropagateBatch,
    kPropagateEdges,
    kTopK,
};

}  // namespace

#define LAUNCH(kernel, ...) \
    hipLaunchKernelGGL(Block<kernel>::run, dim3(blocks), dim3(threads), shared_bytes, nullptr, #kernel, __VA_ARGS__)

// Runs kernel `kernel` over `blocks` blocks of `threads` threads and waits
// for it. Returns 0, or: 1 for an unknown kernel, 2 for more dynamic shared
// memory than 48 KiB, 3 for a block larger than 1024 threads, 4 when the
// runtime reports an error.
extern "C" int edudb_emulate(unsigned kernel, unsigned blocks, unsigned threads, unsigned shared_bytes,
                             void* const* args) {
    if (shared_bytes > kDynamicSharedBytes) return 2;
    if (threads > ::edudb_emulation::kMaxThreads) return 3;
    if (blocks == 0) return 0;
    const auto f32s = [&](int i) { return arg<float*>(args, i); };
    const auto u32s = [&](int i) { return arg<unsigned*>(args, i); };
    const auto u32 = [&](int i) { return arg<unsigned>(args, i); };
    switch (kernel) {
        case kSegmentMean:
            LAUNCH(segment_mean, arg<const Window*>(args, 0), arg<const MeanTask*>(args, 1), f32s(2), u32s(3),
                   u32s(4), arg<const int*>(args, 5), f32s(6));
            break;
        case kFusedAttention:
            LAUNCH(fused_attention, arg<const Window*>(args, 0), arg<const QueryTile*>(args, 1), f32s(2), f32s(3),
                   u32s(4), u32s(5), arg<const int*>(args, 6), f32s(7), f32s(8));
            break;
        case kSumQueryTiles:
            LAUNCH(sum_query_tiles, arg<const Window*>(args, 0), arg<const RowTask*>(args, 1),
                   arg<const QueryTile*>(args, 2), u32s(3), u32s(4), f32s(5), f32s(6));
            break;
        case kSoftmaxRows:
            LAUNCH(softmax_rows, arg<const Window*>(args, 0), arg<const QueryTile*>(args, 1), f32s(2), f32s(3),
                   f32s(4));
            break;
        case kPropagateBatch:
            LAUNCH(propagate_batch, u32s(0), u32s(1), f32s(2), f32s(3), f32s(4), f32s(5), u32(6), u32(7),
                   arg<float>(args, 8));
            break;
        case kPropagateEdges:
            LAUNCH(propagate_edges, u32s(0), u32s(1), f32s(2), f32s(3), f32s(4), f32s(5), u32(6), u32(7),
                   arg<float>(args, 8), u32(9));
            break;
        case kTopK:
            LAUNCH(top_k, f32s(0), u32(1), u32(2), u32(3), u32s(4), f32s(5), u32s(6));
            break;
        default:
            return 1;
    }
    return hipDeviceSynchronize() == hipSuccess ? 0 : 4;
}
