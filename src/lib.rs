//! # tantivy-dedup
//!
//! Near-duplicate detection, story clustering and result collapsing for the Tantivy search
//! library, built for news monitoring: millions of articles a day, most stories reposted or
//! lightly rewritten by dozens of outlets.
//!
//! The core, which works without an index:
//!
//! - [`text`]: normalise, segment with jieba, pick weighted features, fingerprint;
//! - [`simhash`]: the 64-bit weighted simhash and [`Fingerprint`];
//! - [`index`]: the pigeonhole index, which finds every stored fingerprint within `k` bits;
//! - [`verify`]: default mode's shingle sketches, the rule that verifies a candidate pair, and
//!   the candidates that share a sketch's rarest shingles;
//! - [`chrome`]: each source's chrome (the lines it repeats on its own pages), learned from
//!   the stream and left out of its pages' signatures;
//! - [`forest`]: the parent forest that turns near-duplicate pairs into clusters, with expiry;
//! - [`dedup`]: the ordered pipeline from articles to decisions.
//!
//! On top of Tantivy: [`engine`], a news index with collapsed search, detail pages,
//! near-duplicate checks and recovery of the forest on open.
//!
//! ```
//! use tantivy_dedup::{Article, DedupConfig, Deduplicator};
//!
//! let mut dedup = Deduplicator::new(DedupConfig::default())?;
//! let text = "新华社北京电 国务院总理主持召开国务院常务会议，听取关于防汛抗旱工作情况汇报，\
//!             部署做好下一阶段防汛救灾和灾后恢复重建工作，要求各地压实责任，确保群众安全。";
//! let original = Article { id: "1".into(), content: text.into(), ..Default::default() };
//! // The same story scraped from a page: markup, entities and full-width punctuation.
//! let scraped = format!("<div class=\"article\"><p>{}</p></div>&nbsp;", text.replace('，', ","));
//! let repost = Article { id: "2".into(), content: scraped, ..Default::default() };
//! let first = dedup.add_article(&original, 1_700_000_000).unwrap();
//! let second = dedup.add_article(&repost, 1_700_000_100).unwrap();
//! assert_eq!(second.root, first.root);
//! assert!(second.duplicate);
//! # Ok::<(), tantivy_dedup::Error>(())
//! ```
//!
//! The library chooses no allocator. [`Deduplicator::run`] and the engine sign articles on
//! every core, with many small allocations each: a program that embeds it does well to set a
//! multi-threaded allocator (the `tantivy-dedup` binary uses mimalloc; with glibc's malloc,
//! `dedup` ran 15% slower on two cores).

#![warn(missing_docs)]

pub mod article;
#[cfg(feature = "bench")]
pub mod bench;
pub mod chrome;
pub mod config;
pub mod dedup;
pub mod engine;
mod error;
#[cfg(feature = "bench")]
pub mod eval;
pub mod forest;
pub mod index;
pub mod input;
pub mod local_time;
#[cfg(feature = "server")]
pub mod server;
pub mod simhash;
pub mod text;
pub mod verify;

pub use article::Article;
pub use config::{DedupConfig, Mode};
pub use dedup::{Change, Decision, Deduplicator};
pub use error::{Error, Result};
pub use forest::Forest;
pub use simhash::Fingerprint;
/// The Tantivy this crate is built on: its schemas, indexes and collectors are the ones the
/// crate's types take, so an application without `tantivy` of the same version among its own
/// dependencies uses these.
pub use tantivy;
pub use verify::Reason;

/// The README's Rust examples, compiled and run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
