// Batched score propagation over the target-grouped CSR of the DAG, and the
// k best nodes per query. Compiled at run time with
// NVRTC by src/compute/gpu, and run on the CPU by its emulation
// (kernels/emulation); the CPU reference (the oracle the tests compare
// with) is src/compute/propagate.rs.
//
// Scores are node-major, N × B (node j's B scores contiguous). One step:
//
//     next[j] = seeds[j]                                   if j has no parents
//             = (1 − α)·seeds[j] + α·Σ_{e ∈ in(j)} w_e·cur[parent_e]   otherwise
//
// The host launches one kernel per step and swaps `cur` and `next`
// (ping-pong buffers); the first step reads the seeds as `cur`.

#define FULL 0xffffffffu

__device__ float blend(float seed, float sum, float alpha, bool has_parents) {
    return has_parents ? (1.0f - alpha) * seed + alpha * sum : seed;
}

// Columns a lane owns in propagate_batch: four (16-byte loads) when B ≥ 128
// is a multiple of 4, so every row of B floats stays 16-byte aligned and
// the warp's lanes stay busy; else one. Measured on an H200 (benches/gpu.rs):
// four columns cut a step by 25–35% at B = 128 and 256 and cost 35–45% at
// B = 32. The host computes the same (gpu/propagate.rs).
__device__ unsigned lane_columns(unsigned batch) {
    return batch >= 128 && (batch & 3u) == 0 ? 4u : 1u;
}

template <unsigned W> __device__ void load_columns(const float* at, float (&out)[W]);
template <> __device__ void load_columns<1>(const float* at, float (&out)[1]) { out[0] = __ldg(at); }
template <> __device__ void load_columns<4>(const float* at, float (&out)[4]) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(at));
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
}

// One warp's share of propagate_batch: node j, lane columns b..b+W.
template <unsigned W>
__device__ void propagate_columns(const unsigned* __restrict__ offsets,
                                  const unsigned* __restrict__ parents,
                                  const float* __restrict__ weights,
                                  const float* __restrict__ seeds, const float* __restrict__ cur,
                                  float* __restrict__ next, unsigned long long j, unsigned b,
                                  unsigned batch, float alpha) {
    const unsigned lane = threadIdx.x & 31;
    const bool live = b < batch;  // W divides B, so b + W ≤ B
    const unsigned e0 = offsets[j], e1 = offsets[j + 1];
    float sum[W] = {};
    for (unsigned base = e0; base < e1; base += 32) {
        const unsigned e = base + lane;
        const unsigned parent = e < e1 ? parents[e] : 0;
        const float weight = e < e1 ? weights[e] : 0.0f;
        const unsigned n = min(32u, e1 - base);  // uniform across the warp
#pragma unroll 8
        for (unsigned k = 0; k < n; ++k) {
            const unsigned p = __shfl_sync(FULL, parent, k);
            const float wk = __shfl_sync(FULL, weight, k);
            if (live) {
                float v[W];
                load_columns<W>(cur + (size_t)p * batch + b, v);
#pragma unroll
                for (unsigned c = 0; c < W; ++c) sum[c] = fmaf(wk, v[c], sum[c]);
            }
        }
    }
    if (live) {
        const size_t at = j * batch + b;
#pragma unroll
        for (unsigned c = 0; c < W; ++c) next[at + c] = blend(seeds[at + c], sum[c], alpha, e1 > e0);
    }
}

// For B ≥ 32: lanes over the batch. One warp per (node j, group of 32·W
// batch columns, W = lane_columns(B)); lane l owns columns 32·W·g + W·l
// onwards, so each edge reads 32·W·4 contiguous bytes of the parent's
// scores. The warp loads 32 in-edges at a time (one per lane) and
// broadcasts them with shuffles. Launch: any block size that is a multiple
// of 32, nodes · ⌈B/(32·W)⌉ warps in all.
extern "C" __global__ void propagate_batch(const unsigned* __restrict__ offsets,
                                           const unsigned* __restrict__ parents,
                                           const float* __restrict__ weights,
                                           const float* __restrict__ seeds,
                                           const float* __restrict__ cur, float* __restrict__ next,
                                           unsigned nodes, unsigned batch, float alpha) {
    const unsigned long long warp_id = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x & 31, width = lane_columns(batch);
    const unsigned span = 32 * width, groups = (batch + span - 1) / span;
    const unsigned long long j = warp_id / groups;
    if (j >= nodes) return;  // whole warps leave together
    const unsigned b = (unsigned)(warp_id % groups) * span + lane * width;
    if (width == 4)
        propagate_columns<4>(offsets, parents, weights, seeds, cur, next, j, b, batch, alpha);
    else
        propagate_columns<1>(offsets, parents, weights, seeds, cur, next, j, b, batch, alpha);
}

// For B < 32: lanes over edges. A group of `group` lanes (a power of two up
// to 32, chosen by the host from the mean in-degree and the batch) serves one node: for
// each batch column the lanes stride over the node's in-edges and the
// partial sums are reduced with shuffles inside the group. Launch: blocks
// of a multiple of 32 threads, nodes · group threads in all (rounded up).
extern "C" __global__ void propagate_edges(const unsigned* __restrict__ offsets,
                                           const unsigned* __restrict__ parents,
                                           const float* __restrict__ weights,
                                           const float* __restrict__ seeds,
                                           const float* __restrict__ cur, float* __restrict__ next,
                                           unsigned nodes, unsigned batch, float alpha,
                                           unsigned group) {
    const unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long j = t / group;
    const unsigned lane = (unsigned)(t % group);
    // Lanes past the last node stay to the end: the shuffles need the whole warp.
    const bool live = j < nodes;
    const unsigned e0 = live ? offsets[j] : 0, e1 = live ? offsets[j + 1] : 0;
    for (unsigned b = 0; b < batch; ++b) {
        float sum = 0.0f;
        for (unsigned e = e0 + lane; e < e1; e += group)
            sum = fmaf(__ldg(weights + e), __ldg(cur + (size_t)__ldg(parents + e) * batch + b), sum);
        for (unsigned o = group / 2; o > 0; o >>= 1) sum += __shfl_down_sync(FULL, sum, o, group);
        if (live && lane == 0) {
            const size_t at = j * batch + b;
            next[at] = blend(seeds[at], sum, alpha, e1 > e0);
        }
    }
}

// ---------------------------------------------------------------------------
// top_k: the k ≤ TOP_K_MAX best nodes of each query: best first, ties to the
// lower node id, scores ≤ 0 and NaN left out (as propagate::top_k).
//
// Launch: one block of TOP_K_THREADS (256) threads per query b. Each warp
// scans nodes warp·32 + lane, stepping by 256, reading column b of the
// node-major scores (strided by B), and keeps its own sorted list of the
// best k in shared memory: the lanes whose score beats the list's worst
// vote with a ballot and are inserted one at a time (the position is a
// ballot count of better entries; the tail shifts by one). Warp 0 then
// inserts the other warps' entries into its list and writes it out:
// ids[b·k + i], values[b·k + i] for i < count[b]; the remaining slots get
// id 0xffffffff and NaN.
#define TOP_K_MAX 64
#define TOP_K_THREADS 256
#define TOP_K_WARPS (TOP_K_THREADS / 32)

// Whether (s, i) ranks before (t, j).
__device__ bool ranks_before(float s, unsigned i, float t, unsigned j) {
    return s > t || (s == t && i < j);
}

// Inserts (s, id) into the warp's sorted list of `count` entries (at most
// k), if it ranks inside it. Called by all lanes of a warp with the same
// arguments; returns the new count.
__device__ unsigned insert(float* list_s, unsigned* list_id, unsigned count, unsigned k, float s,
                           unsigned id) {
    const unsigned lane = threadIdx.x & 31;
    if (count == k && !ranks_before(s, id, list_s[k - 1], list_id[k - 1])) return count;
    unsigned position = 0;
#pragma unroll
    for (unsigned half = 0; half < TOP_K_MAX; half += 32) {
        const unsigned i = half + lane;
        position += __popc(__ballot_sync(FULL, i < count && ranks_before(list_s[i], list_id[i], s, id)));
    }
    const unsigned new_count = min(count + 1, k);
    float moved_s[TOP_K_MAX / 32];
    unsigned moved_id[TOP_K_MAX / 32];
#pragma unroll
    for (unsigned h = 0; h < TOP_K_MAX / 32; ++h) {
        const unsigned i = h * 32 + lane;
        const bool shift = i > position && i < new_count;
        moved_s[h] = shift ? list_s[i - 1] : (i == position ? s : 0.0f);
        moved_id[h] = shift ? list_id[i - 1] : id;
    }
    __syncwarp();
#pragma unroll
    for (unsigned h = 0; h < TOP_K_MAX / 32; ++h) {
        const unsigned i = h * 32 + lane;
        if (i >= position && i < new_count) {
            list_s[i] = moved_s[h];
            list_id[i] = moved_id[h];
        }
    }
    __syncwarp();
    return new_count;
}

extern "C" __global__ void __launch_bounds__(TOP_K_THREADS)
top_k(const float* __restrict__ scores, unsigned nodes, unsigned batch, unsigned k,
      unsigned* __restrict__ ids, float* __restrict__ values, unsigned* __restrict__ counts) {
    __shared__ float best_s[TOP_K_WARPS][TOP_K_MAX];
    __shared__ unsigned best_id[TOP_K_WARPS][TOP_K_MAX];
    __shared__ unsigned best_count[TOP_K_WARPS];
    const unsigned b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* my_s = best_s[warp];
    unsigned* my_id = best_id[warp];
    unsigned count = 0;
    for (unsigned base = warp * 32; base < nodes; base += TOP_K_THREADS) {
        const unsigned j = base + lane;
        const float s = j < nodes ? __ldg(scores + (size_t)j * batch + b) : 0.0f;
        // NaN fails `s > 0` and is left out.
        bool wanted = s > 0.0f && (count < k || ranks_before(s, j, my_s[k - 1], my_id[k - 1]));
        for (unsigned votes = __ballot_sync(FULL, wanted); votes; votes &= votes - 1) {
            const unsigned from = __ffs(votes) - 1;
            count = insert(my_s, my_id, count, k, __shfl_sync(FULL, s, from), __shfl_sync(FULL, j, from));
        }
    }
    if (lane == 0) best_count[warp] = count;
    __syncthreads();
    if (warp != 0) return;
    for (unsigned other = 1; other < TOP_K_WARPS; ++other)
        for (unsigned i = 0; i < best_count[other]; ++i)
            count = insert(my_s, my_id, count, k, best_s[other][i], best_id[other][i]);
    for (unsigned i = lane; i < k; i += 32) {
        ids[(size_t)b * k + i] = i < count ? my_id[i] : 0xffffffffu;
        values[(size_t)b * k + i] = i < count ? my_s[i] : __int_as_float(0x7fc00000);
    }
    if (lane == 0) counts[b] = count;
}
