//! A local transformer encoder (BERT family, for example
//! all-MiniLM-L6-v2) run in-process with candle, from a
//! sentence-transformers directory (`config.json`, `tokenizer.json`,
//! `model.safetensors`). It gives the two things edudb's semantics need,
//! both from one [`Encoder`] over padded batches:
//!
//! - sentence vectors ([`LocalModel::embed`]): mean pooling over real
//!   tokens, then L2 normalisation, truncating at
//!   [`LocalModel::MAX_SEQUENCE_TOKENS`] like sentence-transformers;
//! - cross attention ([`LocalModel::cross_attentions`]): how much the
//!   tokens of one text attend to those of another when the model reads
//!   both as one sequence, averaged over heads and layers in the same
//!   pass, so the per-layer tensors are never kept.
//!
//! Texts are batched by token count, so little is padded and each matrix
//! product is large enough to keep both cores busy. Files are read from
//! disk only; nothing is downloaded. It runs on the CPU.

mod encoder;
mod gelu;

use std::ops::Range;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config;
use tokenizers::{Tokenizer, TruncationParams};

use crate::error::EmbedError;
use encoder::{Batch, Encoder, Output};

/// A BERT-family encoder and its tokenizer, loaded from local files.
pub struct LocalModel {
    dir: PathBuf,
    identity: String,
    tokenizer: Tokenizer,
    encoder: Encoder,
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

/// Most tokens, padding included, in one forward pass: bounds the hidden
/// states and the feed-forward layer's activations.
const TOKENS_PER_PASS: usize = 4096;
/// Most attention scores per head in one forward pass (`rows × width²`):
/// bounds the score and probability tensors of long sequences (12 heads
/// of f32 at this bound are 12 MiB each).
const SCORES_PER_PASS: usize = 1 << 18;

/// Consecutive runs of sequences, given their lengths in ascending order,
/// that fit one forward pass each when padded to their longest.
fn passes(sorted_lengths: &[usize]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    while start < sorted_lengths.len() {
        let mut end = start + 1;
        while end < sorted_lengths.len() {
            let (rows, width) = (end + 1 - start, sorted_lengths[end].max(1));
            if rows * width > TOKENS_PER_PASS || rows * width * width > SCORES_PER_PASS {
                break;
            }
            end += 1;
        }
        runs.push(start..end);
        start = end;
    }
    runs
}

/// What a pass gives for one of its sequences.
struct Row<'a> {
    /// Real tokens.
    length: usize,
    /// The pass's padded width.
    width: usize,
    /// The sequence's share of the pass's [`Output`]: `width × hidden`
    /// states (padding rows after the real ones), or `heads × width ×
    /// width` attention probabilities summed over layers.
    values: &'a [f32],
}

/// One sequence the encoder reads: its tokens and their types.
struct Sequence {
    ids: Vec<u32>,
    types: Vec<u32>,
}

impl LocalModel {
    /// Longest input a sentence vector reads, in the model's tokens; longer
    /// texts are truncated (what sentence-transformers does for MiniLM).
    pub const MAX_SEQUENCE_TOKENS: usize = 256;

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
        // to a fixed length and cut at 128 tokens: batches are padded here,
        // after sorting by length, and cut where the model was trained to.
        tokenizer.with_padding(None);
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
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else {
            vb
        };
        let encoder = Encoder::load(vb, &config)
            .map_err(|e| model_error(dir, format_args!("model.safetensors: {e}")))?;
        Ok(LocalModel {
            dir: dir.to_owned(),
            identity,
            tokenizer,
            encoder,
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
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| self.error(format_args!("tokenizing: {e}")))?;
        let sequences: Vec<Sequence> = (encodings.iter())
            .map(|e| Sequence {
                ids: e.get_ids().to_vec(),
                types: vec![0; e.get_ids().len()],
            })
            .collect();
        let hidden = self.dimension();
        let mut vectors = vec![Vec::new(); texts.len()];
        self.run(&sequences, Output::States, |i, row| {
            // The sum of the real tokens' states: normalising it gives the
            // normalised mean.
            let mut vector = vec![0.0f32; hidden];
            for token in row.values.chunks(hidden).take(row.length) {
                for (sum, x) in vector.iter_mut().zip(token) {
                    *sum += x;
                }
            }
            crate::compute::vector::normalise(&mut vector);
            vectors[i] = vector;
        })?;
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
        let mut one = self.cross_attentions(&[(queries, keys)])?;
        Ok(one.remove(0))
    }

    /// [`LocalModel::cross_attention`] of each `(queries, keys)` pair, in
    /// order, read in batches of similar lengths.
    pub fn cross_attentions(
        &self,
        pairs: &[(&[u32], &[u32])],
    ) -> Result<Vec<CrossAttention>, EmbedError> {
        // The keys are the second segment, where the model has one.
        let key_type = u32::from(self.config.type_vocab_size > 1);
        let mut sequences = Vec::with_capacity(pairs.len());
        for (queries, keys) in pairs {
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
            ids.extend_from_slice(keys);
            ids.push(self.sep);
            let mut types = vec![0; queries.len() + 2];
            types.resize(length, key_type);
            sequences.push(Sequence { ids, types });
        }
        let mut out: Vec<Option<CrossAttention>> = vec![None; pairs.len()];
        let heads = self.encoder.heads();
        let count = (heads * self.encoder.layers()).max(1) as f32;
        self.run(&sequences, Output::Attention, |i, row| {
            let (queries, keys) = pairs[i];
            let first_key = queries.len() + 2;
            let mut weights = vec![0.0f32; queries.len() * keys.len()];
            let matrix = row.width * row.width;
            for head in row.values.chunks(matrix).take(heads) {
                let rows = head.chunks(row.width).skip(1).take(queries.len());
                for (sums, from) in weights.chunks_mut(keys.len().max(1)).zip(rows) {
                    let from = &from[first_key..first_key + keys.len()];
                    for (sum, x) in sums.iter_mut().zip(from) {
                        *sum += x;
                    }
                }
            }
            weights.iter_mut().for_each(|w| *w /= count);
            out[i] = Some(CrossAttention {
                query_tokens: queries.len(),
                key_tokens: keys.len(),
                weights,
            });
        })?;
        Ok(out.into_iter().flatten().collect())
    }

    /// Runs `sequences` through the encoder in passes of similar lengths
    /// and hands each sequence's index and its [`Row`] of `output` to
    /// `visit`.
    fn run(
        &self,
        sequences: &[Sequence],
        output: Output,
        mut visit: impl FnMut(usize, Row<'_>),
    ) -> Result<(), EmbedError> {
        let mut order: Vec<usize> = (0..sequences.len()).collect();
        order.sort_by_key(|&i| sequences[i].ids.len());
        let lengths: Vec<usize> = order.iter().map(|&i| sequences[i].ids.len()).collect();
        for pass in passes(&lengths) {
            let width = lengths[pass.end - 1];
            let mut batch = Batch::new(width);
            for &i in &order[pass.clone()] {
                batch.push(&sequences[i].ids, &sequences[i].types);
            }
            let values = self
                .encoder
                .forward(&batch, output, &self.device)
                .map_err(|e| self.error(e))?;
            let per_row = values.len() / pass.len();
            for (row, &i) in order[pass].iter().enumerate() {
                visit(
                    i,
                    Row {
                        length: sequences[i].ids.len(),
                        width,
                        values: &values[row * per_row..(row + 1) * per_row],
                    },
                );
            }
        }
        Ok(())
    }

    fn error(&self, message: impl std::fmt::Display) -> EmbedError {
        model_error(&self.dir, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Tensor;
    use candle_transformers::models::bert::BertModel;

    /// The all-MiniLM-L6-v2 directory named by `EDUDB_LOCAL_MODEL`, if any
    /// (`.ci/embedding-server model-dir` prints it).
    fn model_dir() -> Option<PathBuf> {
        let Some(dir) = std::env::var_os("EDUDB_LOCAL_MODEL") else {
            assert!(
                std::env::var("EDUDB_REQUIRE_LOCAL_MODEL").as_deref() != Ok("1"),
                "EDUDB_REQUIRE_LOCAL_MODEL=1 but EDUDB_LOCAL_MODEL is not set"
            );
            return None;
        };
        Some(PathBuf::from(dir))
    }

    #[test]
    fn passes_respect_both_budgets_and_cover_every_sequence() {
        let lengths: Vec<usize> = (1..=600).map(|i| i * 512 / 600).collect();
        let runs = passes(&lengths);
        assert_eq!(runs.first().unwrap().start, 0);
        assert_eq!(runs.last().unwrap().end, lengths.len());
        for pair in runs.windows(2) {
            assert_eq!(pair[0].end, pair[1].start);
        }
        for run in &runs {
            let (rows, width) = (run.len(), lengths[run.end - 1].max(1));
            assert!(rows >= 1);
            assert!(
                rows == 1
                    || (rows * width <= TOKENS_PER_PASS && rows * width * width <= SCORES_PER_PASS)
            );
        }
        assert!(passes(&[]).is_empty());
    }

    /// The encoder's padded batches give candle's own BERT forward pass,
    /// row by row, within 1e-4.
    #[test]
    fn the_encoder_matches_candles_bert_on_padded_batches() {
        let Some(dir) = model_dir() else { return };
        let model = LocalModel::load(&dir).unwrap();
        let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).unwrap();
        let reference = BertModel::load(vb, &model.config).unwrap();
        let texts = [
            "The oven bakes the loaf of bread.",
            "x",
            "Knead the dough, let it rise, then bake the loaf in a hot oven.",
        ];
        let sequences: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| {
                let mut ids = vec![model.cls];
                ids.extend(model.tokens(t).unwrap());
                ids.push(model.sep);
                ids
            })
            .collect();
        let width = sequences.iter().map(Vec::len).max().unwrap();
        let mut batch = Batch::new(width);
        for ids in &sequences {
            batch.push(ids, &vec![0; ids.len()]);
        }
        let ours = (model.encoder)
            .forward(&batch, Output::States, &Device::Cpu)
            .unwrap();
        let hidden = model.dimension();
        for (row, ids) in sequences.iter().enumerate() {
            let tensor = Tensor::from_slice(ids, (1, ids.len()), &Device::Cpu).unwrap();
            let theirs = reference
                .forward(&tensor, &tensor.zeros_like().unwrap(), None)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let start = row * width * hidden;
            let ours = &ours[start..start + ids.len() * hidden];
            let difference = (ours.iter().zip(&theirs))
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(
                difference < 1e-4,
                "row {row}: largest difference {difference}"
            );
        }
    }
}
