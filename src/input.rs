//! Reading JSON Lines input: a file, a gzip-compressed file, or standard input.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::{Error, Result};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Opens `path` for reading lines; `-` is standard input. Gzip is recognised by its first two
/// bytes, whatever the file is called.
pub fn open(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    let io_error = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let reader: Box<dyn Read + Send> = if path == Path::new("-") {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path).map_err(io_error)?)
    };
    let mut buffered = BufReader::with_capacity(1 << 16, reader);
    let is_gzip = buffered
        .fill_buf()
        .map_err(io_error)?
        .starts_with(&GZIP_MAGIC);
    Ok(if is_gzip {
        Box::new(BufReader::with_capacity(
            1 << 16,
            MultiGzDecoder::new(buffered),
        ))
    } else {
        Box::new(buffered)
    })
}

/// Numbered lines of bytes (UTF-8 is checked by the parser, line by line, so that one bad line
/// costs only itself). Blank lines are skipped but counted.
pub struct Lines<R> {
    reader: R,
    number: u64,
}

impl<R: BufRead> Lines<R> {
    /// Lines of `reader`, numbered from 1.
    pub fn new(reader: R) -> Self {
        Lines { reader, number: 0 }
    }

    /// The next non-blank line and its number, without the line break; `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, Vec<u8>)>> {
        loop {
            let mut line = Vec::new();
            if self.reader.read_until(b'\n', &mut line)? == 0 {
                return Ok(None);
            }
            self.number += 1;
            while line.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
                line.pop();
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some((self.number, line)));
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
                seen.push((number, String::from_utf8(line).unwrap()));
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
}
