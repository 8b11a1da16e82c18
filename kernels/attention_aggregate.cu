// Attention aggregation from token level to node level, for many ragged
// windows in one launch. Compiled at run time with NVRTC by
// src/compute/gpu, and run on the CPU by its emulation (kernels/emulation);
// the CPU reference (the oracle the tests compare with) is
// src/compute/aggregate.rs.
//
// Node-level weight from query node i to key node j of a window:
//
//     W[i][j] = 1/|Q_i| · Σ_{x ∈ Q_i} 1/|K_j| · Σ_{y ∈ K_j} A[x][y]
//
// where Q_i and K_j are the nodes' token ranges; empty ranges give 0 and
// tokens in no range are ignored (but, for the fused kernel, still take
// part in each query token's softmax, as in the reference).
//
// Host-built tables shared by the kernels (all indices are elements):
//   Window  one per window (layout below, mirrored by src/compute/gpu/attention.rs)
//   seg_start/seg_end  every window's query segments, then its key
//           segments, as token ranges local to the window
//   key_node  for every key token of every window, the window-local index
//           of its key segment, or -1 for a token in none

#define FULL 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)

struct Window {
    unsigned long long attention;  // (a) first element of its Tq × Tk matrix
    unsigned long long queries;    // (b) first element of its Tq × d queries
    unsigned long long keys;       // (b) first element of its Tk × d keys
    unsigned long long output;     // first element of its rows × columns weights
    unsigned int key_tokens;       // Tk
    unsigned int columns;          // key nodes
    unsigned int query_segments;   // index of its first query segment
    unsigned int key_segments;     // index of its first key segment
    unsigned int key_base;         // index of its first key token in key_node
    unsigned int dimension;        // (b) d
};

// Segmented suffix sum over the lanes of a warp: lanes with equal `node`
// form contiguous runs (segments are ordered and disjoint); afterwards the
// first lane of each run holds the run's total.
template <typename T>
__device__ T segmented_sum(T value, int node) {
    const unsigned lane = threadIdx.x & 31;
    for (unsigned offset = 1; offset < 32; offset <<= 1) {
        T other = __shfl_down_sync(FULL, value, offset);
        int other_node = __shfl_down_sync(FULL, node, offset);
        if (lane + offset < 32 && other_node == node) value += other;
    }
    return value;
}

// Whether this lane starts a run of a real key node.
__device__ bool run_head(int node) {
    int previous = __shfl_up_sync(FULL, node, 1);
    return node >= 0 && ((threadIdx.x & 31) == 0 || previous != node);
}

// ---------------------------------------------------------------------------
// (a) segment_mean: given attention matrices.
//
// Launch: one block of SEGMENT_MEAN_THREADS threads per task; a task is
// (window, query node i, a chunk of consecutive key nodes s0..s1) and owns
// the outputs W[i][s0..s1), which it writes exactly once. The host cuts
// each window's key nodes into chunks of at most SEGMENT_MEAN_CHUNK_NODES
// nodes covering about SEGMENT_MEAN_CHUNK_TOKENS tokens (one longer node
// is a chunk of its own), so a large window spreads over many blocks.
//
// Inside a block, thread t walks columns y = c0 + t, c0 + t + blockDim, ...
// of the chunk and sums column y over the query node's rows (reads of one
// row are coalesced across the block); the column sums are reduced by key
// node with warp shuffles and added into a shared accumulator per node.
// Sums are in double, as in the reference, so the only rounding is the
// final division and the conversion to float.
#define SEGMENT_MEAN_THREADS 256
#define SEGMENT_MEAN_CHUNK_NODES 1024

struct MeanTask {
    unsigned int window;
    unsigned int row;            // query node i, window-local
    unsigned int first_segment;  // s0, window-local key node
    unsigned int end_segment;    // s1
};

extern "C" __global__ void __launch_bounds__(SEGMENT_MEAN_THREADS)
segment_mean(const Window* __restrict__ windows, const MeanTask* __restrict__ tasks,
             const float* __restrict__ attention, const unsigned* __restrict__ seg_start,
             const unsigned* __restrict__ seg_end, const int* __restrict__ key_node,
             float* __restrict__ out) {
    __shared__ double sums[SEGMENT_MEAN_CHUNK_NODES];
    const MeanTask task = tasks[blockIdx.x];
    const Window w = windows[task.window];
    const unsigned nodes = task.end_segment - task.first_segment;
    const unsigned q0 = seg_start[w.query_segments + task.row];
    const unsigned q1 = seg_end[w.query_segments + task.row];
    for (unsigned k = threadIdx.x; k < nodes; k += blockDim.x) sums[k] = 0.0;
    __syncthreads();

    if (q1 > q0 && nodes > 0) {
        const unsigned c0 = seg_start[w.key_segments + task.first_segment];
        const unsigned c1 = seg_end[w.key_segments + task.end_segment - 1];
        const float* matrix = attention + w.attention;
        // The loop bound is uniform across the block so every lane reaches
        // the shuffles.
        for (unsigned base = c0; base < c1; base += blockDim.x) {
            const unsigned y = base + threadIdx.x;
            const int node = y < c1 ? key_node[w.key_base + y] : -1;
            double column = 0.0;
            if (node >= 0) {
                const float* cell = matrix + (size_t)q0 * w.key_tokens + y;
#pragma unroll 4
                for (unsigned x = q0; x < q1; ++x, cell += w.key_tokens) column += (double)__ldg(cell);
            }
            column = segmented_sum(column, node);
            if (run_head(node)) atomicAdd(&sums[node - task.first_segment], column);
        }
    }
    __syncthreads();

    float* row = out + w.output + (size_t)task.row * w.columns;
    for (unsigned k = threadIdx.x; k < nodes; k += blockDim.x) {
        const unsigned j = task.first_segment + k;
        const unsigned len = seg_end[w.key_segments + j] - seg_start[w.key_segments + j];
        row[j] = (len == 0 || q1 == q0) ? 0.0f : (float)(sums[k] / ((double)len * (double)(q1 - q0)));
    }
}

// ---------------------------------------------------------------------------
// (b) fused_attention: softmax(Q Kᵀ / √d) aggregated to node level without
// ever writing the Tq × Tk matrix.
//
// Launch: one block of FUSED_THREADS (256) threads per query tile; a tile is
// up to FUSED_Q (64) consecutive tokens of ONE query node (the host cuts
// each query node into tiles). The block streams the window's key tokens
// in tiles of FUSED_K (64):
//   1. S = Q_tile · K_tileᵀ / √d, tiled over d in steps of FUSED_D (32)
//      through shared memory (Q and K chunks stored transposed); each thread
//      computes a 4 × 4 block of S at rows ty + 16r, columns tx + 16c.
//   2. One warp per row (8 rows per warp): online softmax. The running max
//      m and sum l are updated with the tile's max; the accumulator of the
//      key node still open at the tile's start is rescaled by exp(m - m').
//      exp(s - m') is reduced by key node with warp shuffles; a node that
//      ends inside the tile is closed and stored as its log-sum-exp
//      m' + log(a) in `scratch` (row × columns, node level), which later
//      max changes leave valid; the node running past the tile stays open.
//   3. After the last key tile, each row's LSE = m + log(l) turns the stored
//      values into softmax mass per node, exp(lse_j - LSE) / |K_j|, summed
//      over the tile's rows into `partial` (one row of `columns` per tile).
// sum_query_tiles then adds the tiles of each query node and divides by
// |Q_i|. Static shared memory: 2·32·65 + 64·65 floats + 5·64 words ≈ 35 KB.
#define FUSED_THREADS 256
#define FUSED_Q 64
#define FUSED_K 64
#define FUSED_D 32
static_assert(FUSED_Q == FUSED_K, "the Q and K chunks are loaded in one loop");
static_assert(FUSED_K == 64, "step 2 gives each lane two columns of a key tile");

struct QueryTile {
    unsigned long long scratch;  // first element of its FUSED_Q × columns log-sum-exps
    unsigned long long partial;  // first element of its columns partial sums
    unsigned int window;
    unsigned int first_token;    // window-local query token
    unsigned int tokens;         // 1..FUSED_Q
    unsigned int pad;
};

extern "C" __global__ void __launch_bounds__(FUSED_THREADS)
fused_attention(const Window* __restrict__ windows, const QueryTile* __restrict__ tiles,
                const float* __restrict__ queries, const float* __restrict__ keys,
                const unsigned* __restrict__ seg_start, const unsigned* __restrict__ seg_end,
                const int* __restrict__ key_node, float* __restrict__ scratch,
                float* __restrict__ partial) {
    // One float of padding per row keeps the transposing stores free of
    // bank conflicts.
    __shared__ float q_chunk[FUSED_D][FUSED_Q + 1];
    __shared__ float k_chunk[FUSED_D][FUSED_K + 1];
    __shared__ float logits[FUSED_Q][FUSED_K + 1];
    __shared__ int tile_node[FUSED_K];
    __shared__ float row_max[FUSED_Q], row_sum[FUSED_Q], open_sum[FUSED_Q];
    __shared__ int open_node[FUSED_Q];

    const QueryTile tile = tiles[blockIdx.x];
    const Window w = windows[tile.window];
    const unsigned d = w.dimension, tk = w.key_tokens, columns = w.columns;
    const float scale = 1.0f / sqrtf((float)d);  // as the reference rounds it
    const float* q = queries + w.queries + (size_t)tile.first_token * d;
    const float* k = keys + w.keys;
    float* lse = scratch + tile.scratch;
    const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const unsigned ty = tid / 16, tx = tid % 16;

    if (tid < FUSED_Q) {
        row_max[tid] = NEG_INF;
        row_sum[tid] = 0.0f;
        open_sum[tid] = 0.0f;
        open_node[tid] = -1;
    }

    for (unsigned k0 = 0; k0 < tk; k0 += FUSED_K) {
        // 1. Logits of this key tile.
        float acc[4][4] = {};
        for (unsigned d0 = 0; d0 < d; d0 += FUSED_D) {
            for (unsigned i = tid; i < FUSED_D * FUSED_Q; i += FUSED_THREADS) {
                const unsigned r = i / FUSED_D, c = i % FUSED_D;  // coalesced along d
                q_chunk[c][r] = (r < tile.tokens && d0 + c < d) ? q[(size_t)r * d + d0 + c] : 0.0f;
                k_chunk[c][r] = (k0 + r < tk && d0 + c < d) ? k[(size_t)(k0 + r) * d + d0 + c] : 0.0f;
            }
            __syncthreads();
#pragma unroll 8
            for (unsigned c = 0; c < FUSED_D; ++c) {
                float a[4], b[4];
#pragma unroll
                for (int r = 0; r < 4; ++r) a[r] = q_chunk[c][ty + 16 * r];
#pragma unroll
                for (int s = 0; s < 4; ++s) b[s] = k_chunk[c][tx + 16 * s];
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int s = 0; s < 4; ++s) acc[r][s] = fmaf(a[r], b[s], acc[r][s]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                const unsigned y = k0 + tx + 16 * s;
                logits[ty + 16 * r][tx + 16 * s] = y < tk ? acc[r][s] * scale : NEG_INF;
            }
        if (tid < FUSED_K) tile_node[tid] = k0 + tid < tk ? key_node[w.key_base + k0 + tid] : -1;
        __syncthreads();

        // 2. Online softmax and per-node sums, one warp per row.
        for (unsigned r = warp; r < tile.tokens; r += FUSED_THREADS / 32) {
            const float s0 = logits[r][lane], s1 = logits[r][lane + 32];
            float tile_max = fmaxf(s0, s1);
            for (unsigned o = 16; o > 0; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(FULL, tile_max, o));
            const float old_max = row_max[r];
            const float new_max = fmaxf(old_max, tile_max);  // finite: column k0 < tk is real
            const float rescale = expf(old_max - new_max);  // 0 on the first tile
            const float e[2] = {expf(s0 - new_max), expf(s1 - new_max)};
            float total = e[0] + e[1];
            for (unsigned o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(FULL, total, o);
            int open = open_node[r];
            float open_value = open_sum[r] * rescale;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int node = tile_node[half * 32 + lane];
                const float run = segmented_sum(e[half], node);
                const bool head = run_head(node);
                const unsigned half_end = k0 + half * 32 + 32;  // first key token past this half
                // Only lane 0's run can continue the open node (tokens are contiguous).
                const float value = run + (head && node == open ? open_value : 0.0f);
                const bool ends_here = head && seg_end[w.key_segments + node] <= half_end;
                if (ends_here) lse[(size_t)r * columns + node] = new_max + logf(value);
                // The node of lane 31 stays open if it runs past this half.
                const unsigned heads = __ballot_sync(FULL, head);
                const int last_node = __shfl_sync(FULL, node, 31);
                const float last_value = __shfl_sync(FULL, value, heads ? 31 - __clz(heads) : 0);
                const bool still_open =
                    last_node >= 0 && seg_end[w.key_segments + last_node] > half_end;
                open = still_open ? last_node : -1;
                open_value = still_open ? last_value : 0.0f;
            }
            // Every lane read row r's state above; lane 0 overwrites it.
            __syncwarp();
            if (lane == 0) {
                row_max[r] = new_max;
                row_sum[r] = row_sum[r] * rescale + total;
                open_node[r] = open;
                open_sum[r] = open_value;
            }
        }
        __syncthreads();
    }

    // 3. Softmax mass per key node, summed over the tile's rows. Every key
    // token of a node lies below tk, so every non-empty node was closed.
    if (tid < tile.tokens) row_max[tid] += logf(row_sum[tid]);  // the row's LSE
    __syncthreads();
    for (unsigned j = tid; j < columns; j += FUSED_THREADS) {
        const unsigned len = seg_end[w.key_segments + j] - seg_start[w.key_segments + j];
        float sum = 0.0f;
        if (len > 0)
            for (unsigned r = 0; r < tile.tokens; ++r) sum += expf(lse[(size_t)r * columns + j] - row_max[r]);
        partial[tile.partial + j] = len > 0 ? sum / (float)len : 0.0f;
    }
}

// Launch: one block of 256 threads per window row (query node); a row task
// names its window, its query node and the run of consecutive query tiles
// cut from that node (none when the node is empty or Tk = 0). Threads walk
// the row's columns; each output element is written exactly once.
struct RowTask {
    unsigned int window;
    unsigned int row;
    unsigned int first_tile;
    unsigned int tiles;
};

extern "C" __global__ void sum_query_tiles(const Window* __restrict__ windows,
                                           const RowTask* __restrict__ rows,
                                           const QueryTile* __restrict__ tiles,
                                           const unsigned* __restrict__ seg_start,
                                           const unsigned* __restrict__ seg_end,
                                           const float* __restrict__ partial,
                                           float* __restrict__ out) {
    const RowTask task = rows[blockIdx.x];
    const Window w = windows[task.window];
    const unsigned tokens = seg_end[w.query_segments + task.row] - seg_start[w.query_segments + task.row];
    float* row = out + w.output + (size_t)task.row * w.columns;
    for (unsigned j = threadIdx.x; j < w.columns; j += blockDim.x) {
        float sum = 0.0f;
        for (unsigned t = 0; t < task.tiles; ++t) sum += partial[tiles[task.first_tile + t].partial + j];
        row[j] = task.tiles > 0 ? sum / (float)tokens : 0.0f;
    }
}

// ---------------------------------------------------------------------------
// softmax_rows: the unfused baseline's first half. Writes the softmax of
// the scaled dot products of each query token in a tile with all the
// window's key tokens into attention[w.attention + x·Tk + y]; segment_mean
// then aggregates the materialised matrix. Kept as the baseline the fused
// kernel is measured against (benches/gpu.rs) and as an independent
// cross-check of it (tests/it/gpu.rs); rows of tokens in no query node are
// neither written nor read.
//
// Launch: one block of 256 threads per query tile (as fused_attention),
// dynamic shared memory of d floats for the query vector; thread t computes
// the logits of key tokens t, t + 256, ... (each reading a whole key row),
// then the block reduces the row's max and sum and normalises in place.
__device__ float block_reduce(float value, bool is_max, float* slots) {
    for (unsigned o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(FULL, value, o);
        value = is_max ? fmaxf(value, other) : value + other;
    }
    __syncthreads();  // slots may still be read from the previous call
    if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = value;
    __syncthreads();
    value = slots[0];
    for (unsigned i = 1; i < blockDim.x / 32; ++i) value = is_max ? fmaxf(value, slots[i]) : value + slots[i];
    return value;
}

extern "C" __global__ void softmax_rows(const Window* __restrict__ windows,
                                        const QueryTile* __restrict__ tiles,
                                        const float* __restrict__ queries,
                                        const float* __restrict__ keys,
                                        float* __restrict__ attention) {
    // Dynamic shared memory: the query vector (the name is the one the CPU
    // emulation's launcher defines; see kernels/emulation).
    extern __shared__ float dynamic_shared[];
    float* query = dynamic_shared;
    __shared__ float slots[32];
    const QueryTile tile = tiles[blockIdx.x];
    const Window w = windows[tile.window];
    const unsigned d = w.dimension, tk = w.key_tokens;
    const float scale = 1.0f / sqrtf((float)d);
    for (unsigned r = 0; r < tile.tokens; ++r) {
        const unsigned x = tile.first_token + r;
        __syncthreads();  // the previous row is done with `query`
        for (unsigned c = threadIdx.x; c < d; c += blockDim.x) query[c] = queries[w.queries + (size_t)x * d + c];
        __syncthreads();
        float* row = attention + w.attention + (size_t)x * tk;
        float max = NEG_INF;
        for (unsigned y = threadIdx.x; y < tk; y += blockDim.x) {
            const float* key = keys + w.keys + (size_t)y * d;
            float dot = 0.0f;
            for (unsigned c = 0; c < d; ++c) dot = fmaf(query[c], key[c], dot);
            row[y] = dot * scale;
            max = fmaxf(max, dot * scale);
        }
        max = block_reduce(max, true, slots);
        float sum = 0.0f;
        for (unsigned y = threadIdx.x; y < tk; y += blockDim.x) {
            const float e = expf(row[y] - max);
            row[y] = e;
            sum += e;
        }
        const float inverse = 1.0f / block_reduce(sum, false, slots);
        for (unsigned y = threadIdx.x; y < tk; y += blockDim.x) row[y] *= inverse;
    }
}
