//! Builds a labeled near-duplicate set from a news corpus, with the edits reposts make in the
//! wild that a set of typos, truncations and paragraph edits lacks: sentences and paragraphs
//! reordered, synonyms swapped, ads and "related news" lines inserted, pages scraped with their
//! markup, comments and update-time footers, weibo-style excerpts, and long digest articles
//! (with their copies) that contain whole stories of their own cluster's neighbours.
//!
//! ```text
//! cargo run --release --example labeled_set -- CORPUS.jsonl[.gz] [--exclude OTHER.jsonl[.gz]] [--days N] [--seed S] > own.jsonl
//! tantivy-dedup eval own.jsonl --mode default
//! ```
//!
//! The corpus is JSON Lines with `id`, `date` (YYYYMMDD), `title` and `content` (the xwlb-news
//! layout). Stories whose id (before any `-` suffix) appears in `--exclude` are left out, so the
//! set can be kept apart from another labeled set built from the same corpus. Every story of
//! `--days` randomly chosen days is a document of its own cluster (so the day's templated
//! bulletins are there as each other's hard negatives); about half get copies. The output is in
//! arrival order, with `cluster` and `kind` beside the article fields. It is derived from the
//! corpus: keep it out of the repository.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;

use rand::rngs::SmallRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tantivy_dedup::input;

/// Word swaps an editor makes (each applied to the first occurrence only).
const SYNONYMS: &[(&str, &str)] = &[
    ("今天", "今日"),
    ("表示", "指出"),
    ("召开", "举行"),
    ("进一步", "更加"),
    ("目前", "当前"),
    ("同时", "与此同时"),
    ("重要", "重大"),
    ("加强", "强化"),
    ("推进", "推动"),
    ("提高", "提升"),
    ("工作", "工作任务"),
    ("已经", "已"),
    ("近日", "日前"),
    ("群众", "民众"),
    ("发展", "建设发展"),
    ("记者", "本台记者"),
    ("据了解", "据悉"),
    ("开展", "展开"),
    ("积极", "主动"),
    ("全面", "全方位"),
];

const ADS: &[&str] = &[
    "【广告】限时优惠！品牌家电以旧换新，最高补贴两千元，详询门店。",
    "扫码关注我们的公众号，第一时间获取更多新闻资讯。",
    "点击下载客户端，看更多精彩视频。",
    "（本文仅代表作者观点，与本站立场无关）",
];

const OUTLETS: &[&str] = &[
    "新华网",
    "人民网",
    "中国新闻网",
    "环球网",
    "澎湃新闻",
    "新浪新闻",
    "网易新闻",
    "搜狐新闻",
    "今日头条",
    "腾讯新闻",
    "凤凰网",
    "光明网",
];

const EMOJI: &[&str] = &["🔥", "👍", "❤️", "🙏", "💪", "😊"];

struct Story {
    id: String,
    title: String,
    content: String,
}

struct Row {
    time: i64,
    value: Value,
}

fn main() -> std::process::ExitCode {
    // Printed whole (a missing corpus explains where the project's data comes from), not as
    // `main`'s debug form of the error.
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("labeled_set: error: {error}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut corpus = None;
    let mut exclude = None;
    let mut days = 150usize;
    let mut seed = 2026u64;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--exclude" => exclude = args.next().map(PathBuf::from),
            "--days" => days = args.next().ok_or("--days needs a number")?.parse()?,
            "--seed" => seed = args.next().ok_or("--seed needs a number")?.parse()?,
            "-h" | "--help" => {
                eprintln!(
                    "usage: labeled_set CORPUS.jsonl[.gz] [--exclude OTHER.jsonl[.gz]] [--days N] [--seed S]"
                );
                return Ok(());
            }
            _ => corpus = Some(PathBuf::from(arg)),
        }
    }
    let corpus = corpus.ok_or("give the corpus file (JSON Lines, optionally gzipped)")?;
    // Both before the long read of the corpus.
    input::require_file(&corpus)?;
    if let Some(path) = &exclude {
        input::require_file(path)?;
    }
    let excluded = match exclude {
        Some(path) => read_ids(&path)?,
        None => HashSet::new(),
    };

    let mut by_day: BTreeMap<String, Vec<Story>> = BTreeMap::new();
    for line in input::open(&corpus)?.lines() {
        let value: Value = serde_json::from_str(&line?)?;
        let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
        let id = text("id");
        if excluded.contains(&id) || text("content").chars().count() < 40 {
            continue;
        }
        by_day.entry(text("date")).or_default().push(Story {
            id,
            title: text("title"),
            content: text("content"),
        });
    }

    let mut rng = SmallRng::seed_from_u64(seed);
    let mut all_days: Vec<&String> = by_day.keys().collect();
    all_days.shuffle(&mut rng);
    let chosen: HashSet<String> = all_days.into_iter().take(days).cloned().collect();
    let mut rows = Vec::new();
    for (day, stories) in by_day.iter().filter(|(day, _)| chosen.contains(*day)) {
        let Some(midnight) = day_start(day) else {
            continue;
        };
        let broadcast = midnight + 11 * 3_600; // 19:00 in China
        for story in stories {
            emit_story(&mut rows, &mut rng, story, stories, broadcast);
        }
        emit_digests(&mut rows, &mut rng, day, stories, broadcast);
    }
    rows.sort_by_key(|row| row.time);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for row in &rows {
        writeln!(out, "{}", row.value)?;
    }
    eprintln!("{} documents", rows.len());
    Ok(())
}

/// The story itself, and for about half of the stories one to five copies.
fn emit_story(rows: &mut Vec<Row>, rng: &mut SmallRng, story: &Story, day: &[Story], at: i64) {
    let cluster = format!("o-{}", story.id);
    push(
        rows,
        &story.id,
        &story.title,
        &story.content,
        "央视网",
        at,
        &cluster,
        "base",
    );
    if !rng.random_bool(0.5) {
        return;
    }
    let copies = rng.random_range(1..=5);
    for copy in 0..copies {
        let kind = *[
            "reorder", "synonym", "inserted", "scraped", "excerpt", "combined",
        ]
        .choose(rng)
        .unwrap_or(&"reorder");
        let content = match kind {
            "reorder" => reorder(rng, &story.content),
            "synonym" => synonyms(rng, &story.content),
            "inserted" => inserted_lines(rng, &story.content, day),
            "scraped" => scraped(rng, &story.content, at),
            "excerpt" => excerpt(rng, &story.content),
            _ => {
                let reordered = reorder(rng, &story.content);
                let edited = synonyms(rng, &reordered);
                let with_lines = inserted_lines(rng, &edited, day);
                scraped(rng, &with_lines, at)
            }
        };
        let when = at + rng.random_range(600..3 * 86_400);
        let id = format!("{}-{kind}{copy}", story.id);
        let outlet = if kind == "excerpt" {
            "微博"
        } else {
            OUTLETS.choose(rng).copied().unwrap_or("新华网")
        };
        push(
            rows,
            &id,
            &story.title,
            &content,
            outlet,
            when,
            &cluster,
            kind,
        );
    }
}

/// Long digest articles: two runs of the day's stories in one page each (each its own
/// cluster), and a copy of each scraped with a footer and cut to three fifths. A digest contains
/// whole stories of other clusters, and the two digests of a day share two stories; neither
/// makes them copies of each other.
fn emit_digests(rows: &mut Vec<Row>, rng: &mut SmallRng, day: &str, stories: &[Story], at: i64) {
    let length = rng.random_range(6..=8);
    if stories.len() < 2 * length - 2 {
        return;
    }
    let first = rng.random_range(0..=stories.len() - (2 * length - 2));
    for digest in 0..2 {
        let start = first + digest * (length - 2);
        let picked = &stories[start..start + length];
        let content: Vec<String> = picked
            .iter()
            .map(|story| format!("{}\n{}", story.title, story.content))
            .collect();
        let content = content.join("\n\n");
        let id = format!("digest-{day}-{digest}");
        let title = format!("{}月{}日新闻联播内容摘要", &day[4..6], &day[6..8]);
        let cluster = format!("o-{id}");
        let when = at + 3_600 + 60 * digest as i64;
        push(
            rows,
            &id,
            &title,
            &content,
            "央视网",
            when,
            &cluster,
            "digest",
        );
        let chars: Vec<char> = content.chars().collect();
        let cut: String = chars[..chars.len() * 3 / 5].iter().collect();
        let copy = scraped(rng, &cut, when);
        let when = when + rng.random_range(600..86_400);
        let id = format!("{id}-copy");
        push(
            rows,
            &id,
            &title,
            &copy,
            "新浪新闻",
            when,
            &cluster,
            "digest_copy",
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn push(
    rows: &mut Vec<Row>,
    id: &str,
    title: &str,
    content: &str,
    source: &str,
    time: i64,
    cluster: &str,
    kind: &str,
) {
    rows.push(Row {
        time,
        value: json!({
            "id": id, "title": title, "content": content, "source": source,
            "published_at": time, "cluster": cluster, "kind": kind,
        }),
    });
}

/// Sentences shuffled inside each paragraph, and the paragraphs after the first shuffled.
fn reorder(rng: &mut SmallRng, text: &str) -> String {
    let mut paragraphs: Vec<String> = text
        .lines()
        .map(|paragraph| {
            let mut sentences: Vec<&str> = paragraph.split_inclusive('。').collect();
            sentences.shuffle(rng);
            sentences.concat()
        })
        .collect();
    if paragraphs.len() > 2 {
        paragraphs[1..].shuffle(rng);
    }
    paragraphs.join("\n")
}

/// Two to six of the synonym swaps that the text allows.
fn synonyms(rng: &mut SmallRng, text: &str) -> String {
    let mut swaps: Vec<&(&str, &str)> = SYNONYMS
        .iter()
        .filter(|(word, _)| text.contains(word))
        .collect();
    swaps.shuffle(rng);
    let count = rng.random_range(2..=6);
    swaps
        .into_iter()
        .take(count)
        .fold(text.to_owned(), |text, (word, other)| {
            text.replacen(word, other, 1)
        })
}

/// An ad line inside the text and a "related news" line with other stories' titles at the end.
fn inserted_lines(rng: &mut SmallRng, text: &str, day: &[Story]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at = rng.random_range(0..=lines.len());
    lines.insert(at, ADS.choose(rng).copied().unwrap_or_default().to_owned());
    let related: Vec<&str> = day
        .choose_multiple(rng, 3)
        .map(|story| story.title.as_str())
        .collect();
    lines.push(format!("相关新闻：{}", related.join(" | ")));
    lines.join("\n")
}

/// The text as a scraped page: navigation, paragraphs in markup, comments, a script, a share
/// widget and an update-time footer.
fn scraped(rng: &mut SmallRng, text: &str, at: i64) -> String {
    let body: String = text
        .lines()
        .map(|paragraph| format!("<p>{paragraph}</p>\n"))
        .collect();
    let updated = at + rng.random_range(0..86_400);
    let (hour, minute) = ((updated / 3_600) % 24, (updated / 60) % 60);
    format!(
        "<div class=\"crumb\">首页 &gt; 新闻 &gt; 正文</div>\n<!-- article start -->\n{body}\
         <!-- article end --><script>window.pv && pv.track();</script>\n\
         <div class=\"share\">分享到：微信 微博 QQ空间</div>\n\
         <p class=\"meta\">更新时间：{hour:02}:{minute:02} 责任编辑：{}</p>",
        ["王明", "李华", "张伟", "刘洋"][rng.random_range(0..4)]
    )
}

/// A weibo-style post: the story's first two sentences with a forward prefix, a hashtag and an
/// emoji.
fn excerpt(rng: &mut SmallRng, text: &str) -> String {
    let lead: String = text
        .split_inclusive('。')
        .take(2)
        .collect::<String>()
        .replace('\n', "");
    let prefix = ["转发：", "//@央视新闻：", "#新闻联播# ", ""][rng.random_range(0..4)];
    format!(
        "{prefix}{lead} {}",
        EMOJI.choose(rng).copied().unwrap_or_default()
    )
}

/// Unix seconds of midnight UTC on a YYYYMMDD day; `None` for a malformed date.
fn day_start(day: &str) -> Option<i64> {
    let (year, month, date): (i32, u8, u8) = (
        day.get(0..4)?.parse().ok()?,
        day.get(4..6)?.parse().ok()?,
        day.get(6..8)?.parse().ok()?,
    );
    let month = time::Month::try_from(month).ok()?;
    let date = time::Date::from_calendar_date(year, month, date).ok()?;
    Some(date.midnight().assume_utc().unix_timestamp())
}

/// The story ids a labeled file draws on (the part of each id before any `-`).
fn read_ids(path: &std::path::Path) -> Result<HashSet<String>, Box<dyn std::error::Error>> {
    let mut ids = HashSet::new();
    for line in input::open(path)?.lines() {
        let value: Value = serde_json::from_str(&line?)?;
        if let Some(id) = value["id"].as_str() {
            ids.insert(id.split('-').next().unwrap_or(id).to_owned());
        }
    }
    Ok(ids)
}
