//! Host side of `kernels/propagate.cu`: a graph kept on the device
//! ([`DeviceGraph`]) serves many batches of queries, one kernel launch per
//! propagation step, then the top-k kernel. The same code drives a GPU and
//! the CPU emulation (see `backend`).

use crate::compute::gpu::backend::{Backend, Kernel, Launch, THREADS};
use crate::compute::propagate::{self, PropagateOptions, PropagationGraph};
use crate::error::{Error, Result};

/// The largest `k` the top-k kernel serves (`TOP_K_MAX`); a larger `k`
/// downloads the scores and takes the CPU's [`propagate::top_k`].
pub const TOP_K_MAX: usize = 64;

/// A [`PropagationGraph`] uploaded once to a device.
pub struct DeviceGraph<'g, B: Backend> {
    device: &'g B,
    nodes: usize,
    offsets: B::Buffer<u32>,
    parents: B::Buffer<u32>,
    weights: B::Buffer<f32>,
    /// Mean in-degree, rounded up, at least 1: what the lanes per node of
    /// small batches are chosen from.
    mean_degree: usize,
    /// Lanes per node for small batches set by
    /// [`DeviceGraph::with_lanes_per_node`], in place of the default.
    lanes: Option<u32>,
}

/// Checks `graph` and copies it to `device` for [`DeviceGraph`]'s batches.
pub(super) fn upload<'g, B: Backend>(
    device: &'g B,
    graph: &PropagationGraph,
) -> Result<DeviceGraph<'g, B>> {
    graph.validate().map_err(|message| Error::DagInput {
        what: "propagation graph".into(),
        message,
    })?;
    let nodes = graph.nodes();
    if u32::try_from(nodes).is_err() {
        return Err(Error::Gpu(format!(
            "{nodes} nodes do not fit the kernels' u32 ids"
        )));
    }
    let mean_degree = graph.edges().div_ceil(nodes.max(1)).max(1);
    Ok(DeviceGraph {
        device,
        nodes,
        offsets: device.to_device(&graph.offsets)?,
        parents: device.to_device(&graph.parents)?,
        weights: device.to_device(&graph.weights)?,
        mean_degree,
        lanes: None,
    })
}

impl<B: Backend> DeviceGraph<'_, B> {
    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Lanes serving one node in the small-batch kernel: the mean in-degree
    /// over 4 for one query, over 2 for more, rounded up to a power of two,
    /// at most 32 (the fastest or within 10% of it for every graph and batch that
    /// `benches/gpu.rs` sweeps on an H200; docs/benchmarks.md), unless set.
    fn lanes_per_node(&self, batch: usize) -> u32 {
        let share = if batch == 1 { 4 } else { 2 };
        self.lanes
            .unwrap_or_else(|| self.mean_degree.div_ceil(share).next_power_of_two().min(32) as u32)
    }

    /// Sets the lanes that serve one node when `batch < 32` (a power of
    /// two, 1..=32) in place of the default chosen from the mean in-degree:
    /// the knob `benches/gpu.rs` sweeps to choose that default.
    pub fn with_lanes_per_node(mut self, lanes: u32) -> Result<Self> {
        if !(lanes.is_power_of_two() && lanes <= 32) {
            return Err(Error::DagInput {
                what: "lanes per node".into(),
                message: format!("{lanes} is not a power of two from 1 to 32"),
            });
        }
        self.lanes = Some(lanes);
        Ok(self)
    }

    /// Copies node-major seeds (`N × batch`) to the device after checking
    /// their length.
    pub fn upload_seeds(&self, seeds: &[f32], batch: usize) -> Result<B::Buffer<f32>> {
        if Some(seeds.len()) != self.nodes.checked_mul(batch) {
            return Err(Error::DagInput {
                what: "propagation seeds".into(),
                message: format!(
                    "{} seeds for {} nodes × {batch} queries",
                    seeds.len(),
                    self.nodes
                ),
            });
        }
        self.device.to_device(seeds)
    }

    /// [`propagate::propagate`] from host seeds to host scores.
    pub fn propagate(
        &self,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
    ) -> Result<Vec<f32>> {
        if seeds.is_empty() {
            self.upload_seeds(seeds, batch)?;
            return Ok(Vec::new());
        }
        let seeds = self.upload_seeds(seeds, batch)?;
        let scores = self.propagate_device(&seeds, batch, options)?;
        let mut scores = self.device.download(&scores)?;
        scores.truncate(self.nodes * batch);
        Ok(scores)
    }

    /// Propagates device-resident seeds (`N × batch`, node-major; see
    /// [`DeviceGraph::upload_seeds`]) and leaves the scores on the device:
    /// one launch per step over two ping-pong buffers, both poisoned with
    /// NaN first. Lanes run over the batch when `batch ≥ 32`, else over
    /// each node's in-edges.
    pub fn propagate_device(
        &self,
        seeds: &B::Buffer<f32>,
        batch: usize,
        options: PropagateOptions,
    ) -> Result<B::Buffer<f32>> {
        let device = self.device;
        let len = self.nodes * batch;
        if options.steps == 0 || len == 0 {
            return device.duplicate(seeds);
        }
        let batch32 = u32::try_from(batch).map_err(|_| Error::Gpu("batch too large".into()))?;
        let nodes = self.nodes as u32;
        let group = self.lanes_per_node(batch);
        let (kernel, threads) = if batch >= 32 {
            // A lane owns four columns when B ≥ 128 is a multiple of 4 (the
            // kernel's `lane_columns`), else one.
            let span = if batch >= 128 && batch.is_multiple_of(4) {
                128
            } else {
                32
            };
            (
                Kernel::PropagateBatch,
                self.nodes * batch.div_ceil(span) * 32,
            )
        } else {
            (Kernel::PropagateEdges, self.nodes * group as usize)
        };
        let blocks = threads.div_ceil(THREADS as usize);
        let step = |current: &B::Buffer<f32>, next: &mut B::Buffer<f32>| {
            let mut launch = device.launcher(kernel);
            launch
                .buffer(&self.offsets)
                .buffer(&self.parents)
                .buffer(&self.weights)
                .buffer(seeds)
                .buffer(current)
                .buffer(&*next)
                .value(&nodes)
                .value(&batch32)
                .value(&options.alpha);
            if batch < 32 {
                launch.value(&group);
            }
            // SAFETY: arguments match the kernel's; the graph was validated
            // and every buffer holds `nodes × batch` scores.
            unsafe { launch.launch(blocks, 0) }
        };
        let mut current = device.poisoned::<f32>(len, f32::NAN.to_bits())?;
        step(seeds, &mut current)?;
        if options.steps > 1 {
            let mut spare = device.poisoned::<f32>(len, f32::NAN.to_bits())?;
            for _ in 1..options.steps {
                step(&current, &mut spare)?;
                std::mem::swap(&mut current, &mut spare);
            }
        }
        Ok(current)
    }

    /// [`propagate::propagate`] then [`propagate::top_k`]: each query's `k`
    /// best `(node, score)`, best first, ties to the lower id, scores ≤ 0
    /// and NaN left out. Only the `batch × k` best leave the device when
    /// `k ≤` [`TOP_K_MAX`].
    pub fn propagate_top_k(
        &self,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        if k == 0 || seeds.is_empty() {
            self.upload_seeds(seeds, batch)?;
            return Ok(vec![Vec::new(); batch]);
        }
        let seeds = self.upload_seeds(seeds, batch)?;
        let scores = self.propagate_device(&seeds, batch, options)?;
        if k > TOP_K_MAX {
            tracing::debug!("top-{k} is above the GPU's {TOP_K_MAX}: ranking on the CPU");
            let mut scores = self.device.download(&scores)?;
            scores.truncate(self.nodes * batch);
            return Ok(propagate::top_k(&scores, batch, k));
        }
        self.top_k(&scores, batch, k)
    }

    /// The top-k kernel over device-resident node-major scores; `k` is
    /// 1..=[`TOP_K_MAX`].
    fn top_k(
        &self,
        scores: &B::Buffer<f32>,
        batch: usize,
        k: usize,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        let device = self.device;
        let ids = device.poisoned::<u32>(batch * k, u32::MAX)?;
        let values = device.poisoned::<f32>(batch * k, f32::NAN.to_bits())?;
        let counts = device.poisoned::<u32>(batch, u32::MAX)?;
        let (nodes, batch32, k32) = (self.nodes as u32, batch as u32, k as u32);
        let mut launch = device.launcher(Kernel::TopK);
        launch
            .buffer(scores)
            .value(&nodes)
            .value(&batch32)
            .value(&k32)
            .buffer(&ids)
            .buffer(&values)
            .buffer(&counts);
        // SAFETY: arguments match the kernel's; k ≤ TOP_K_MAX and the
        // outputs hold batch × k entries.
        unsafe { launch.launch(batch, 0) }?;
        let (ids, values, counts) = (
            device.download(&ids)?,
            device.download(&values)?,
            device.download(&counts)?,
        );
        (0..batch)
            .map(|b| {
                let count = counts[b] as usize;
                if count > k {
                    return Err(Error::Gpu(format!("top_k left query {b} unwritten")));
                }
                Ok((0..count)
                    .map(|i| (ids[b * k + i], values[b * k + i]))
                    .collect())
            })
            .collect()
    }
}
