//! Dedup settings, as declared in the `[dedup]` table of `schema/news.toml`.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::index::MAX_DISTANCE;
use crate::text::Weighting;
use crate::{Error, Result};

/// Which algorithm decides near-duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The documented algorithm and nothing else: simhash, pigeonhole index, forest, expiry.
    Seed,
    /// The seed algorithm plus whatever improves accuracy while keeping its stored fields,
    /// forest rules and invariants.
    #[default]
    Default,
}

impl Mode {
    /// Every mode, by the name the configuration and the command line use.
    pub const ALL: [(&'static str, Mode); 2] = [("seed", Mode::Seed), ("default", Mode::Default)];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, mode)| *mode == self)
            .map_or("default", |(name, _)| name)
    }
}

impl std::str::FromStr for Mode {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Self::ALL
            .iter()
            .find(|(name, _)| *name == text)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| {
                Error::Config(format!(
                    "mode must be \"seed\" or \"default\", got {text:?}"
                ))
            })
    }
}

/// Texts shorter than this many characters are short texts, unless the configuration says
/// otherwise.
pub const DEFAULT_SHORT_TEXT_CHARS: usize = 200;

/// The article fields whose text can feed the fingerprint.
pub const FINGERPRINT_FIELDS: &[&str] = &["title", "content"];

/// How near-duplicates are detected and how long clusters live.
///
/// `DedupConfig::default()` equals the `[dedup]` table of the shipped `schema/news.toml`.
///
/// ```
/// use tantivy_dedup::DedupConfig;
///
/// let config = DedupConfig::from_toml_str("[dedup]\nmax_distance = 4\nwindow = \"3d\"\n").unwrap();
/// assert_eq!(config.max_distance, 4);
/// assert_eq!(config.window_seconds(), 3 * 86_400);
/// assert_eq!(config.fields, vec!["content".to_string()]); // the rest keep their defaults
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DedupConfig {
    /// `seed` or `default`.
    pub mode: Mode,
    /// `k`: fingerprints at Hamming distance `<= k` are near-duplicates.
    pub max_distance: u32,
    /// How long a cluster lives after its last document, in event time ("7d", "36h").
    #[serde(with = "humantime_serde_compat")]
    pub window: Duration,
    /// Feature weights.
    pub weighting: Weighting,
    /// Which article fields feed the fingerprint, joined by a line break.
    pub fields: Vec<String>,
    /// Fingerprint only the longest sentence.
    pub longest_sentence: bool,
    /// Texts shorter than this many characters (after normalisation) are short texts.
    pub short_text_chars: usize,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            mode: Mode::Default,
            max_distance: 3,
            window: Duration::from_secs(7 * 86_400),
            weighting: Weighting::Tf,
            fields: vec!["content".to_owned()],
            longest_sentence: false,
            short_text_chars: DEFAULT_SHORT_TEXT_CHARS,
        }
    }
}

/// The file layout: settings live under `[dedup]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    dedup: DedupConfig,
}

impl DedupConfig {
    /// Reads the `[dedup]` table of a TOML text and checks it.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let file: ConfigFile =
            toml::from_str(text).map_err(|error| Error::Config(error.to_string()))?;
        file.dedup.validate()?;
        Ok(file.dedup)
    }

    /// Reads and checks a TOML file such as `schema/news.toml`.
    pub fn from_path(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml_str(&text).map_err(|error| Error::ConfigFile {
            path: path.to_owned(),
            message: match error {
                Error::Config(message) => message,
                other => other.to_string(),
            },
        })
    }

    /// The window in whole seconds.
    pub fn window_seconds(&self) -> u64 {
        self.window.as_secs()
    }

    /// Checks that every setting is in range.
    pub fn validate(&self) -> Result<()> {
        if self.max_distance > MAX_DISTANCE {
            return Err(Error::Config(format!(
                "max_distance must be between 0 and {MAX_DISTANCE}, got {}",
                self.max_distance
            )));
        }
        if self.window.as_secs() == 0 {
            return Err(Error::Config(
                "window must be at least one second, e.g. \"7d\"".to_owned(),
            ));
        }
        if self.fields.is_empty() {
            return Err(Error::Config(
                "fields must name at least one of \"title\", \"content\"".to_owned(),
            ));
        }
        if let Some(unknown) = self
            .fields
            .iter()
            .find(|field| !FINGERPRINT_FIELDS.contains(&field.as_str()))
        {
            return Err(Error::Config(format!(
                "fields: {unknown:?} is not a text field; choose from {FINGERPRINT_FIELDS:?}"
            )));
        }
        Ok(())
    }
}

/// Durations as humantime strings ("7d", "36h 30m") in TOML.
mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*duration))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text).map_err(|error| {
            serde::de::Error::custom(format!(
                "{error} in {text:?}; write a duration such as \"7d\" or \"36h\""
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_schema_equals_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/news.toml");
        assert_eq!(
            DedupConfig::from_path(&path).unwrap(),
            DedupConfig::default()
        );
    }

    #[test]
    fn bad_settings_are_named() {
        for (text, needle) in [
            ("[dedup]\nmax_distance = 99", "max_distance"),
            ("[dedup]\nwindow = \"soon\"", "duration"),
            ("[dedup]\nwindow = \"0s\"", "window"),
            ("[dedup]\nfields = [\"body\"]", "body"),
            ("[dedup]\nfields = []", "fields"),
            ("[dedup]\nweighting = \"bm25\"", "bm25"),
            ("[dedup]\nmode = \"fast\"", "fast"),
            ("[dedup]\nmax_distanse = 3", "max_distanse"),
            ("[dedupe]\n", "dedupe"),
        ] {
            let message = DedupConfig::from_toml_str(text).unwrap_err().to_string();
            assert!(message.contains(needle), "{text:?}: {message}");
        }
    }
}
