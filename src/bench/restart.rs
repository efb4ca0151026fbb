//! Restart time at scale: a default-mode forest of generated documents saved as a checkpoint
//! with its sketches in named files, then loaded from a cold page cache and from a warm one,
//! and the placement rate of the inserts a restart replays after the checkpoint.

use std::fs::File;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::bench::memory::{NewsLikeTexts, all_live, generated_time, grow, sign_next};
use crate::config::DedupConfig;
use crate::dedup::Deduplicator;
use crate::engine::{CHECKPOINT_FILE, DEFAULT_CHECKPOINT_INSERTS};
use crate::forest::Forest;
use crate::forest::checkpoint::{CheckpointReader, CheckpointWriter};
use crate::verify::SketchStore;
use crate::{Error, Result};

/// What [`restart`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct RestartReport {
    /// Documents placed before the checkpoint, all live.
    pub documents: usize,
    /// Forest nodes among them.
    pub nodes: usize,
    /// Signing and placing them, seconds.
    pub build_seconds: f64,
    /// The checkpoint file (tables, nodes, expiry queue, sketch postings).
    pub checkpoint_bytes: u64,
    /// The sketch chunk files it names, on disk (allocated blocks).
    pub sketch_file_bytes: u64,
    /// The first checkpoint: the writer's pause while it is written, seconds.
    pub first_save_pause_seconds: f64,
    /// Then until it is durable (a thread of its own in a writer), which for the first one
    /// includes flushing every sketch file written so far, seconds.
    pub first_save_durable_seconds: f64,
    /// A checkpoint after `probes` more inserts, what a writer pays at each checkpoint: the
    /// pause, seconds.
    pub next_save_pause_seconds: f64,
    /// Then until it is durable, seconds.
    pub next_save_durable_seconds: f64,
    /// Loading the checkpoint with its files out of the page cache (as after a reboot),
    /// seconds.
    pub cold_load_seconds: f64,
    /// Loading it again with the files in the page cache (a process restart), seconds.
    pub warm_load_seconds: f64,
    /// Inserts placed after each load, on pre-signed texts (a replay's work per insert).
    pub probes: usize,
    /// Those inserts per second after the cold load: their candidates' sketches are read
    /// from disk.
    pub cold_replay_inserts_per_second: f64,
    /// Those inserts per second after the warm load.
    pub warm_replay_inserts_per_second: f64,
    /// Whether they got the roots they got in the forest that was saved, after both loads.
    pub probes_identical: bool,
    /// The longest a process restart takes (warm page cache): the warm load plus the replay
    /// of a full interval between checkpoints ([`DEFAULT_CHECKPOINT_INSERTS`]) at the warm
    /// rate, reading the index's fast fields aside.
    pub restart_seconds: f64,
    /// The same after a reboot (cold page cache), at the cold rate.
    pub cold_restart_seconds: f64,
}

fn io_error(dir: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    }
}

/// A default-mode deduplicator whose sketches are kept in `dir`, able to checkpoint.
fn checkpointable(config: &DedupConfig, dir: &Path) -> Result<Deduplicator> {
    let sketches = SketchStore::in_checkpoint_directory(dir).map_err(io_error(dir))?;
    Deduplicator::with_sketches(config.clone(), sketches)
}

/// Saves `forest` at `path`: the size, the seconds the writer pauses and those until the
/// checkpoint is durable.
fn save(forest: &mut Forest, path: &Path) -> std::io::Result<(u64, f64, f64)> {
    let started = Instant::now();
    // As a writer does: copied into memory, then written by the thread that makes it durable.
    let mut out = CheckpointWriter::in_memory(path)?;
    forest.save(&mut out)?;
    let saved = out.finish()?;
    let pause = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let bytes = saved.make_durable()?;
    Ok((bytes, pause, started.elapsed().as_secs_f64()))
}

/// A new deduplicator loaded from the checkpoint at `path`, and the seconds it took.
fn load(config: &DedupConfig, dir: &Path, path: &Path) -> Result<(Deduplicator, f64)> {
    let started = Instant::now();
    let mut dedup = checkpointable(config, dir)?;
    let mut input = CheckpointReader::open(path)
        .map_err(io_error(path))?
        .ok_or_else(|| Error::Config(format!("no checkpoint at {}", path.display())))?;
    dedup
        .forest_mut()
        .load(&mut input)
        .map_err(io_error(path))?;
    input.finish().map_err(io_error(path))?;
    Ok((dedup, started.elapsed().as_secs_f64()))
}

/// Asks the kernel to drop `dir`'s files from the page cache (clean pages only: everything
/// a checkpoint wrote was flushed), so that the next load reads them from disk. Gives their
/// allocated bytes.
fn evict(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let mut allocated = 0;
    for entry in std::fs::read_dir(dir)? {
        let file = File::open(entry?.path())?;
        allocated += file.metadata()?.blocks() * 512;
        // SAFETY: a plain system call on a descriptor this function owns.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
    Ok(allocated)
}

/// Builds a forest of `documents` generated documents with sketches in named files of `dir`,
/// saves it, places `probes` more, saves again elsewhere, then loads the first checkpoint
/// twice (cold, then warm) and places the same `probes` after each load.
pub fn restart(
    documents: usize,
    probes: usize,
    config: DedupConfig,
    dir: &Path,
) -> Result<RestartReport> {
    let config = all_live(config);
    let path = dir.join(CHECKPOINT_FILE);
    let mut dedup = checkpointable(&config, dir)?;
    let mut texts = NewsLikeTexts::new(0x7265_7374);
    let started = Instant::now();
    let grown = grow(&mut dedup, &mut texts, documents, "restart")?;
    let build_seconds = started.elapsed().as_secs_f64();
    let nodes = dedup.stats().nodes;
    let probe_signatures = sign_next(&dedup, &mut texts, probes);

    eprintln!("bench: restart: saving the checkpoint");
    let (checkpoint_bytes, first_save_pause_seconds, first_save_durable_seconds) =
        save(dedup.forest_mut(), &path).map_err(io_error(dir))?;
    let place_probes = |dedup: &mut Deduplicator| -> Result<(Vec<u64>, f64)> {
        let started = Instant::now();
        let roots = probe_signatures
            .iter()
            .enumerate()
            .map(|(i, signature)| {
                let time = generated_time(grown.placed + i);
                Ok(dedup.place(signature.clone(), time)?.root.0)
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok((roots, started.elapsed().as_secs_f64()))
    };
    let (expected, _) = place_probes(&mut dedup)?;
    // A later checkpoint, to another file so that the first stays the one loaded below.
    let (_, next_save_pause_seconds, next_save_durable_seconds) =
        save(dedup.forest_mut(), &dir.join("next.checkpoint")).map_err(io_error(dir))?;
    drop(dedup);
    std::fs::remove_file(dir.join("next.checkpoint")).map_err(io_error(dir))?;

    let sketch_file_bytes = evict(dir)
        .map_err(io_error(dir))?
        .saturating_sub(checkpoint_bytes);
    eprintln!("bench: restart: loading with a cold page cache");
    let (mut cold, cold_load_seconds) = load(&config, dir, &path)?;
    let (after_cold, cold_replay_seconds) = place_probes(&mut cold)?;
    drop(cold);
    eprintln!("bench: restart: loading with a warm page cache");
    let (mut warm, warm_load_seconds) = load(&config, dir, &path)?;
    let (after_warm, warm_replay_seconds) = place_probes(&mut warm)?;
    let rate = |seconds: f64| probes as f64 / seconds.max(f64::EPSILON);
    let (cold_rate, warm_rate) = (rate(cold_replay_seconds), rate(warm_replay_seconds));
    let interval = DEFAULT_CHECKPOINT_INSERTS as f64;
    Ok(RestartReport {
        documents: grown.placed,
        nodes,
        build_seconds,
        checkpoint_bytes,
        sketch_file_bytes,
        first_save_pause_seconds,
        first_save_durable_seconds,
        next_save_pause_seconds,
        next_save_durable_seconds,
        cold_load_seconds,
        warm_load_seconds,
        probes,
        cold_replay_inserts_per_second: cold_rate,
        warm_replay_inserts_per_second: warm_rate,
        probes_identical: after_cold == expected && after_warm == expected,
        restart_seconds: warm_load_seconds + interval / warm_rate,
        cold_restart_seconds: cold_load_seconds + interval / cold_rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_forest_places_the_probes_as_the_saved_one() {
        let dir = tempfile::tempdir().unwrap();
        let report = restart(3_000, 500, DedupConfig::default(), dir.path()).unwrap();
        assert_eq!((report.documents, report.probes), (3_000, 500));
        assert!(report.probes_identical, "{report:?}");
        assert!(
            report.checkpoint_bytes > 0 && report.sketch_file_bytes > 0,
            "{report:?}"
        );
    }
}
