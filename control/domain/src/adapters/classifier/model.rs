//! The text classifier itself: character n-gram TF-IDF features and two learners over
//! them (multinomial logistic regression trained by SGD, and nearest centroid by cosine
//! similarity). Pure functions of their input: no I/O, deterministic for one training set.
//!
//! Features: the text is lowercased and cut into words of letters and digits (any
//! script); each word padded with spaces contributes its character 2-, 3- and 4-grams,
//! and the word itself contributes a whole-word feature. Term frequencies are sublinear
//! (1 + ln tf), weighted by smoothed IDF (ln((1+N)/(1+df)) + 1) and L2-normalized, so
//! phrasings that share stems and fragments land close together even when words differ
//! in inflection or spelling.

use std::collections::HashMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Which learner a model was trained with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Multinomial logistic regression by SGD; confidences are its softmax.
    LogisticRegression,
    /// Nearest centroid; confidences are a softmax of scaled cosine similarities.
    NearestCentroid,
}

/// One labelled training phrase.
#[derive(Debug, Clone)]
pub struct Example<'a> {
    pub text: &'a str,
    pub intent: usize,
}

/// A trained model: feature vocabulary, IDF weights and per-intent weights.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Model {
    pub algorithm: Algorithm,
    pub intents: Vec<String>,
    features: Vec<String>,
    idf: Vec<f32>,
    /// `intents.len() × features.len()` row-major, base64 of little-endian f32.
    weights: String,
    bias: Vec<f32>,
    #[serde(skip)]
    index: HashMap<String, usize>,
    #[serde(skip)]
    dense: Vec<f32>,
}

/// Why a training run could not produce a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrainError {
    #[error("no intents to learn")]
    NoIntents,
    #[error("intent {0} has no phrase with any letter or digit")]
    NoUsablePhrase(String),
}

/// Letters-and-digits words of `text`, lowercased.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
}

/// Raw feature counts of a text.
fn raw_features(text: &str) -> HashMap<String, u32> {
    let mut out: HashMap<String, u32> = HashMap::new();
    for w in words(text) {
        *out.entry(format!("w:{w}")).or_default() += 1;
        let padded: Vec<char> = std::iter::once(' ')
            .chain(w.chars())
            .chain(std::iter::once(' '))
            .collect();
        for n in 2..=4 {
            if padded.len() < n {
                continue;
            }
            for win in padded.windows(n) {
                *out.entry(win.iter().collect()).or_default() += 1;
            }
        }
    }
    out
}

/// Sparse TF-IDF vector (index, value), L2-normalized; unknown features are dropped.
fn vectorize(
    raw: &HashMap<String, u32>,
    index: &HashMap<String, usize>,
    idf: &[f32],
) -> Vec<(usize, f32)> {
    let mut v: Vec<(usize, f32)> = raw
        .iter()
        .filter_map(|(f, &tf)| {
            index
                .get(f)
                .map(|&i| (i, (1.0 + (tf as f32).ln()) * idf[i]))
        })
        .collect();
    v.sort_unstable_by_key(|(i, _)| *i);
    let norm = v.iter().map(|(_, x)| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for (_, x) in &mut v {
            *x /= norm;
        }
    }
    v
}

/// A small deterministic PRNG (xorshift64*) for the SGD shuffle: the same training set
/// always gives the same model.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

fn softmax(z: &mut [f32]) {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for x in z.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    if sum > 0.0 {
        for x in z.iter_mut() {
            *x /= sum;
        }
    }
}

/// Scale applied to cosine similarities before the centroid softmax: similarities live in
/// [0, 1], so without it every confidence would be close to uniform.
const CENTROID_SHARPNESS: f32 = 12.0;
const EPOCHS: usize = 40;
const LEARNING_RATE: f32 = 0.8;
const L2: f32 = 1e-4;

impl Model {
    /// Trains on `examples` labelled with indices into `intents`.
    pub fn train(
        algorithm: Algorithm,
        intents: Vec<String>,
        examples: &[Example<'_>],
    ) -> Result<Model, TrainError> {
        if intents.is_empty() {
            return Err(TrainError::NoIntents);
        }
        let raws: Vec<(HashMap<String, u32>, usize)> = examples
            .iter()
            .filter(|e| e.intent < intents.len())
            .map(|e| (raw_features(e.text), e.intent))
            .filter(|(r, _)| !r.is_empty())
            .collect();
        for (i, name) in intents.iter().enumerate() {
            if !raws.iter().any(|(_, c)| *c == i) {
                return Err(TrainError::NoUsablePhrase(name.clone()));
            }
        }
        // Vocabulary in a stable (sorted) order, with document frequencies.
        let mut df: HashMap<&str, u32> = HashMap::new();
        for (r, _) in &raws {
            for f in r.keys() {
                *df.entry(f.as_str()).or_default() += 1;
            }
        }
        let mut features: Vec<String> = df.keys().map(|s| s.to_string()).collect();
        features.sort_unstable();
        let n = raws.len() as f32;
        let idf: Vec<f32> = features
            .iter()
            .map(|f| ((1.0 + n) / (1.0 + df[f.as_str()] as f32)).ln() + 1.0)
            .collect();
        let index: HashMap<String, usize> = features
            .iter()
            .enumerate()
            .map(|(i, f)| (f.clone(), i))
            .collect();
        let xs: Vec<(Vec<(usize, f32)>, usize)> = raws
            .iter()
            .map(|(r, c)| (vectorize(r, &index, &idf), *c))
            .collect();
        let k = intents.len();
        let d = features.len();
        let mut w = vec![0f32; k * d];
        let mut bias = vec![0f32; k];
        match algorithm {
            Algorithm::NearestCentroid => {
                for (x, c) in &xs {
                    for &(j, v) in x {
                        w[c * d + j] += v;
                    }
                }
                for c in 0..k {
                    let row = &mut w[c * d..(c + 1) * d];
                    let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                    if norm > 0.0 {
                        row.iter_mut().for_each(|x| *x /= norm);
                    }
                }
            }
            Algorithm::LogisticRegression => {
                let seed = (xs.len() as u64)
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(d as u64 + 1);
                let mut rng = Rng(seed | 1);
                let mut order: Vec<usize> = (0..xs.len()).collect();
                let mut z = vec![0f32; k];
                for epoch in 0..EPOCHS {
                    let lr = LEARNING_RATE / (1.0 + 0.1 * epoch as f32);
                    rng.shuffle(&mut order);
                    for &s in &order {
                        let (x, y) = &xs[s];
                        for c in 0..k {
                            z[c] = bias[c] + x.iter().map(|&(j, v)| w[c * d + j] * v).sum::<f32>();
                        }
                        softmax(&mut z);
                        for c in 0..k {
                            let g = z[c] - if c == *y { 1.0 } else { 0.0 };
                            bias[c] -= lr * g;
                            for &(j, v) in x {
                                w[c * d + j] -= lr * g * v;
                            }
                        }
                    }
                    let decay = 1.0 - lr * L2;
                    w.iter_mut().for_each(|x| *x *= decay);
                }
            }
        }
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        Ok(Model {
            algorithm,
            intents,
            features,
            idf,
            weights: base64::engine::general_purpose::STANDARD.encode(bytes),
            bias,
            index,
            dense: w,
        })
    }

    /// Serialized form stored with the version.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Loads a serialized model, rebuilding the lookup tables.
    pub fn from_json(s: &str) -> Result<Model, String> {
        let mut m: Model = serde_json::from_str(s).map_err(|e| format!("model: {e}"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&m.weights)
            .map_err(|e| format!("model weights: {e}"))?;
        if bytes.len() != 4 * m.intents.len() * m.features.len()
            || m.idf.len() != m.features.len()
            || m.bias.len() != m.intents.len()
        {
            return Err("model: inconsistent dimensions".into());
        }
        m.dense = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        m.index = m
            .features
            .iter()
            .enumerate()
            .map(|(i, f)| (f.clone(), i))
            .collect();
        Ok(m)
    }

    /// Number of features in the vocabulary.
    pub fn feature_count(&self) -> usize {
        self.features.len()
    }

    /// Every intent with its confidence, most likely first; confidences sum to 1. A text
    /// sharing no feature with the training set gets the learner's prior (uniform for the
    /// centroid learner).
    pub fn predict(&self, text: &str) -> Vec<(String, f32)> {
        let x = vectorize(&raw_features(text), &self.index, &self.idf);
        let d = self.features.len();
        let mut z: Vec<f32> = (0..self.intents.len())
            .map(|c| {
                let dot = x
                    .iter()
                    .map(|&(j, v)| self.dense[c * d + j] * v)
                    .sum::<f32>();
                match self.algorithm {
                    Algorithm::LogisticRegression => self.bias[c] + dot,
                    Algorithm::NearestCentroid => CENTROID_SHARPNESS * dot,
                }
            })
            .collect();
        softmax(&mut z);
        let mut out: Vec<(String, f32)> = self.intents.iter().cloned().zip(z).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> (Vec<String>, Vec<(&'static str, usize)>) {
        (
            vec!["yes".into(), "no".into()],
            vec![
                ("yes please", 0),
                ("yeah sure", 0),
                ("of course yes", 0),
                ("no thanks", 1),
                ("nope not now", 1),
                ("no never", 1),
            ],
        )
    }

    #[test]
    fn both_learners_separate_two_intents_and_round_trip() {
        let (intents, ex) = data();
        let ex: Vec<Example> = ex
            .iter()
            .map(|(t, i)| Example {
                text: t,
                intent: *i,
            })
            .collect();
        for alg in [Algorithm::LogisticRegression, Algorithm::NearestCentroid] {
            let m = Model::train(alg, intents.clone(), &ex).expect("trains");
            let p = m.predict("yes, sure");
            assert_eq!(p[0].0, "yes", "{alg:?}: {p:?}");
            let sum: f32 = p.iter().map(|x| x.1).sum();
            assert!((sum - 1.0).abs() < 1e-4, "confidences sum to 1: {sum}");
            let back = Model::from_json(&m.to_json()).expect("round trip");
            assert_eq!(back.predict("nope"), m.predict("nope"));
            assert_eq!(back.predict("nope")[0].0, "no");
        }
    }

    #[test]
    fn training_errors_are_values() {
        assert_eq!(
            Model::train(Algorithm::NearestCentroid, vec![], &[]).err(),
            Some(TrainError::NoIntents)
        );
        let ex = [Example {
            text: "?!",
            intent: 0,
        }];
        assert!(matches!(
            Model::train(Algorithm::LogisticRegression, vec!["a".into()], &ex),
            Err(TrainError::NoUsablePhrase(_))
        ));
        assert!(Model::from_json("{}").is_err());
    }
}
