//! Pairwise accuracy of clustering against labeled data.
//!
//! Two documents form a *true pair* when their labels name the same cluster and a *predicted
//! pair* when they were given the same root. Precision is the share of predicted pairs that are
//! true, recall the share of true pairs that were predicted. The overall scores go through the
//! contingency table (label × root), so they cost O(documents), not O(pairs); recall per kind
//! visits the true pairs of each cluster.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::article::ArticleReader;
use crate::input::{Lines, open};
use crate::{DedupConfig, Deduplicator, Error, Fingerprint, Result};

/// Texts shorter than this many characters count as short in the long/short split.
pub const LONG_TEXT_CHARS: usize = crate::config::DEFAULT_SHORT_TEXT_CHARS;

/// One document's truth and prediction.
#[derive(Debug, Clone)]
pub struct Labeled {
    /// The true cluster label.
    pub cluster: String,
    /// How the document was made (`base`, `typo`, …), if the data says.
    pub kind: Option<String>,
    /// Characters of its text.
    pub chars: usize,
    /// The root it was given.
    pub root: Fingerprint,
}

/// Precision, recall and F1 over pairs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairScores {
    /// Pairs both true and predicted.
    pub true_positives: u64,
    /// Predicted pairs.
    pub predicted: u64,
    /// True pairs.
    pub actual: u64,
    /// `true_positives / predicted` (1 when nothing was predicted).
    pub precision: f64,
    /// `true_positives / actual` (1 when there are no true pairs).
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
}

impl PairScores {
    fn new(true_positives: u64, predicted: u64, actual: u64) -> Self {
        let ratio = |part: u64, whole: u64| {
            if whole == 0 {
                1.0
            } else {
                part as f64 / whole as f64
            }
        };
        let precision = ratio(true_positives, predicted);
        let recall = ratio(true_positives, actual);
        let f1 = if precision + recall == 0.0 {
            0.0
        } else {
            2.0 * precision * recall / (precision + recall)
        };
        PairScores {
            true_positives,
            predicted,
            actual,
            precision,
            recall,
            f1,
        }
    }
}

fn pairs(count: u64) -> u64 {
    count * count.saturating_sub(1) / 2
}

/// Pairwise scores over a set of documents.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::eval::{Labeled, pair_scores};
///
/// let doc = |cluster: &str, root| Labeled { cluster: cluster.into(), kind: None, chars: 500, root: Fingerprint(root) };
/// // Truth {a, a, a}, {b}; prediction {a, a}, {a, b}: one true pair of three found, one of two
/// // predicted pairs wrong.
/// let scores = pair_scores(&[doc("a", 1), doc("a", 1), doc("a", 2), doc("b", 2)]);
/// assert_eq!((scores.true_positives, scores.predicted, scores.actual), (1, 2, 3));
/// assert_eq!(scores.precision, 0.5);
/// ```
pub fn pair_scores<'a>(documents: impl IntoIterator<Item = &'a Labeled>) -> PairScores {
    let mut cells: HashMap<(&str, Fingerprint), u64> = HashMap::new();
    let mut by_label: HashMap<&str, u64> = HashMap::new();
    let mut by_root: HashMap<Fingerprint, u64> = HashMap::new();
    for document in documents {
        *cells.entry((&document.cluster, document.root)).or_default() += 1;
        *by_label.entry(&document.cluster).or_default() += 1;
        *by_root.entry(document.root).or_default() += 1;
    }
    PairScores::new(
        cells.values().copied().map(pairs).sum(),
        by_root.values().copied().map(pairs).sum(),
        by_label.values().copied().map(pairs).sum(),
    )
}

/// How far predicted clusters run past the truth: a list page that shows one line for a
/// cluster holding several true stories hides all but one of them, which users notice more
/// than any pairwise figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct OverMerging {
    /// Predicted clusters that hold documents of more than one true cluster.
    pub clusters: usize,
    /// The most true clusters any one predicted cluster holds (1 when none over-merges, 0
    /// without documents).
    pub largest: usize,
}

/// Counts the predicted clusters (by root) that hold more than one true cluster.
///
/// ```
/// use tantivy_dedup::Fingerprint;
/// use tantivy_dedup::eval::{Labeled, over_merging};
///
/// let doc = |cluster: &str, root| Labeled { cluster: cluster.into(), kind: None, chars: 50, root: Fingerprint(root) };
/// // Root 1 swallows true clusters a, b and c; root 2 holds d alone.
/// let merged = over_merging(&[doc("a", 1), doc("b", 1), doc("c", 1), doc("c", 1), doc("d", 2)]);
/// assert_eq!((merged.clusters, merged.largest), (1, 3));
/// ```
pub fn over_merging(documents: &[Labeled]) -> OverMerging {
    let mut labels: HashMap<Fingerprint, std::collections::HashSet<&str>> = HashMap::new();
    for document in documents {
        labels
            .entry(document.root)
            .or_default()
            .insert(&document.cluster);
    }
    OverMerging {
        clusters: labels.values().filter(|held| held.len() > 1).count(),
        largest: labels.values().map(|held| held.len()).max().unwrap_or(0),
    }
}

/// Recall of the true pairs that involve at least one document of each kind.
pub fn recall_by_kind(documents: &[Labeled]) -> BTreeMap<String, PairScores> {
    let mut members: HashMap<&str, Vec<&Labeled>> = HashMap::new();
    for document in documents {
        members.entry(&document.cluster).or_default().push(document);
    }
    // Per kind: (true pairs found, true pairs) among pairs touching that kind.
    let mut counts: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for cluster in members.values() {
        for (i, a) in cluster.iter().enumerate() {
            for b in &cluster[i + 1..] {
                let found = u64::from(a.root == b.root);
                let mut kinds = [a.kind.as_deref(), b.kind.as_deref()];
                if kinds[0] == kinds[1] {
                    kinds[1] = None;
                }
                for kind in kinds.into_iter().flatten() {
                    let entry = counts.entry(kind.to_owned()).or_default();
                    entry.0 += found;
                    entry.1 += 1;
                }
            }
        }
    }
    counts
        .into_iter()
        .map(|(kind, (found, actual))| (kind, PairScores::new(found, found, actual)))
        .collect()
}

/// The full report of `tantivy-dedup eval`.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// Documents scored.
    pub documents: usize,
    /// All pairs.
    pub all: PairScores,
    /// Pairs of two long texts (>= [`LONG_TEXT_CHARS`] characters).
    pub long: PairScores,
    /// Pairs of two short texts.
    pub short: PairScores,
    /// Predicted clusters that hold more than one true cluster.
    pub over_merged: OverMerging,
    /// Recall of the true pairs touching each kind (precision is not defined per kind).
    pub recall_by_kind: BTreeMap<String, f64>,
    /// Documents per second through the dedup pipeline.
    pub documents_per_second: f64,
}

impl EvalReport {
    /// Scores `documents`, which went through the pipeline at `documents_per_second`.
    pub fn new(documents: &[Labeled], documents_per_second: f64) -> Self {
        let is_long = |document: &&Labeled| document.chars >= LONG_TEXT_CHARS;
        EvalReport {
            documents: documents.len(),
            all: pair_scores(documents),
            long: pair_scores(documents.iter().filter(is_long)),
            short: pair_scores(documents.iter().filter(|document| !is_long(document))),
            over_merged: over_merging(documents),
            recall_by_kind: recall_by_kind(documents)
                .into_iter()
                .map(|(kind, scores)| (kind, scores.recall))
                .collect(),
            documents_per_second,
        }
    }
}

/// The label fields of a line of labeled data.
#[derive(Deserialize)]
struct Truth {
    cluster: Option<Value>,
    kind: Option<String>,
    #[serde(default)]
    content: String,
}

/// Runs a labeled JSON Lines file through the dedup pipeline in file order and scores it.
/// Each line is an article plus `cluster` (the truth) and optionally `kind`.
pub fn evaluate(path: &Path, config: DedupConfig) -> Result<EvalReport> {
    let io_error = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let bad_line = |line: u64, message: String| Error::Data {
        path: path.to_owned(),
        line,
        message,
    };

    // First pass: the labels, by line number.
    let mut truths: HashMap<u64, (String, Option<String>, usize)> = HashMap::new();
    let mut lines = Lines::new(open(path)?);
    while let Some((number, line)) = lines.next_line().map_err(io_error)? {
        let line = line.map_err(|too_long| bad_line(number, too_long.to_string()))?;
        let truth: Truth =
            serde_json::from_slice(&line).map_err(|error| bad_line(number, error.to_string()))?;
        let cluster = match truth.cluster {
            Some(Value::String(label)) => label,
            Some(Value::Number(label)) => label.to_string(),
            None | Some(Value::Null) => {
                return Err(bad_line(
                    number,
                    "missing `cluster`, the true label".to_owned(),
                ));
            }
            Some(_) => {
                return Err(bad_line(
                    number,
                    "`cluster` must be a string or a number".to_owned(),
                ));
            }
        };
        truths.insert(number, (cluster, truth.kind, truth.content.chars().count()));
    }

    // Second pass: the pipeline, exactly as `dedup` runs it (sketches in mapped files).
    let mut dedup = Deduplicator::with_sketches_in(config, &std::env::temp_dir())?;
    let mut documents = Vec::with_capacity(truths.len());
    let mut first_error = None;
    let start = Instant::now();
    dedup
        .run(
            open(path)?,
            ArticleReader::default_schema(),
            |number, result| match result {
                Ok(decision) => {
                    if let Some((cluster, kind, chars)) = truths.remove(&number) {
                        documents.push(Labeled {
                            cluster,
                            kind,
                            chars,
                            root: decision.root,
                        });
                    }
                    ControlFlow::Continue(())
                }
                Err(error) => {
                    first_error = Some(bad_line(number, error.to_string()));
                    ControlFlow::Break(())
                }
            },
        )
        .map_err(io_error)?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(error) = first_error {
        return Err(error);
    }
    Ok(EvalReport::new(
        &documents,
        documents.len() as f64 / seconds.max(1e-9),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(cluster: &str, kind: &str, chars: usize, root: u64) -> Labeled {
        Labeled {
            cluster: cluster.into(),
            kind: Some(kind.into()),
            chars,
            root: Fingerprint(root),
        }
    }

    /// Worked by hand. Truth: A = {1, 2, 3, 4}, B = {5, 6}, C = {7}.
    /// Prediction: root 10 = {1, 2, 3}, root 20 = {4, 5, 6}, root 30 = {7}.
    /// True pairs: C(4,2) + C(2,2) = 7. Predicted pairs: 3 + 3 + 0 = 6.
    /// Both: {1,2} {1,3} {2,3} {5,6} = 4. P = 4/6, R = 4/7, F1 = 2PR/(P+R) = 8/13.
    #[test]
    fn matches_hand_computed_example() {
        let documents = [
            doc("A", "base", 500, 10),
            doc("A", "copy", 500, 10),
            doc("A", "typo", 500, 10),
            doc("A", "truncate", 100, 20),
            doc("B", "short_base", 50, 20),
            doc("B", "short_variant", 60, 20),
            doc("C", "base", 400, 30),
        ];
        let scores = pair_scores(&documents);
        assert_eq!(
            (scores.true_positives, scores.predicted, scores.actual),
            (4, 6, 7)
        );
        assert!((scores.precision - 4.0 / 6.0).abs() < 1e-12);
        assert!((scores.recall - 4.0 / 7.0).abs() < 1e-12);
        assert!((scores.f1 - 8.0 / 13.0).abs() < 1e-12);

        let report = EvalReport::new(&documents, 1.0);
        // Root 20 holds A's document 4 and B's 5 and 6.
        assert_eq!(
            report.over_merged,
            OverMerging {
                clusters: 1,
                largest: 2
            }
        );
        // Long: {1,2,3} in A (one cluster, one root) and 7: 3 true pairs, all found.
        assert_eq!(
            (
                report.long.true_positives,
                report.long.predicted,
                report.long.actual
            ),
            (3, 3, 3)
        );
        // Short: 4, 5, 6 all under root 20; true pairs only {5,6}.
        assert_eq!(
            (
                report.short.true_positives,
                report.short.predicted,
                report.short.actual
            ),
            (1, 3, 1)
        );
        // "truncate" touches the pairs {1,4} {2,4} {3,4}: none found.
        assert_eq!(report.recall_by_kind["truncate"], 0.0);
        // "base" touches A's {1,2} {1,3} {1,4}: two found.
        assert!((report.recall_by_kind["base"] - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(report.recall_by_kind["short_variant"], 1.0);
    }

    #[test]
    fn empty_and_singleton_sets_score_one() {
        let scores = pair_scores(&[doc("A", "base", 1, 1)]);
        assert_eq!((scores.precision, scores.recall), (1.0, 1.0));
    }
}
