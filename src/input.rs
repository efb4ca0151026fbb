//! Reading JSON Lines input: a file, a gzip-compressed file, or standard input.

use std::fs::File;
use std::ops::ControlFlow;
use std::sync::mpsc;

use rayon::prelude::*;

use crate::article::{ArticleError, LineTooLong};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::{Error, Result};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Opens `path` for reading lines; `-` is standard input. Gzip is recognised by its first two
/// bytes, whatever the file is called. A missing file is [`missing_file`]'s error.
pub fn open(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    let io_error = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let reader: Box<dyn Read + Send> = if path == Path::new("-") {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path).map_err(|error| match error.kind() {
            io::ErrorKind::NotFound => missing_file(path),
            _ => io_error(error),
        })?)
    };
    decompressing(reader).map_err(io_error)
}

/// The project's evaluation and benchmark data (`eval`, `bench`, BENCHMARKS.md), by file name,
/// with what each set is and where it comes from. The files are third-party text and are not
/// shipped with the repository; README "Evaluation data" says more.
pub const EVALUATION_DATA: [(&str, &str); 3] = [
    (
        "xwlb-news.jsonl.gz",
        "74,545 stories of CCTV's evening news Xinwen Lianbo, 2012 to 2026, as published on \
         tv.cctv.com",
    ),
    (
        "neardup-dev.jsonl.gz",
        "21,666 labeled documents built from half of xwlb-news.jsonl.gz: its stories with \
         generated reposts and edits",
    ),
    (
        "web-dev.jsonl.gz",
        "19,900 Sina Weibo posts from the CED dataset of the GitHub repository \
         thunlp/Chinese_Rumor_Dataset, labeled by character 5-gram Jaccard >= 0.8",
    ),
];

/// Checks that `path` (`-`: standard input) exists, before a long run reads it: the error is
/// [`missing_file`]'s.
pub fn require_file(path: &Path) -> Result<()> {
    if path == Path::new("-") || path.exists() {
        return Ok(());
    }
    Err(missing_file(path))
}

/// The error for an input file that does not exist. One of [`EVALUATION_DATA`] by its name,
/// or any file under a `shared/data` directory (where the project keeps them, beside the
/// clone), gets an explanation: a visitor of the published repository does not have them.
pub fn missing_file(path: &Path) -> Error {
    const SHIPPED: &str = "is not shipped with the repository (third-party text, for \
                           evaluation only); README \"Evaluation data\" says where each set \
                           comes from. Put the file at that path, or give another file of the same form";
    let name = path.file_name().and_then(|name| name.to_str());
    let known = EVALUATION_DATA.iter().find(|(file, _)| Some(*file) == name);
    let components: Vec<&std::ffi::OsStr> = path.iter().collect();
    let in_shared_data = components
        .windows(2)
        .any(|pair| pair[0] == "shared" && pair[1] == "data");
    let note = match known {
        Some((file, what)) => {
            format!(". {file} is the project's evaluation data ({what}) and {SHIPPED}")
        }
        None if in_shared_data => format!(". The project's evaluation data {SHIPPED}"),
        None => String::new(),
    };
    Error::MissingInput {
        path: path.to_owned(),
        note,
    }
}

/// Reads `reader` as lines, decompressing it first if it starts with the gzip magic bytes.
pub fn decompressing(reader: impl Read + Send + 'static) -> io::Result<Box<dyn BufRead + Send>> {
    // A pipe may deliver one byte at a time: read the two magic bytes for sure, then put them
    // back in front of the rest.
    let mut reader = reader;
    let mut magic = [0u8; 2];
    let mut have = 0;
    while have < magic.len() {
        match reader.read(&mut magic[have..]) {
            Ok(0) => break,
            Ok(read) => have += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    let whole = io::Cursor::new(magic[..have].to_vec()).chain(reader);
    let buffered = BufReader::with_capacity(1 << 16, whole);
    Ok(if magic[..have] == GZIP_MAGIC {
        Box::new(BufReader::with_capacity(
            1 << 16,
            MultiGzDecoder::new(buffered),
        ))
    } else {
        Box::new(buffered)
    })
}

/// Reads JSON Lines from `reader` in batches of up to `batch_size` numbered lines, each parsed
/// into an article by `parse` (in parallel, so `parse` may also do per-article work such as
/// fingerprinting), and hands every batch to `handle` in input order until the input ends or
/// `handle` says to stop.
///
/// Three stages overlap: reading (and decompressing) the next lines, parsing a batch on the
/// rayon pool, and `handle` on the calling thread, with at most two batches waiting between
/// stages. A read error (a truncated gzip stream, say) is returned after every line read
/// before it has been handled.
pub fn for_each_batch<T: Send>(
    reader: impl BufRead + Send,
    batch_size: usize,
    parse: impl Fn(crate::Article) -> T + Sync,
    mut handle: impl FnMut(Vec<(u64, Result<T, ArticleError>)>) -> ControlFlow<()>,
) -> io::Result<()> {
    type Parsed<T> = Vec<(u64, Result<T, ArticleError>)>;
    let batch_size = batch_size.max(1);
    std::thread::scope(|scope| {
        let (lines_sender, lines_receiver) = mpsc::sync_channel::<Vec<NumberedLine>>(2);
        let (parsed_sender, parsed_receiver) = mpsc::sync_channel::<Parsed<T>>(2);
        let reading = scope.spawn(move || -> io::Result<()> {
            let mut lines = Lines::new(reader);
            loop {
                let mut batch = Vec::with_capacity(batch_size);
                let mut read_error = None;
                while batch.len() < batch_size {
                    match lines.next_line() {
                        Ok(Some(line)) => batch.push(line),
                        Ok(None) => break,
                        Err(error) => {
                            read_error = Some(error);
                            break;
                        }
                    }
                }
                // A closed channel means the handler stopped: nothing more is wanted.
                if batch.is_empty() || lines_sender.send(batch).is_err() {
                    return read_error.map_or(Ok(()), Err);
                }
                if let Some(error) = read_error {
                    return Err(error);
                }
            }
        });
        let parse = &parse;
        scope.spawn(move || {
            for batch in lines_receiver {
                let parsed: Parsed<T> = batch
                    .into_par_iter()
                    .map(|(number, line)| {
                        let article = line
                            .map_err(ArticleError::TooLong)
                            .and_then(|line| crate::Article::from_json_bytes(&line));
                        (number, article.map(parse))
                    })
                    .collect();
                if parsed_sender.send(parsed).is_err() {
                    return;
                }
            }
        });
        for batch in parsed_receiver.iter() {
            if handle(batch).is_break() {
                // Dropping the receiver stops the other stages at their next send.
                drop(parsed_receiver);
                return match reading.join() {
                    Ok(_) => Ok(()),
                    Err(panic) => std::panic::resume_unwind(panic),
                };
            }
        }
        reading
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The longest line [`Lines`] hands out by default: 16 MiB, far beyond any article, short of
/// what would strain memory when a batch holds thousands of lines.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 20;

/// Numbered lines of bytes (UTF-8 is checked by the parser, line by line, so that one bad line
/// costs only itself). Blank lines are skipped but counted; a line over the length limit is
/// skipped without being held in memory and reported as [`LineTooLong`].
pub struct Lines<R> {
    reader: R,
    number: u64,
    max_line_bytes: usize,
}

/// What [`Lines::next_line`] gives: a line's number and its bytes (without the line break), or
/// why they were dropped.
pub type NumberedLine = (u64, std::result::Result<Vec<u8>, LineTooLong>);

impl<R: BufRead> Lines<R> {
    /// Lines of `reader`, numbered from 1, up to [`DEFAULT_MAX_LINE_BYTES`] long.
    pub fn new(reader: R) -> Self {
        Self::with_max_line_bytes(reader, DEFAULT_MAX_LINE_BYTES)
    }

    /// Lines of `reader` up to `max_line_bytes` long.
    pub fn with_max_line_bytes(reader: R, max_line_bytes: usize) -> Self {
        Lines {
            reader,
            number: 0,
            max_line_bytes,
        }
    }

    /// The next non-blank line; `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<NumberedLine>> {
        loop {
            let mut line = Vec::new();
            let mut length = 0usize;
            let mut read_anything = false;
            let mut ended_line = false;
            loop {
                let buffer = self.reader.fill_buf()?;
                if buffer.is_empty() {
                    break;
                }
                read_anything = true;
                let (chunk, ends_line) = match buffer.iter().position(|&b| b == b'\n') {
                    Some(end) => (&buffer[..=end], true),
                    None => (buffer, false),
                };
                length += chunk.len();
                // Keep the bytes only while the line may still turn out short enough (the
                // line break, up to two bytes, does not count).
                if length <= self.max_line_bytes + 2 {
                    line.extend_from_slice(chunk);
                }
                let consumed = chunk.len();
                self.reader.consume(consumed);
                if ends_line {
                    ended_line = true;
                    break;
                }
            }
            if !read_anything {
                return Ok(None);
            }
            self.number += 1;
            length -= usize::from(ended_line);
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            if line.last() == Some(&b'\r') {
                line.pop();
                length -= 1;
            }
            if length > self.max_line_bytes {
                let too_long = LineTooLong {
                    length,
                    limit: self.max_line_bytes,
                };
                return Ok(Some((self.number, Err(too_long))));
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some((self.number, Ok(line))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_plain_and_gzip_alike() {
        let dir = tempfile::tempdir().unwrap();
        let text = "{\"a\":1}\n\n  \r\n{\"b\":2}\r\n{\"c\":3}";
        let plain = dir.path().join("plain.jsonl");
        std::fs::write(&plain, text).unwrap();
        let packed = dir.path().join("packed.data");
        let mut encoder = flate2::write::GzEncoder::new(
            File::create(&packed).unwrap(),
            flate2::Compression::fast(),
        );
        encoder.write_all(text.as_bytes()).unwrap();
        encoder.finish().unwrap();
        for path in [plain, packed] {
            let mut lines = Lines::new(open(&path).unwrap());
            let mut seen = Vec::new();
            while let Some((number, line)) = lines.next_line().unwrap() {
                seen.push((number, String::from_utf8(line.unwrap()).unwrap()));
            }
            assert_eq!(
                seen,
                vec![
                    (1, "{\"a\":1}".to_owned()),
                    (4, "{\"b\":2}".to_owned()),
                    (5, "{\"c\":3}".to_owned())
                ]
            );
        }
        assert!(open(Path::new("/no/such/file.jsonl")).is_err());
    }

    /// Gives out one byte per read, as a slow pipe may.
    struct Trickle(Vec<u8>, usize);

    impl Read for Trickle {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            match (self.0.get(self.1), buffer.first_mut()) {
                (Some(&byte), Some(slot)) => {
                    *slot = byte;
                    self.1 += 1;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn gzip_is_recognised_one_byte_at_a_time() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(b"{\"a\":1}\n").unwrap();
        let packed = encoder.finish().unwrap();
        let mut lines = Lines::new(decompressing(Trickle(packed, 0)).unwrap());
        assert_eq!(
            lines.next_line().unwrap(),
            Some((1, Ok(b"{\"a\":1}".to_vec())))
        );
        let mut lines = Lines::new(decompressing(Trickle(b"x".to_vec(), 0)).unwrap());
        assert_eq!(lines.next_line().unwrap(), Some((1, Ok(b"x".to_vec()))));
    }

    #[test]
    fn overlong_lines_are_reported_and_skipped() {
        let text = format!("short\n{}\nafter\r\n", "x".repeat(100));
        let mut lines = Lines::with_max_line_bytes(text.as_bytes(), 10);
        assert_eq!(lines.next_line().unwrap(), Some((1, Ok(b"short".to_vec()))));
        assert_eq!(
            lines.next_line().unwrap(),
            Some((
                2,
                Err(LineTooLong {
                    length: 100,
                    limit: 10
                })
            ))
        );
        assert_eq!(lines.next_line().unwrap(), Some((3, Ok(b"after".to_vec()))));
        assert_eq!(lines.next_line().unwrap(), None);
        // Exactly at the limit is fine.
        let mut lines = Lines::with_max_line_bytes(&b"0123456789\r\n"[..], 10);
        assert_eq!(
            lines.next_line().unwrap(),
            Some((1, Ok(b"0123456789".to_vec())))
        );
    }
}
