//! [`Encoder`]: a BERT-family encoder's forward pass over padded batches,
//! giving the final hidden states or, when asked, every head's attention
//! probabilities summed over the layers, from the same pass: sentence
//! vectors and the DAG's attention share one copy of the weights and one
//! implementation.

use candle_core::{Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use candle_transformers::models::bert::{Config, HiddenAct};

/// The encoder's weights.
pub(super) struct Encoder {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
}

/// One transformer layer.
struct Layer {
    /// The query, key and value projections as one matrix (three times
    /// the hidden size of outputs), so the three are one matrix product.
    qkv: Linear,
    attention_output: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
    activation: HiddenAct,
}

/// Token sequences padded to one width, as the encoder reads them.
pub(super) struct Batch {
    ids: Vec<u32>,
    types: Vec<u32>,
    lengths: Vec<usize>,
    width: usize,
}

/// What a pass over a [`Batch`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Output {
    /// The final hidden states, `rows × width × hidden`, flattened
    /// row-major.
    States,
    /// The attention probabilities summed over layers, `rows × heads ×
    /// width × width`, flattened row-major; padding columns are zero.
    /// (Summing heads is left to the reader, who usually needs a small
    /// block of each matrix.) The last layer stops once it has them.
    Attention,
}

impl Batch {
    /// An empty batch of sequences padded to `width` tokens.
    pub fn new(width: usize) -> Batch {
        Batch {
            ids: Vec::new(),
            types: Vec::new(),
            lengths: Vec::new(),
            width,
        }
    }

    /// Appends one sequence and its token types (at most `width` tokens;
    /// the rest of its row is padding, which no token attends to).
    pub fn push(&mut self, ids: &[u32], types: &[u32]) {
        debug_assert!(ids.len() <= self.width && ids.len() == types.len());
        let padding = self.width - ids.len();
        self.ids.extend_from_slice(ids);
        self.ids.extend(std::iter::repeat_n(0, padding));
        self.types.extend_from_slice(types);
        self.types.extend(std::iter::repeat_n(0, padding));
        self.lengths.push(ids.len());
    }

    /// `rows × 1 × 1 × width`: 0 over real tokens, the most negative
    /// float over padding (what BERT adds to its attention scores); none
    /// when nothing is padded.
    fn padding_mask(&self, device: &Device) -> candle_core::Result<Option<Tensor>> {
        if self.lengths.iter().all(|&l| l == self.width) {
            return Ok(None);
        }
        let mut mask = Vec::with_capacity(self.lengths.len() * self.width);
        for &length in &self.lengths {
            mask.extend((0..self.width).map(|i| if i < length { 0.0 } else { f32::MIN }));
        }
        let rows = self.lengths.len();
        Tensor::from_vec(mask, (rows, 1, 1, self.width), device).map(Some)
    }
}

impl Encoder {
    /// The encoder stored under `vb` (`embeddings.*`, `encoder.layer.N.*`).
    pub fn load(vb: VarBuilder, config: &Config) -> candle_core::Result<Encoder> {
        let hidden = config.hidden_size;
        let embeddings = vb.pp("embeddings");
        let layers = (0..config.num_hidden_layers)
            .map(|l| Layer::load(vb.pp(format!("encoder.layer.{l}")), config))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Encoder {
            word: candle_nn::embedding(
                config.vocab_size,
                hidden,
                embeddings.pp("word_embeddings"),
            )?,
            position: candle_nn::embedding(
                config.max_position_embeddings,
                hidden,
                embeddings.pp("position_embeddings"),
            )?,
            token_type: candle_nn::embedding(
                config.type_vocab_size,
                hidden,
                embeddings.pp("token_type_embeddings"),
            )?,
            norm: candle_nn::layer_norm(hidden, config.layer_norm_eps, embeddings.pp("LayerNorm"))?,
            layers,
            heads: config.num_attention_heads,
            head_size: hidden / config.num_attention_heads,
        })
    }

    /// Attention heads per layer.
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// Layers: what [`Output::Attention`] sums over.
    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    /// Runs `batch` through the layers and gives what `output` asks for.
    pub fn forward(
        &self,
        batch: &Batch,
        output: Output,
        device: &Device,
    ) -> candle_core::Result<Vec<f32>> {
        let (rows, width) = (batch.lengths.len(), batch.width);
        let ids = Tensor::from_slice(&batch.ids, (rows, width), device)?;
        let types = Tensor::from_slice(&batch.types, (rows, width), device)?;
        let positions = Tensor::arange(0u32, width as u32, device)?;
        let embedded = (self.word.forward(&ids)? + self.token_type.forward(&types)?)?
            .broadcast_add(&self.position.forward(&positions)?)?;
        let mut states = self.norm.forward(&embedded)?;
        let mask = batch.padding_mask(device)?;
        let mut attention: Option<Tensor> = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let (probabilities, values) = layer.attend(&states, mask.as_ref(), self)?;
            if output == Output::Attention {
                attention = Some(match attention {
                    Some(total) => (total + &probabilities)?,
                    None => probabilities.clone(),
                });
                if l + 1 == self.layers.len() {
                    break;
                }
            }
            states = layer.finish(&states, &probabilities, &values)?;
        }
        match output {
            Output::States => states.flatten_all()?.to_vec1::<f32>(),
            Output::Attention => match attention {
                Some(total) => total.flatten_all()?.to_vec1::<f32>(),
                None => Ok(vec![0.0; rows * self.heads * width * width]),
            },
        }
    }
}

impl Layer {
    fn load(vb: VarBuilder, config: &Config) -> candle_core::Result<Layer> {
        let hidden = config.hidden_size;
        let projection = |name: &str| -> candle_core::Result<(Tensor, Tensor)> {
            let vb = vb.pp(format!("attention.self.{name}"));
            Ok((vb.get((hidden, hidden), "weight")?, vb.get(hidden, "bias")?))
        };
        let (q, k, v) = (
            projection("query")?,
            projection("key")?,
            projection("value")?,
        );
        let qkv = Linear::new(
            Tensor::cat(&[&q.0, &k.0, &v.0], 0)?,
            Some(Tensor::cat(&[&q.1, &k.1, &v.1], 0)?),
        );
        let eps = config.layer_norm_eps;
        Ok(Layer {
            qkv,
            attention_output: candle_nn::linear(hidden, hidden, vb.pp("attention.output.dense"))?,
            attention_norm: candle_nn::layer_norm(
                hidden,
                eps,
                vb.pp("attention.output.LayerNorm"),
            )?,
            intermediate: candle_nn::linear(
                hidden,
                config.intermediate_size,
                vb.pp("intermediate.dense"),
            )?,
            output: candle_nn::linear(config.intermediate_size, hidden, vb.pp("output.dense"))?,
            output_norm: candle_nn::layer_norm(hidden, eps, vb.pp("output.LayerNorm"))?,
            activation: config.hidden_act,
        })
    }

    /// The layer's attention probabilities (`rows × heads × width ×
    /// width`) and the values they weight (`rows × heads × width ×
    /// head size`).
    fn attend(
        &self,
        states: &Tensor,
        mask: Option<&Tensor>,
        shape: &Encoder,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let (rows, width, _) = states.dims3()?;
        let qkv = self
            .qkv
            .forward(states)?
            .reshape((rows, width, 3, shape.heads, shape.head_size))?
            .permute((2, 0, 3, 1, 4))?;
        let scale = 1.0 / (shape.head_size as f64).sqrt();
        let queries = qkv.get(0)?.contiguous()?.affine(scale, 0.0)?;
        let keys = qkv.get(1)?.contiguous()?;
        let values = qkv.get(2)?.contiguous()?;
        let mut scores = queries.matmul(&keys.t()?)?;
        if let Some(mask) = mask {
            scores = scores.broadcast_add(mask)?;
        }
        Ok((candle_nn::ops::softmax_last_dim(&scores)?, values))
    }

    /// The layer's output states from its input `states` and what
    /// [`Layer::attend`] gave.
    fn finish(
        &self,
        states: &Tensor,
        probabilities: &Tensor,
        values: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let (rows, width, hidden) = states.dims3()?;
        let context = probabilities
            .matmul(values)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((rows, width, hidden))?;
        let attended = self
            .attention_norm
            .forward(&(self.attention_output.forward(&context)? + states)?)?;
        let expanded = self.intermediate.forward(&attended)?;
        let activated = match self.activation {
            HiddenAct::Gelu => super::gelu::gelu(&expanded)?,
            HiddenAct::GeluApproximate => expanded.gelu()?,
            HiddenAct::Relu => expanded.relu()?,
        };
        self.output_norm
            .forward(&(self.output.forward(&activated)? + attended)?)
    }
}
