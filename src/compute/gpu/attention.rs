//! Host side of `kernels/attention_aggregate.cu`: flattens many ragged
//! windows into the tables the kernels read (the `#[repr(C)]` structs here
//! mirror the kernel's), launches, and splits the output per window. The
//! same code drives a GPU and the CPU emulation (see `backend`).

use crate::compute::aggregate::{self, AttentionWindow, NodeWeights, Segments, VectorWindow};
use crate::compute::gpu::backend::{Backend, Element, Kernel, Launch};
use crate::error::{Error, Result};

/// Most key nodes one `segment_mean` block owns (`SEGMENT_MEAN_CHUNK_NODES`).
const CHUNK_NODES: usize = 1024;
/// Key tokens a `segment_mean` block covers, unless one node is longer.
const CHUNK_TOKENS: u32 = 2048;
/// Query tokens per `fused_attention` block (`FUSED_Q`).
const QUERY_TILE: u32 = 64;
/// The largest dynamic shared memory a launch gets without opting in.
const DEFAULT_SHARED_BYTES: usize = 48 * 1024;

/// `Window` of the kernel source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    attention: u64,
    queries: u64,
    keys: u64,
    output: u64,
    key_tokens: u32,
    columns: u32,
    query_segments: u32,
    key_segments: u32,
    key_base: u32,
    dimension: u32,
}

/// `MeanTask` of the kernel source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct MeanTask {
    window: u32,
    row: u32,
    first_segment: u32,
    end_segment: u32,
}

/// `QueryTile` of the kernel source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct QueryTile {
    scratch: u64,
    partial: u64,
    window: u32,
    first_token: u32,
    tokens: u32,
    pad: u32,
}

/// `RowTask` of the kernel source.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct RowTask {
    window: u32,
    row: u32,
    first_tile: u32,
    tiles: u32,
}

/// Marks the kernel's structs as plain data for both backends.
macro_rules! kernel_structs {
    ($($name:ty),*) => {$(
        // SAFETY: plain `#[repr(C)]` integers laid out as the kernel's
        // struct, without padding.
        unsafe impl Element for $name {}
        #[cfg(feature = "cuda")]
        // SAFETY: as above.
        unsafe impl cudarc::driver::DeviceRepr for $name {}
    )*};
}
kernel_structs!(Window, MeanTask, QueryTile, RowTask);

/// The segment tables of many windows, in the kernels' layout.
#[derive(Debug, Default)]
struct Layout {
    windows: Vec<Window>,
    seg_start: Vec<u32>,
    seg_end: Vec<u32>,
    key_node: Vec<i32>,
    /// `(rows, columns)` of each window's weights.
    shapes: Vec<(usize, usize)>,
    output_len: usize,
}

/// [`Layout`]'s tables on the device.
struct DeviceLayout<B: Backend> {
    windows: B::Buffer<Window>,
    seg_start: B::Buffer<u32>,
    seg_end: B::Buffer<u32>,
    key_node: B::Buffer<i32>,
}

impl Layout {
    /// Adds a window after checking its segments; returns its index.
    fn push(
        &mut self,
        index: usize,
        query: (&Segments, usize),
        key: (&Segments, usize),
    ) -> Result<usize> {
        let bad = |message: String| Error::DagInput {
            what: format!("attention window {index}"),
            message,
        };
        query.0.validate(query.1, "query").map_err(bad)?;
        key.0.validate(key.1, "key").map_err(bad)?;
        let too_large = || Error::Gpu("attention windows too large for one launch".into());
        let u32_of = |n: usize| u32::try_from(n).map_err(|_| too_large());
        let window = Window {
            output: self.output_len as u64,
            key_tokens: u32_of(key.1)?,
            // key_node holds node indices as i32.
            columns: i32::try_from(key.0.len()).map_err(|_| too_large())? as u32,
            query_segments: u32_of(self.seg_start.len())?,
            key_segments: u32_of(self.seg_start.len() + query.0.len())?,
            key_base: u32_of(self.key_node.len())?,
            ..Window::default()
        };
        u32_of(self.seg_start.len() + query.0.len() + key.0.len())?;
        u32_of(self.key_node.len() + key.1)?;
        for range in query.0.0.iter().chain(&key.0.0) {
            self.seg_start.push(range.start);
            self.seg_end.push(range.end);
        }
        let base = self.key_node.len();
        self.key_node.resize(base + key.1, -1);
        for (j, range) in key.0.0.iter().enumerate() {
            self.key_node[base + range.start as usize..base + range.end as usize].fill(j as i32);
        }
        self.shapes.push((query.0.len(), key.0.len()));
        self.output_len += query.0.len() * key.0.len();
        self.windows.push(window);
        Ok(self.windows.len() - 1)
    }

    fn upload<B: Backend>(&self, device: &B) -> Result<DeviceLayout<B>> {
        Ok(DeviceLayout {
            windows: device.to_device(&self.windows)?,
            seg_start: device.to_device(&self.seg_start)?,
            seg_end: device.to_device(&self.seg_end)?,
            key_node: device.to_device(&self.key_node)?,
        })
    }

    /// Window `w`'s key segments as `(start, end)` token pairs.
    fn key_segments(&self, w: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let first = self.windows[w].key_segments as usize;
        let range = first..first + self.shapes[w].1;
        self.seg_start[range.clone()]
            .iter()
            .copied()
            .zip(self.seg_end[range].iter().copied())
    }

    /// Cuts window `w`'s key nodes into the chunks `segment_mean` blocks own.
    fn key_chunks(&self, w: usize) -> Vec<(u32, u32)> {
        let segments: Vec<(u32, u32)> = self.key_segments(w).collect();
        let mut chunks = Vec::new();
        let mut first = 0;
        for (j, &(_, end)) in segments.iter().enumerate() {
            if j > first && (j - first == CHUNK_NODES || end - segments[first].0 > CHUNK_TOKENS) {
                chunks.push((first as u32, j as u32));
                first = j;
            }
        }
        if first < segments.len() {
            chunks.push((first as u32, segments.len() as u32));
        }
        chunks
    }

    /// Splits the downloaded output into each window's weights.
    fn split(&self, output: &[f32]) -> Vec<NodeWeights> {
        let mut at = 0;
        self.shapes
            .iter()
            .map(|&(rows, columns)| {
                let weights = output[at..at + rows * columns].to_vec();
                at += rows * columns;
                NodeWeights {
                    rows,
                    columns,
                    weights,
                }
            })
            .collect()
    }
}

/// Query and key vectors of many windows on the device, cut into query tiles.
struct Staged<B: Backend> {
    layout: Layout,
    queries: B::Buffer<f32>,
    keys: B::Buffer<f32>,
    /// Elements of the materialised matrices (rows of all query tokens).
    cells: usize,
    tiles: Vec<QueryTile>,
    rows: Vec<RowTask>,
    scratch_len: usize,
    partial_len: usize,
}

/// Segment means of given attention matrices, all windows in one launch
/// (the kernel form of [`aggregate::segment_mean`]).
pub(super) fn segment_mean<B: Backend>(
    device: &B,
    windows: &[AttentionWindow],
) -> Result<Vec<NodeWeights>> {
    let mut layout = Layout::default();
    let mut cells = 0usize;
    for (index, w) in windows.iter().enumerate() {
        let at = layout.push(
            index,
            (w.query_segments, w.query_tokens),
            (w.key_segments, w.key_tokens),
        )?;
        if w.attention.len() < w.query_tokens * w.key_tokens {
            return Err(Error::DagInput {
                what: format!("attention window {index}"),
                message: format!(
                    "{} weights for {} × {} tokens",
                    w.attention.len(),
                    w.query_tokens,
                    w.key_tokens
                ),
            });
        }
        layout.windows[at].attention = cells as u64;
        cells += w.query_tokens * w.key_tokens;
    }
    let attention = copy_at(
        device,
        cells,
        windows.iter().zip(&layout.windows).map(|(w, slot)| {
            (
                &w.attention[..w.query_tokens * w.key_tokens],
                slot.attention,
            )
        }),
    )?;
    run_segment_mean(device, &layout, &attention)
}

/// `segment_mean` over matrices already on the device at the layout's
/// `attention` offsets.
fn run_segment_mean<B: Backend>(
    device: &B,
    layout: &Layout,
    attention: &B::Buffer<f32>,
) -> Result<Vec<NodeWeights>> {
    let mut tasks = Vec::new();
    for w in 0..layout.windows.len() {
        for (first_segment, end_segment) in layout.key_chunks(w) {
            tasks.extend((0..layout.shapes[w].0 as u32).map(|row| MeanTask {
                window: w as u32,
                row,
                first_segment,
                end_segment,
            }));
        }
    }
    let output = device.poisoned::<f32>(layout.output_len, f32::NAN.to_bits())?;
    if !tasks.is_empty() {
        let tables = layout.upload(device)?;
        let tasks_on_device = device.to_device(&tasks)?;
        let mut launch = device.launcher(Kernel::SegmentMean);
        launch
            .buffer(&tables.windows)
            .buffer(&tasks_on_device)
            .buffer(attention)
            .buffer(&tables.seg_start)
            .buffer(&tables.seg_end)
            .buffer(&tables.key_node)
            .buffer(&output);
        // SAFETY: arguments match the kernel's; every index it forms is
        // inside the tables built and checked above.
        unsafe { launch.launch(tasks.len(), 0) }?;
    }
    Ok(layout.split(&device.download(&output)?))
}

/// Attention from token vectors aggregated to node level by the fused
/// online-softmax kernel, all windows in one launch (the kernel form of
/// [`aggregate::vector_attention`]); the token-level matrix never reaches
/// device memory.
pub(super) fn vector_attention<B: Backend>(
    device: &B,
    windows: &[VectorWindow],
) -> Result<Vec<NodeWeights>> {
    let staged = stage(device, windows)?;
    let output = device.poisoned::<f32>(staged.layout.output_len, f32::NAN.to_bits())?;
    if !staged.rows.is_empty() {
        let tables = staged.layout.upload(device)?;
        let tiles = device.to_device(&staged.tiles)?;
        let rows = device.to_device(&staged.rows)?;
        let partial = device.poisoned::<f32>(staged.partial_len, f32::NAN.to_bits())?;
        if !staged.tiles.is_empty() {
            // Every element the kernel reads back is written first.
            let scratch = device.scratch(staged.scratch_len)?;
            let mut launch = device.launcher(Kernel::FusedAttention);
            launch
                .buffer(&tables.windows)
                .buffer(&tiles)
                .buffer(&staged.queries)
                .buffer(&staged.keys)
                .buffer(&tables.seg_start)
                .buffer(&tables.seg_end)
                .buffer(&tables.key_node)
                .buffer(&scratch)
                .buffer(&partial);
            // SAFETY: arguments match the kernel's; indices stay inside the
            // staged buffers.
            unsafe { launch.launch(staged.tiles.len(), 0) }?;
        }
        let mut launch = device.launcher(Kernel::SumQueryTiles);
        launch
            .buffer(&tables.windows)
            .buffer(&rows)
            .buffer(&tiles)
            .buffer(&tables.seg_start)
            .buffer(&tables.seg_end)
            .buffer(&partial)
            .buffer(&output);
        // SAFETY: as above.
        unsafe { launch.launch(staged.rows.len(), 0) }?;
    }
    let output = device.download(&output)?;
    Ok(with_cpu_fallback(windows, staged.layout.split(&output)))
}

/// The same weights as [`vector_attention`] computed unfused: each window's
/// softmax matrix is materialised in device memory, then aggregated by the
/// `segment_mean` kernel. The baseline the fused kernel is measured
/// against, and an independent check of it.
pub(super) fn materialised_attention<B: Backend>(
    device: &B,
    windows: &[VectorWindow],
) -> Result<Vec<NodeWeights>> {
    let staged = stage(device, windows)?;
    // softmax_rows writes every row segment_mean reads.
    let attention = device.scratch(staged.cells)?;
    if !staged.tiles.is_empty() {
        let dimension = windows.iter().map(|w| w.dimension).max().unwrap_or(0);
        // The kernel's own static shared memory: 32 floats of reduction slots.
        let shared = dimension * std::mem::size_of::<f32>() + 32 * std::mem::size_of::<f32>();
        if shared > DEFAULT_SHARED_BYTES {
            return Err(Error::Gpu(format!(
                "dimension {dimension} is too large for the materialising kernel"
            )));
        }
        let tables = staged.layout.upload(device)?;
        let tiles = device.to_device(&staged.tiles)?;
        let mut launch = device.launcher(Kernel::SoftmaxRows);
        launch
            .buffer(&tables.windows)
            .buffer(&tiles)
            .buffer(&staged.queries)
            .buffer(&staged.keys)
            .buffer(&attention);
        // SAFETY: arguments match the kernel's; `shared` holds a query.
        unsafe { launch.launch(staged.tiles.len(), shared as u32) }?;
    }
    let weights = run_segment_mean(device, &staged.layout, &attention)?;
    Ok(with_cpu_fallback(windows, weights))
}

/// A device buffer of `len` floats (at least one) holding each part at its
/// offset; elements outside the parts are left unset.
fn copy_at<'a, B: Backend>(
    device: &B,
    len: usize,
    parts: impl Iterator<Item = (&'a [f32], u64)>,
) -> Result<B::Buffer<f32>> {
    // Callers read only elements inside the parts copied below.
    let mut buffer = device.scratch(len)?;
    for (data, offset) in parts.filter(|(data, _)| !data.is_empty()) {
        device.write_at(&mut buffer, offset as usize, data)?;
    }
    Ok(buffer)
}

/// Checks and uploads vector windows and cuts their query nodes into tiles.
/// Windows of dimension 0 get no tiles (see [`with_cpu_fallback`]).
fn stage<B: Backend>(device: &B, windows: &[VectorWindow]) -> Result<Staged<B>> {
    let mut layout = Layout::default();
    let (mut query_len, mut key_len, mut cells) = (0usize, 0usize, 0usize);
    let (mut tiles, mut rows) = (Vec::new(), Vec::new());
    let (mut scratch_len, mut partial_len) = (0usize, 0usize);
    for (index, w) in windows.iter().enumerate() {
        let (tq, tk, d) = (w.query_tokens(), w.key_tokens(), w.dimension);
        let at = layout.push(index, (w.query_segments, tq), (w.key_segments, tk))?;
        let columns = w.key_segments.len();
        let slot = &mut layout.windows[at];
        (slot.queries, slot.keys, slot.attention) =
            (query_len as u64, key_len as u64, cells as u64);
        slot.dimension = u32::try_from(d).map_err(|_| Error::Gpu("dimension too large".into()))?;
        (query_len, key_len, cells) = (query_len + tq * d, key_len + tk * d, cells + tq * tk);
        for (row, range) in w.query_segments.0.iter().enumerate() {
            let first_tile = tiles.len() as u32;
            if tk > 0 && d > 0 {
                for first_token in range.clone().step_by(QUERY_TILE as usize) {
                    let tokens = QUERY_TILE.min(range.end - first_token);
                    tiles.push(QueryTile {
                        scratch: scratch_len as u64,
                        partial: partial_len as u64,
                        window: at as u32,
                        first_token,
                        tokens,
                        pad: 0,
                    });
                    scratch_len += tokens as usize * columns;
                    partial_len += columns;
                }
            }
            rows.push(RowTask {
                window: at as u32,
                row: row as u32,
                first_tile,
                tiles: tiles.len() as u32 - first_tile,
            });
        }
    }
    let queries = copy_at(
        device,
        query_len,
        windows
            .iter()
            .zip(&layout.windows)
            .map(|(w, slot)| (&w.queries[..w.query_tokens() * w.dimension], slot.queries)),
    )?;
    let keys = copy_at(
        device,
        key_len,
        windows
            .iter()
            .zip(&layout.windows)
            .map(|(w, slot)| (&w.keys[..w.key_tokens() * w.dimension], slot.keys)),
    )?;
    Ok(Staged {
        layout,
        queries,
        keys,
        cells,
        tiles,
        rows,
        scratch_len,
        partial_len,
    })
}

/// Windows of dimension 0 (where the reference's `1/√d` is infinite) are
/// left to the CPU reference so that both give the same answer.
fn with_cpu_fallback(windows: &[VectorWindow], mut weights: Vec<NodeWeights>) -> Vec<NodeWeights> {
    for (w, out) in windows.iter().zip(&mut weights) {
        if w.dimension == 0 {
            *out = aggregate::vector_attention(w);
        }
    }
    weights
}
