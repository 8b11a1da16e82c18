//! A local transformer encoder (BERT family, for example
//! all-MiniLM-L6-v2) run in-process with candle, from a
//! sentence-transformers directory (`config.json`, `tokenizer.json`,
//! `model.safetensors`). It gives the two things edudb's semantics need:
//!
//! - sentence vectors ([`LocalModel::embed`]): mean pooling over real
//!   tokens, then L2 normalisation, truncating at
//!   [`LocalModel::MAX_SEQUENCE_TOKENS`] like sentence-transformers;
//! - cross attention ([`LocalModel::cross_attention`]): how much the
//!   tokens of one text attend to those of another when the model reads
//!   both as one sequence, averaged over heads and layers as they are
//!   computed, so the per-layer tensors are never kept.
//!
//! Files are read from disk only; nothing is downloaded. It runs on the
//! CPU.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, Module, VarBuilder};
use candle_transformers::models::bert::{BertEncoder, BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::error::EmbedError;

/// A BERT-family encoder and its tokenizer, loaded from local files.
pub struct LocalModel {
    dir: PathBuf,
    identity: String,
    tokenizer: Tokenizer,
    model: BertModel,
    probe: AttentionProbe,
    config: Config,
    cls: u32,
    sep: u32,
    device: Device,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("dir", &self.dir)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// The encoder again, layer by layer, with each layer's query and key
/// projections, so attention probabilities can be read between layers
/// (candle's `BertModel` keeps them inside).
struct AttentionProbe {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
    /// One single-layer encoder per layer, loaded from the same tensors as
    /// the model (a second copy of its weights: about twice the model's
    /// memory; fine for small encoders like MiniLM).
    layers: Vec<BertEncoder>,
    queries: Vec<Linear>,
    keys: Vec<Linear>,
}

/// Attention from the tokens of one text (the queries) to the tokens of
/// another (the keys), read as `[CLS] queries [SEP] keys [SEP]`, averaged
/// over every head of every layer.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossAttention {
    /// Query tokens (rows).
    pub query_tokens: usize,
    /// Key tokens (columns).
    pub key_tokens: usize,
    /// `query_tokens × key_tokens` probabilities, row-major; a row sums to
    /// at most 1 (the rest went to the special tokens and the queries).
    pub weights: Vec<f32>,
}

/// A model error with the directory it came from.
fn model_error(dir: &Path, message: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model {
        dir: dir.to_owned(),
        message: message.to_string(),
    }
}

impl LocalModel {
    /// Longest input a sentence vector reads, in the model's tokens; longer
    /// texts are truncated (what sentence-transformers does for MiniLM).
    pub const MAX_SEQUENCE_TOKENS: usize = 256;
    /// Texts embedded in one forward pass.
    const BATCH: usize = 32;

    /// Loads the model in `dir`: `config.json` (a BERT configuration),
    /// `tokenizer.json` and `model.safetensors`.
    pub fn load(dir: &Path) -> Result<LocalModel, EmbedError> {
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .map_err(|e| model_error(dir, format_args!("cannot read {name}: {e}")))
        };
        let config_bytes = read("config.json")?;
        let tokenizer_bytes = read("tokenizer.json")?;
        let weights = read("model.safetensors")?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|e| model_error(dir, format_args!("config.json is not a BERT config: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes)
            .map_err(|e| model_error(dir, format_args!("tokenizer.json: {e}")))?;
        // sentence-transformers' tokenizer.json files often pad every input
        // to a fixed length and cut at 128 tokens: pad each batch to its
        // longest text instead, and cut where the model was trained to.
        // One without padding gets it, or a batch of texts of different
        // lengths would not form a tensor.
        match tokenizer.get_padding_mut() {
            Some(padding) => padding.strategy = PaddingStrategy::BatchLongest,
            None => {
                let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(0);
                tokenizer.with_padding(Some(PaddingParams {
                    strategy: PaddingStrategy::BatchLongest,
                    pad_id,
                    ..PaddingParams::default()
                }));
            }
        }
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: Self::MAX_SEQUENCE_TOKENS.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(|e| model_error(dir, format_args!("tokenizer.json: {e}")))?;
        let special = |token: &str| {
            tokenizer
                .token_to_id(token)
                .ok_or_else(|| model_error(dir, format_args!("the tokenizer has no {token} token")))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
        let mut digest = crc32fast::Hasher::new();
        for part in [&config_bytes, &tokenizer_bytes, &weights] {
            digest.update(part);
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        let identity = format!(
            "local:{name}:{:08x}:{}",
            digest.finalize(),
            Self::MAX_SEQUENCE_TOKENS
        );
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| model_error(dir, format_args!("model.safetensors: {e}")))?;
        let load = || -> candle_core::Result<(BertModel, AttentionProbe)> {
            let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
                vb.pp("bert")
            } else {
                vb.clone()
            };
            let model = BertModel::load(vb.clone(), &config)?;
            Ok((model, AttentionProbe::load(vb, &config)?))
        };
        let (model, probe) =
            load().map_err(|e| model_error(dir, format_args!("model.safetensors: {e}")))?;
        Ok(LocalModel {
            dir: dir.to_owned(),
            identity,
            tokenizer,
            model,
            probe,
            config,
            cls,
            sep,
            device,
        })
    }

    /// A stable name of the model: its directory's name, a checksum of its
    /// three files and the truncation length.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Length of the model's vectors.
    pub fn dimension(&self) -> usize {
        self.config.hidden_size
    }

    /// Most tokens one sequence may hold (the position table's length).
    pub fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    /// One L2-normalised sentence vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Texts of similar length share a batch, so little is padded.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for batch in order.chunks(Self::BATCH) {
            let inputs: Vec<&str> = batch.iter().map(|&i| texts[i]).collect();
            let vectors = self.embed_batch(&inputs)?;
            for (&i, vector) in batch.iter().zip(vectors) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| self.error(format_args!("tokenizing: {e}")))?;
        let rows = encodings.len();
        let length = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(rows * length);
        let mut mask = Vec::with_capacity(rows * length);
        for encoding in &encodings {
            ids.extend_from_slice(encoding.get_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        let pooled = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (rows, length), &self.device)?;
            let mask = Tensor::from_vec(mask, (rows, length), &self.device)?;
            let types = ids.zeros_like()?;
            let states = self.model.forward(&ids, &types, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let sums = states.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
            sums.broadcast_div(&counts)?.to_vec2::<f32>()
        };
        let mut vectors = pooled().map_err(|e| self.error(e))?;
        for vector in &mut vectors {
            crate::compute::vector::normalise(vector);
        }
        Ok(vectors)
    }

    /// The model's tokens of `text` (no special tokens), at most
    /// [`LocalModel::MAX_SEQUENCE_TOKENS`] of them (fewer when the model
    /// has fewer positions).
    pub fn tokens(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| self.error(format_args!("tokenizing: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Attention from `queries` to `keys` (token ids from
    /// [`LocalModel::tokens`]) read as one sequence `[CLS] queries [SEP]
    /// keys [SEP]`, averaged over heads and layers. The sequence must fit
    /// the model: `queries + keys + 3 ≤` [`LocalModel::max_positions`].
    pub fn cross_attention(
        &self,
        queries: &[u32],
        keys: &[u32],
    ) -> Result<CrossAttention, EmbedError> {
        let length = queries.len() + keys.len() + 3;
        if length > self.max_positions() {
            return Err(self.error(format_args!(
                "a sequence of {length} tokens is longer than the model's {}",
                self.max_positions()
            )));
        }
        let mut ids = Vec::with_capacity(length);
        ids.push(self.cls);
        ids.extend_from_slice(queries);
        ids.push(self.sep);
        let first_key = ids.len();
        ids.extend_from_slice(keys);
        ids.push(self.sep);
        // The keys are the second segment, where the model has one.
        let key_type = u32::from(self.config.type_vocab_size > 1);
        let types: Vec<u32> = (0..length)
            .map(|i| if i >= first_key { key_type } else { 0 })
            .collect();
        let averaged = self
            .probe
            .mean_attention(&ids, &types, &self.config, &self.device)
            .map_err(|e| self.error(e))?;
        let mut weights = Vec::with_capacity(queries.len() * keys.len());
        for row in &averaged[1..=queries.len()] {
            weights.extend_from_slice(&row[first_key..first_key + keys.len()]);
        }
        Ok(CrossAttention {
            query_tokens: queries.len(),
            key_tokens: keys.len(),
            weights,
        })
    }

    /// Final hidden states of one sequence computed layer by layer (the
    /// path [`LocalModel::cross_attention`] reads), for checking it against
    /// candle's own forward pass.
    #[cfg(test)]
    fn probe_states(&self, ids: &[u32]) -> candle_core::Result<Tensor> {
        let types = vec![0; ids.len()];
        let (states, _) = self
            .probe
            .run(ids, &types, &self.config, &self.device, false)?;
        Ok(states)
    }

    fn error(&self, message: impl std::fmt::Display) -> EmbedError {
        model_error(&self.dir, message)
    }
}

impl AttentionProbe {
    fn load(vb: VarBuilder, config: &Config) -> candle_core::Result<AttentionProbe> {
        let hidden = config.hidden_size;
        let embeddings = vb.pp("embeddings");
        let encoder = BertEncoder::load(vb.pp("encoder"), config)?;
        let layers = encoder
            .layers
            .iter()
            .map(|layer| {
                let mut single = encoder.clone();
                single.layers = vec![layer.clone()];
                single
            })
            .collect();
        let projection = |kind: &str| {
            (0..config.num_hidden_layers)
                .map(|l| {
                    candle_nn::linear(
                        hidden,
                        hidden,
                        vb.pp(format!("encoder.layer.{l}.attention.self.{kind}")),
                    )
                })
                .collect::<candle_core::Result<Vec<_>>>()
        };
        Ok(AttentionProbe {
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
            queries: projection("query")?,
            keys: projection("key")?,
        })
    }

    /// Runs one unpadded sequence through the encoder; with `attend`, also
    /// the `length × length` attention probabilities averaged over heads
    /// and layers.
    fn run(
        &self,
        ids: &[u32],
        types: &[u32],
        config: &Config,
        device: &Device,
        attend: bool,
    ) -> candle_core::Result<(Tensor, Option<Tensor>)> {
        let length = ids.len();
        let heads = config.num_attention_heads;
        let head_size = config.hidden_size / heads;
        let ids = Tensor::from_slice(ids, (1, length), device)?;
        let types = Tensor::from_slice(types, (1, length), device)?;
        let positions = Tensor::arange(0u32, length as u32, device)?;
        let embedded = (self.word.forward(&ids)? + self.token_type.forward(&types)?)?
            .broadcast_add(&self.position.forward(&positions)?)?;
        let mut states = self.norm.forward(&embedded)?;
        // No padding: nothing is masked.
        let mask = Tensor::zeros((1, 1, 1, length), DType::F32, device)?;
        let mut sum: Option<Tensor> = None;
        for (l, layer) in self.layers.iter().enumerate() {
            if attend {
                let split = |x: Tensor| {
                    x.reshape((length, heads, head_size))?
                        .transpose(0, 1)?
                        .contiguous()
                };
                let q = split(self.queries[l].forward(&states)?.squeeze(0)?)?;
                let k = split(self.keys[l].forward(&states)?.squeeze(0)?)?;
                let scores = (q.matmul(&k.t()?)? / (head_size as f64).sqrt())?;
                let probabilities = candle_nn::ops::softmax_last_dim(&scores)?.mean(0)?;
                sum = Some(match sum {
                    Some(total) => (total + probabilities)?,
                    None => probabilities,
                });
            }
            states = layer.forward(&states, &mask)?;
        }
        let layers = self.layers.len().max(1) as f64;
        let mean = sum.map(|total| total / layers).transpose()?;
        Ok((states, mean))
    }

    /// Attention probabilities of one sequence averaged over heads and
    /// layers, as rows.
    fn mean_attention(
        &self,
        ids: &[u32],
        types: &[u32],
        config: &Config,
        device: &Device,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let (_, mean) = self.run(ids, types, config, device, true)?;
        match mean {
            Some(mean) => mean.to_vec2::<f32>(),
            None => Ok(vec![vec![0.0; ids.len()]; ids.len()]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The all-MiniLM-L6-v2 directory named by `EDUDB_LOCAL_MODEL`, if any
    /// (`.ci/embedding-server model-dir` prints it).
    fn model() -> Option<LocalModel> {
        let Some(dir) = std::env::var_os("EDUDB_LOCAL_MODEL") else {
            assert!(
                std::env::var("EDUDB_REQUIRE_LOCAL_MODEL").as_deref() != Ok("1"),
                "EDUDB_REQUIRE_LOCAL_MODEL=1 but EDUDB_LOCAL_MODEL is not set"
            );
            return None;
        };
        Some(LocalModel::load(Path::new(&dir)).expect("the model loads"))
    }

    #[test]
    fn the_layer_by_layer_path_matches_candles_forward_pass() {
        let Some(model) = model() else { return };
        let ids = model.tokens("The oven bakes the loaf of bread.").unwrap();
        let mut sequence = vec![model.cls];
        sequence.extend(&ids);
        sequence.push(model.sep);
        let probe = model.probe_states(&sequence).unwrap();
        let tensor = Tensor::from_slice(&sequence, (1, sequence.len()), &Device::Cpu).unwrap();
        let reference = model
            .model
            .forward(&tensor, &tensor.zeros_like().unwrap(), None)
            .unwrap();
        let difference = (probe - reference)
            .unwrap()
            .abs()
            .unwrap()
            .max_keepdim(candle_core::D::Minus1)
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(difference < 1e-4, "largest difference {difference}");
    }
}
