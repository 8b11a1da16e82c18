// CUDA names for AMD's HIP CPU Runtime, so that kernels/*.cu compile
// unchanged as C++ and run on the CPU (tests only; see kernels/README.md,
// "Emulation", for what this can and cannot show).
//
// HIP-CPU runs each block's threads as fibers on one OS thread, switching
// fiber only at its barrier, which is a round-robin yield: it assumes that
// every thread of a block reaches the same barriers in the same order, and
// its warp is 64 lanes wide, with every warp operation a block-wide
// barrier. CUDA code does neither: warps of 32 lanes shuffle independently,
// loop different numbers of times, and leave early (`if (warp != 0)
// return;`). So this header keeps only HIP-CPU's fibers, block scheduling,
// shared memory, atomics and math, and replaces the synchronisation:
//
// - A small cooperative scheduler per block (`BlockState`, one per OS
//   thread): a waiting thread yields to the next fiber until its condition
//   holds; a round of yields in which no thread of the block arrives
//   anywhere is a deadlock, reported and aborted.
// - `__syncthreads` is a counting barrier over the whole block.
// - Warp operations (`__shfl*_sync`, `__ballot_sync`, `__syncwarp`) meet
//   the 32 lanes of their own warp only (lanes 32w .. 32w+31 of the block),
//   exchanging values through a double-buffered slot array per warp.
//   Every lane of the warp must take part (the kernels pass a full mask;
//   any other mask is refused).
// - `run_block` wraps each kernel so that a block's fibers leave in the
//   order HIP-CPU's scheduler expects (thread 0 first), whatever order they
//   finished in.
#pragma once

// HIP-CPU gives each fiber (GPU thread) a 7 KiB stack, which the kernels
// outgrow when built with AddressSanitizer (its redzones enlarge frames;
// the overflow lands on the fiber's saved stack pointer at the bottom of
// the allocation). libco allocates a fiber's stack with
// `LIBCO_MALLOC(size)` inside `co_create(size, ...)` and then uses `size`,
// so this enlarges both. It depends on libco's text at the vendored commit.
#define EDUDB_FIBER_STACK_BYTES (256u * 1024u)
#define LIBCO_MALLOC(requested) std::malloc(size = std::max<unsigned>((requested), EDUDB_FIBER_STACK_BYTES))
#define LIBCO_FREE std::free
#include <algorithm>
#include <cstdlib>

#include <hip/hip_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace edudb_emulation {

constexpr unsigned kWarpLanes = 32;
constexpr unsigned kMaxThreads = 1024;
constexpr unsigned kMaxWarps = kMaxThreads / kWarpLanes;

// Scheduling state of the block running on this OS thread. Thread 0 of a
// block runs first (HIP-CPU starts the other fibers at its first yield),
// and resets it.
struct BlockState {
    unsigned threads;
    unsigned progress;  // arrivals anywhere; a deadlock leaves it still
    unsigned finished;  // threads past the kernel body
    unsigned released;  // threads that have left, in rank order
    unsigned block_arrivals;
    unsigned block_generation[kMaxThreads];
    unsigned warp_generation[kMaxThreads];
    unsigned warp_arrivals[kMaxWarps][2];
    unsigned long long warp_slots[kMaxWarps][2][kWarpLanes];
    const char* kernel;
};

inline thread_local BlockState block_state;

inline unsigned thread_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

// Lanes of warp `warp` that exist (the last warp of a block whose size is
// not a multiple of 32 is partial).
inline unsigned warp_members(unsigned warp) {
    return std::min(kWarpLanes, block_state.threads - warp * kWarpLanes);
}

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "edudb kernel emulation: %s in kernel %s, block (%u, %u, %u), thread %u\n",
                 what, block_state.kernel, blockIdx.x, blockIdx.y, blockIdx.z, thread_rank());
    std::abort();
}

// Yields to the other fibers of the block until `ready()` holds.
template <typename Ready>
inline void wait_until(Ready ready, const char* waiting_at) {
    unsigned seen = block_state.progress, idle_rounds = 0;
    while (!ready()) {
        ::hip::detail::Tile::this_tile().barrier();  // a yield to the next fiber
        if (block_state.progress != seen) {
            seen = block_state.progress;
            idle_rounds = 0;
        } else if (++idle_rounds > 2) {
            fail(waiting_at);
        }
    }
}

inline void syncthreads() {
    BlockState& s = block_state;
    const unsigned generation = s.block_generation[thread_rank()]++;
    ++s.block_arrivals;
    ++s.progress;
    const unsigned target = s.threads * (generation + 1);
    wait_until([&] { return s.block_arrivals >= target; },
               "deadlock at __syncthreads (some thread of the block never reaches it)");
}

// One warp operation: every lane deposits `value`, waits for its warp's
// other lanes, and gets the warp's slots (lane-indexed) to read from.
template <typename T, typename Read>
inline auto warp_exchange(T value, unsigned mask, Read read) {
    static_assert(sizeof(T) <= sizeof(unsigned long long) && std::is_trivially_copyable_v<T>);
    if (mask != 0xffffffffu) fail("a warp operation with a partial lane mask (not emulated)");
    BlockState& s = block_state;
    const unsigned rank = thread_rank(), warp = rank / kWarpLanes, lane = rank % kWarpLanes;
    const unsigned generation = s.warp_generation[rank]++;
    const unsigned parity = generation & 1;
    unsigned long long& slot = s.warp_slots[warp][parity][lane];
    slot = 0;
    std::memcpy(&slot, &value, sizeof(T));
    ++s.warp_arrivals[warp][parity];
    ++s.progress;
    const unsigned members = warp_members(warp);
    const unsigned target = members * (generation / 2 + 1);
    wait_until([&] { return s.warp_arrivals[warp][parity] >= target; },
               "deadlock at a warp operation (a lane of the warp never reaches it)");
    // Lanes write this parity's slots again only two operations later, after
    // every lane has passed the next operation, so the slots are stable here.
    return read(s.warp_slots[warp][parity], lane, members);
}

// The value lane `source` deposited (the caller's own value when `source`
// is not a lane of the warp, as on a GPU).
template <typename T>
inline T shuffle_from(T value, unsigned mask, unsigned source) {
    return warp_exchange(value, mask, [&](const unsigned long long* slots, unsigned, unsigned members) {
        T out = value;
        if (source < members) std::memcpy(&out, &slots[source], sizeof(T));
        return out;
    });
}

inline unsigned lane_id() { return thread_rank() % kWarpLanes; }

// CUDA lets a shuffle read only inside its lane's group of `width` lanes.
inline unsigned group_base(unsigned width) { return lane_id() / width * width; }

// Called by `run_block` around the kernel body.
inline void begin_block(const char* kernel) {
    if (thread_rank() == 0) {
        std::memset(&block_state, 0, sizeof(block_state));
        block_state.threads = blockDim.x * blockDim.y * blockDim.z;
        block_state.kernel = kernel;
        if (block_state.threads > kMaxThreads) fail("a block larger than 1024 threads");
    }
}

inline void end_block() {
    BlockState& s = block_state;
    const unsigned rank = thread_rank();
    ++s.finished;
    ++s.progress;
    wait_until([&] { return s.finished == s.threads && s.released == rank; },
               "deadlock at the end of the block");
    ++s.released;
    ++s.progress;
}

}  // namespace edudb_emulation

// ---------------------------------------------------------------------------
// CUDA's device API in terms of the above.

#define __syncthreads() ::edudb_emulation::syncthreads()

using std::max;
using std::min;

inline void __syncwarp(unsigned mask = 0xffffffffu) {
    ::edudb_emulation::warp_exchange(0u, mask, [](const unsigned long long*, unsigned, unsigned) { return 0; });
}

template <typename T>
inline T __shfl_sync(unsigned mask, T value, int source, int width = 32) {
    const unsigned base = ::edudb_emulation::group_base(width);
    return ::edudb_emulation::shuffle_from(value, mask, base + ((unsigned)source % (unsigned)width));
}

template <typename T>
inline T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) {
    const unsigned lane = ::edudb_emulation::lane_id(), base = ::edudb_emulation::group_base(width);
    return ::edudb_emulation::shuffle_from(value, mask, lane - base >= delta ? lane - delta : lane);
}

template <typename T>
inline T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
    const unsigned lane = ::edudb_emulation::lane_id(), base = ::edudb_emulation::group_base(width);
    return ::edudb_emulation::shuffle_from(value, mask,
                                           lane - base + delta < (unsigned)width ? lane + delta : lane);
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
    const unsigned lane = ::edudb_emulation::lane_id(), base = ::edudb_emulation::group_base(width);
    const unsigned source = lane ^ (unsigned)lane_mask;
    return ::edudb_emulation::shuffle_from(value, mask, source >= base + (unsigned)width ? lane : source);
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
    return ::edudb_emulation::warp_exchange(
        predicate ? 1u : 0u, mask, [](const unsigned long long* slots, unsigned, unsigned members) {
            unsigned votes = 0;
            for (unsigned lane = 0; lane < members; ++lane)
                if (slots[lane]) votes |= 1u << lane;
            return votes;
        });
}

inline float __int_as_float(int bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

// Dynamic shared memory (`extern __shared__ T name[]`): HIP-CPU's
// `__shared__` is `thread_local`, so the kernel's declaration names a
// thread-local array the launcher defines (`dynamic_shared`, 48 KiB: the
// most a launch gets without opting in, checked by the launcher).
