//! Reading input: JSON Lines or a JSON array of articles, from a file, a gzip-compressed
//! file, or standard input (a UTF-8 byte-order mark at the start is skipped); and the split of
//! a body held in memory (an HTTP request's) into its documents.

use std::fs::File;
use std::ops::ControlFlow;
use std::sync::mpsc;

use rayon::prelude::*;

use serde_json::value::RawValue;

use crate::article::{ArticleError, ArticleReader, ArticleRecord, LineTooLong};
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

/// Reads articles from `reader` in batches of up to `batch_size` numbered documents, each
/// parsed by `articles` and then handed to `parse` (in parallel, so `parse` may also do
/// per-article work such as fingerprinting), and hands every batch to `handle` in input order
/// until the input ends or `handle` says to stop.
///
/// The input is JSON Lines, numbered by line, or, when its first character (after a UTF-8
/// byte-order mark and white space) is `[`, a JSON array of objects, read one element at a
/// time and numbered by element from 1 ([`Records`]).
///
/// Three stages overlap: reading (and decompressing) the next lines, parsing a batch on the
/// rayon pool, and `handle` on the calling thread, with at most two batches waiting between
/// stages. A read error (a truncated gzip stream, say) is returned after every line read
/// before it has been handled.
pub fn for_each_batch<T: Send>(
    reader: impl BufRead + Send,
    articles: &ArticleReader,
    batch_size: usize,
    parse: impl Fn(ArticleRecord) -> T + Sync,
    mut handle: impl FnMut(Vec<(u64, Result<T, ArticleError>)>) -> ControlFlow<()>,
) -> io::Result<()> {
    type Parsed<T> = Vec<(u64, Result<T, ArticleError>)>;
    let batch_size = batch_size.max(1);
    std::thread::scope(|scope| {
        let (lines_sender, lines_receiver) = mpsc::sync_channel::<Vec<NumberedLine>>(2);
        let (parsed_sender, parsed_receiver) = mpsc::sync_channel::<Parsed<T>>(2);
        let reading = scope.spawn(move || -> io::Result<()> {
            let mut lines = Records::new(reader)?;
            loop {
                let mut batch = Vec::with_capacity(batch_size);
                let mut read_error = None;
                while batch.len() < batch_size {
                    match lines.next_record() {
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
                            .and_then(|line| articles.read_bytes(&line));
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

/// The documents of an input, numbered: JSON Lines read line by line ([`Lines`]), or the
/// elements of a JSON array, read one at a time ([`ArrayElements`]). Which it is, is decided
/// by the first character after a UTF-8 byte-order mark and white space, both of which are
/// skipped (white space still counts its lines).
///
/// ```
/// use tantivy_dedup::input::Records;
///
/// let file = "\u{feff}\n[{\"id\": \"a\"},\n {\"id\": \"b\"}]";
/// let mut records = Records::new(file.as_bytes())?;
/// assert_eq!(records.next_record()?, Some((1, Ok(br#"{"id": "a"}"#.to_vec()))));
/// assert_eq!(records.next_record()?, Some((2, Ok(br#"{"id": "b"}"#.to_vec()))));
/// assert_eq!(records.next_record()?, None);
/// let mut records = Records::new("\u{feff}{\"id\": \"a\"}\n".as_bytes())?;
/// assert_eq!(records.next_record()?, Some((1, Ok(br#"{"id": "a"}"#.to_vec()))));
/// # Ok::<(), std::io::Error>(())
/// ```
pub enum Records<R> {
    /// JSON Lines.
    Lines(Lines<io::Chain<io::Cursor<Vec<u8>>, R>>),
    /// A JSON array's elements, numbered from 1.
    Array(ArrayElements<R>),
}

/// The UTF-8 byte-order mark some editors put at the start of a file.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

impl<R: BufRead> Records<R> {
    /// Reads up to the first character that is not white space, to tell JSON Lines from a JSON
    /// array, whose elements are then read one at a time ([`ArrayElements`]).
    pub fn new(mut reader: R) -> io::Result<Self> {
        let mut start = Vec::new();
        loop {
            let buffer = reader.fill_buf()?;
            let Some(&byte) = buffer.first() else { break };
            reader.consume(1);
            start.push(byte);
            if start == BYTE_ORDER_MARK {
                start.clear();
            } else if !byte.is_ascii_whitespace() && !BYTE_ORDER_MARK.starts_with(&start) {
                break;
            }
        }
        if start.last() != Some(&b'[') {
            return Ok(Records::Lines(Lines::new(
                io::Cursor::new(start).chain(reader),
            )));
        }
        Ok(Records::Array(ArrayElements::new(
            reader,
            DEFAULT_MAX_LINE_BYTES,
        )))
    }

    /// The next document; `None` at the end.
    pub fn next_record(&mut self) -> io::Result<Option<NumberedLine>> {
        match self {
            Records::Lines(lines) => lines.next_line(),
            Records::Array(elements) => elements.next_element(),
        }
    }
}

/// The elements of a JSON array read from a stream one at a time (its `[` already read), so
/// that a file of any size takes the memory of one element. An element's end is found by
/// following strings and nesting; the element itself is parsed later, like a line of JSON
/// Lines, so a malformed element costs only itself. An empty element (`[1,,2]`), an array
/// without its `]` and anything but white space after it are [`io::ErrorKind::InvalidData`]
/// errors, given after the elements before them.
///
/// ```
/// use tantivy_dedup::input::ArrayElements;
///
/// let rest = br#" {"id": "a", "tags": ["x,]"]} , {"id": "b"} ]"#;
/// let mut elements = ArrayElements::new(&rest[..], 1 << 20);
/// assert_eq!(elements.next_element()?, Some((1, Ok(br#"{"id": "a", "tags": ["x,]"]}"#.to_vec()))));
/// assert_eq!(elements.next_element()?, Some((2, Ok(br#"{"id": "b"}"#.to_vec()))));
/// assert_eq!(elements.next_element()?, None);
/// let mut cut_short = ArrayElements::new(&br#"{"id": "a"}, {"id""#[..], 1 << 20);
/// assert_eq!(cut_short.next_element()?, Some((1, Ok(br#"{"id": "a"}"#.to_vec()))));
/// assert!(cut_short.next_element().is_err()); // the array never closes
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ArrayElements<R> {
    reader: R,
    number: u64,
    max_element_bytes: usize,
    /// The closing `]` was read.
    closed: bool,
}

impl<R: BufRead> ArrayElements<R> {
    /// The elements that follow an array's `[` in `reader`, each up to `max_element_bytes`
    /// long (a longer one is read past and reported as [`LineTooLong`]).
    pub fn new(reader: R, max_element_bytes: usize) -> Self {
        ArrayElements {
            reader,
            number: 0,
            max_element_bytes,
            closed: false,
        }
    }

    /// The next element, numbered from 1; `None` after the last.
    pub fn next_element(&mut self) -> io::Result<Option<NumberedLine>> {
        if self.closed {
            return self.expect_end().map(|()| None);
        }
        let mut element = Vec::new();
        let mut length = 0usize;
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        let ended_by = loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Err(invalid_data(format!(
                    "the JSON array ends without its `]` after {} elements",
                    self.number
                )));
            }
            let mut end = None;
            for (at, &byte) in buffer.iter().enumerate() {
                if in_string {
                    match byte {
                        _ if escaped => escaped = false,
                        b'\\' => escaped = true,
                        b'"' => in_string = false,
                        _ => {}
                    }
                    continue;
                }
                match byte {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    // An unmatched closer is left in the element, for its parse to refuse.
                    b'}' | b']' if depth > 0 => depth -= 1,
                    b',' | b']' if depth == 0 => {
                        end = Some((at, byte));
                        break;
                    }
                    _ => {}
                }
            }
            let taken = end.map_or(buffer.len(), |(at, _)| at);
            length += taken;
            if length <= self.max_element_bytes {
                element.extend_from_slice(&buffer[..taken]);
            }
            // The `,` or `]` is consumed with the element.
            self.reader.consume(end.map_or(taken, |(at, _)| at + 1));
            if let Some((_, byte)) = end {
                break byte;
            }
        };
        self.closed = ended_by == b']';
        let is_blank = |bytes: &[u8]| bytes.iter().all(u8::is_ascii_whitespace);
        if length <= self.max_element_bytes && is_blank(&element) {
            // `[]`, or `[ ]`: an empty array; anything else blank is a hole in the array.
            if self.closed && self.number == 0 {
                return self.expect_end().map(|()| None);
            }
            return Err(invalid_data(format!(
                "the JSON array has an empty element after element {}",
                self.number
            )));
        }
        self.number += 1;
        if length > self.max_element_bytes {
            let too_long = LineTooLong {
                length,
                limit: self.max_element_bytes,
            };
            return Ok(Some((self.number, Err(too_long))));
        }
        let start = element
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(0);
        let end = element
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |at| at + 1);
        element.truncate(end);
        element.drain(..start);
        Ok(Some((self.number, Ok(element))))
    }

    /// Checks that nothing but white space follows the array.
    fn expect_end(&mut self) -> io::Result<()> {
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(());
            }
            if let Some(&byte) = buffer.iter().find(|b| !b.is_ascii_whitespace()) {
                return Err(invalid_data(format!(
                    "text after the JSON array's closing `]`, starting with {:?}",
                    char::from(byte)
                )));
            }
            let consumed = buffer.len();
            self.reader.consume(consumed);
        }
    }
}

fn invalid_data(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Why a body of documents held in memory (an HTTP request's, a JSON array file) was refused
/// as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Nothing but white space.
    #[error(
        "the body is empty; send a JSON array of documents, one JSON object, or NDJSON (one object a line)"
    )]
    Empty,
    /// Not an array, an object or NDJSON.
    #[error(
        "the body must be a JSON array of documents, one JSON object, or NDJSON (one object a line); it starts with {0:?}"
    )]
    NotDocuments(char),
    /// A JSON array that does not parse.
    #[error("malformed JSON array: {0}")]
    MalformedArray(String),
    /// More documents than allowed.
    #[error("the batch has {found} documents; at most {limit} are accepted per request, split it")]
    TooManyDocuments {
        /// Documents in the body.
        found: usize,
        /// The limit.
        limit: usize,
    },
    /// An empty array.
    #[error("the batch is empty: the array holds no documents")]
    NoDocuments,
}

/// The documents of a body held in memory, each as its JSON bytes, in order: a JSON array's
/// elements, one JSON object (possibly over several lines), or NDJSON's non-blank lines. A
/// UTF-8 byte-order mark at the start is skipped. More than `max_documents`, none, or a body
/// of another shape is refused whole; each document is left for its own checks.
///
/// ```
/// use tantivy_dedup::input::{BodyError, split_documents};
///
/// let documents = split_documents(b"\xEF\xBB\xBF[{\"id\": 1}, {\"id\": 2}]", 10)?;
/// assert_eq!(documents, [&b"{\"id\": 1}"[..], &b"{\"id\": 2}"[..]]);
/// assert_eq!(split_documents(b"{\"id\": 1}\n{\"id\": 2}\n", 10)?.len(), 2);
/// assert_eq!(split_documents(b"id=1", 10), Err(BodyError::NotDocuments('i')));
/// # Ok::<(), BodyError>(())
/// ```
pub fn split_documents(body: &[u8], max_documents: usize) -> Result<Vec<&[u8]>, BodyError> {
    let body = body.strip_prefix(BYTE_ORDER_MARK).unwrap_or(body);
    let Some(first) = body.iter().position(|byte| !byte.is_ascii_whitespace()) else {
        return Err(BodyError::Empty);
    };
    let documents = match body[first] {
        b'[' => array_elements(body)?,
        // One object, possibly pretty-printed over several lines...
        b'{' if serde_json::from_slice::<&RawValue>(body).is_ok() => vec![body],
        // ...or NDJSON, where each line stands alone.
        b'{' => body
            .split(|byte| *byte == b'\n')
            .filter(|line| line.iter().any(|byte| !byte.is_ascii_whitespace()))
            .collect(),
        _ => {
            return Err(BodyError::NotDocuments(
                String::from_utf8_lossy(&body[first..(first + 4).min(body.len())])
                    .chars()
                    .next()
                    .unwrap_or('?'),
            ));
        }
    };
    if documents.is_empty() {
        Err(BodyError::NoDocuments)
    } else if documents.len() > max_documents {
        Err(BodyError::TooManyDocuments {
            found: documents.len(),
            limit: max_documents,
        })
    } else {
        Ok(documents)
    }
}

/// The elements of a JSON array, each as its JSON bytes.
fn array_elements(json: &[u8]) -> Result<Vec<&[u8]>, BodyError> {
    let elements: Vec<&RawValue> = serde_json::from_slice(json)
        .map_err(|error| BodyError::MalformedArray(error.to_string()))?;
    Ok(elements
        .into_iter()
        .map(|element| element.get().as_bytes())
        .collect())
}

/// How many of an input's articles had the time field (`published_at`, or the key its `from`
/// names): a file or request in which none had it was most likely sent with the time under
/// another key, and its documents were dated by their arrival.
///
/// ```
/// use tantivy_dedup::input::TimeCoverage;
///
/// let mut coverage = TimeCoverage::default();
/// coverage.count(None);
/// assert!(coverage.warning("date").unwrap().contains("`date`"));
/// coverage.count(Some(1_700_000_000));
/// assert_eq!(coverage.warning("published_at"), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeCoverage {
    /// Articles counted.
    pub articles: u64,
    /// Of those, the ones with a time.
    pub dated: u64,
}

impl TimeCoverage {
    /// Counts one article by its `published_at`.
    pub fn count(&mut self, published_at: Option<crate::forest::Timestamp>) {
        self.articles += 1;
        self.dated += u64::from(published_at.is_some());
    }

    /// The warning to give when there were articles and none had a time; `time_key` is the
    /// input key the time is read from. It does not count them, so that the batches of one
    /// file (`load`) give the same warning, which is printed once.
    pub fn warning(&self, time_key: &str) -> Option<String> {
        (self.articles > 0 && self.dated == 0).then(|| {
            format!(
                "no document had the time field `{time_key}`, so each was dated by its arrival; \
                 if the time is under another key, declare it in the settings file \
                 ([fields.published_at] from = \"KEY\")"
            )
        })
    }
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

    use proptest::prelude::*;
    use serde_json::Value;

    /// JSON values whose strings hold what could end an element if strings were not followed.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-c,\\]\\[{}\"\\\\ 新闻\n]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-c,\\]\"]{0,3}", inner), 0..4)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn array_elements_are_serde_json_s(
            elements in prop::collection::vec(json_value(), 0..6),
            pretty in any::<bool>(),
            capacity in 1usize..16,
        ) {
            let array = Value::Array(elements.clone());
            let text = if pretty {
                serde_json::to_string_pretty(&array).unwrap()
            } else {
                serde_json::to_string(&array).unwrap()
            };
            let rest = text.strip_prefix('[').unwrap().as_bytes();
            let mut read = ArrayElements::new(BufReader::with_capacity(capacity, rest), 1 << 20);
            let mut got = Vec::new();
            while let Some((number, element)) = read.next_element().unwrap() {
                prop_assert_eq!(number, got.len() as u64 + 1);
                got.push(serde_json::from_slice::<Value>(&element.unwrap()).unwrap());
            }
            prop_assert_eq!(got, elements);
        }
    }

    #[test]
    fn a_broken_array_is_an_error_after_the_elements_before_it() {
        for (rest, good) in [
            (&br#"{"id": "a"}, , {"id": "b"}]"#[..], 1),
            (br#"{"id": "a"}, {"id": "b"}] x"#, 2),
            (br#"{"id": "a"}, {"id": "b""#, 1),
            (br#"{"id": "a"},]"#, 1),
        ] {
            let mut read = ArrayElements::new(rest, 1 << 20);
            for _ in 0..good {
                assert!(read.next_element().unwrap().is_some());
            }
            let error = read.next_element().unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
        }
        assert_eq!(
            ArrayElements::new(&b" ] \n"[..], 10)
                .next_element()
                .unwrap(),
            None
        );
        let (number, too_long) = ArrayElements::new(&br#""0123456789", 1]"#[..], 5)
            .next_element()
            .unwrap()
            .unwrap();
        assert_eq!((number, too_long.unwrap_err().length), (1, 12));
    }
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
