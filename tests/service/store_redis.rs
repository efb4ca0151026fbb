//! The forest on a real 3-node Redis Cluster: one writer equals the in-memory forest, and so
//! does one writer with eight inserts in flight (a `Pipeline`, its connections sharing a link
//! to each node, each getting its own replies), and 32 on text that crowds key
//! postings past their cap; two such writers at once, and
//! eight concurrent writers (with bursts of identical and near-identical documents released at one
//! instant) keep the forest's invariants (docs/algorithm.md, "Invariants") and split no story the
//! sequential run keeps whole; a writer far behind another in event time keeps its window; a node
//! killed and restarted during ingest loses no acknowledged insert, and one stopped under a
//! pipelined `Deduplicator::run` cuts it after the decisions placed before; an index ingesting
//! with inserts in flight decides as one with its forest in memory, and reports a prefix of
//! its lines when a node stops under it; posts under one disclaimer are placed with inserts
//! in flight as one writer in turn places them; processes
//! (`dedup`, `ingest`, `serve`) share the forest through the command line.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::redis_cluster::RedisCluster;
use crate::serve_process::spawn_listening;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tantivy_dedup::dedup::Signer;
use tantivy_dedup::forest::redis::{RedisAddress, RedisStore, StoredNode};
use tantivy_dedup::forest::{Claim, ForestStore, Pipeline, Signature, Timestamp, new_token, place};
use tantivy_dedup::verify::{Sketch, Verifier};
use tantivy_dedup::{Article, DedupConfig, Fingerprint, Forest, Mode};

const T0: Timestamp = 1_750_000_000;

/// A story's text, written for the test from a vocabulary of common characters: six to nine
/// sentences of 14 to 30 characters.
fn story(rng: &mut SmallRng) -> String {
    const VOCABULARY: &str = "国家发展改革委员会今日召开新闻发布会介绍经济运行情况记者从有关部门获悉\
        全省各地持续推进重点项目建设工业生产保持稳定增长消费市场回暖明显农业农村工作扎实推进\
        科技创新能力不断提升城乡居民收入稳步增加生态环境质量持续改善交通运输网络加快完善\
        教育医疗养老等民生保障水平提高文化旅游市场活跃对外开放迈出新步伐金融服务实体经济";
    let characters: Vec<char> = VOCABULARY.chars().collect();
    let sentences = rng.random_range(6..10);
    let mut text = String::new();
    for _ in 0..sentences {
        for _ in 0..rng.random_range(14..31) {
            text.push(characters[rng.random_range(0..characters.len())]);
        }
        text.push('。');
    }
    text
}

/// A repost of `base`: identical, with a header or a source line, one character changed, or the
/// last sentence cut. Any two of these verify against each other.
fn variant(base: &str, kind: usize) -> String {
    match kind % 5 {
        0 => base.to_owned(),
        1 => format!("【转载】{base}"),
        2 => format!("{base}（来源：新华网）"),
        3 => {
            let mut characters: Vec<char> = base.chars().collect();
            let middle = characters.len() / 2;
            characters[middle] = if characters[middle] == '的' {
                '了'
            } else {
                '的'
            };
            characters.into_iter().collect()
        }
        _ => {
            let cut = base[..base.len() - '。'.len_utf8()]
                .rfind('。')
                .map_or(base.len(), |end| end + '。'.len_utf8());
            base[..cut].to_owned()
        }
    }
}

struct Document {
    story: usize,
    signature: Signature,
    time: Timestamp,
}

impl Document {
    /// The document `id` of `story` with this text, signed by `signer`, seen at `time`.
    fn signed(signer: &Signer, id: String, content: String, story: usize, time: Timestamp) -> Self {
        let article = Article {
            id,
            content,
            ..Default::default()
        };
        Document {
            story,
            signature: signer.sign(&article),
            time,
        }
    }
}

/// `stories` stories of `copies` documents each, signed by `config`, in a shuffled order.
fn stream(config: &DedupConfig, stories: usize, copies: usize, seed: u64) -> Vec<Document> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let signer = Signer::new(config);
    let mut documents = Vec::with_capacity(stories * copies);
    for story_number in 0..stories {
        let base = story(&mut rng);
        for copy in 0..copies {
            let content = variant(&base, rng.random_range(0..5));
            documents.push(Document::signed(
                &signer,
                format!("{story_number}-{copy}"),
                content,
                story_number,
                0,
            ));
        }
    }
    documents.shuffle(&mut rng);
    for (position, document) in documents.iter_mut().enumerate() {
        document.time = T0 + position as Timestamp / 10;
    }
    documents
}

/// A store of its own (its own connection) on the cluster at `store_arg`.
fn connect(store_arg: &str, config: &DedupConfig) -> RedisStore {
    let address = RedisAddress::parse(store_arg).unwrap();
    RedisStore::connect(&address, config)
        .unwrap()
        .with_pending_timeout(Duration::from_secs(2))
}

/// Places every document in order in an in-memory forest of `k + 1` tables: the sequential
/// run.
fn sequential_roots(config: &DedupConfig, documents: &[Document]) -> Vec<Fingerprint> {
    let mut forest = match config.verifier() {
        Some(verifier) => {
            Forest::with_verifier(config.max_distance, config.window_seconds(), verifier)
        }
        None => Forest::new(config.max_distance, config.window_seconds()),
    }
    .unwrap();
    documents
        .iter()
        .map(|document| forest.place(document.signature.clone(), document.time).root)
        .collect()
}

/// Places every document in order through one writer; gives the roots answered.
fn place_all(store: &mut RedisStore, documents: &[Document]) -> Vec<Fingerprint> {
    documents
        .iter()
        .map(|document| {
            place(store, &document.signature, document.time, new_token())
                .unwrap()
                .root
        })
        .collect()
}

/// Places a document, retrying while the cluster refuses (under the same token, so that a
/// pending node the failed attempt could not give up is resumed); gives the root and how many
/// attempts failed.
fn place_until_acknowledged(store: &mut RedisStore, document: &Document) -> (Fingerprint, u32) {
    let token = new_token();
    let mut failures = 0;
    loop {
        match place(store, &document.signature, document.time, token) {
            Ok(placement) => return (placement.root, failures),
            Err(error) => {
                failures += 1;
                assert!(failures < 600, "the cluster never came back: {error}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The documents counted on the store's nodes, summed.
fn documents_counted(store: &mut RedisStore) -> i64 {
    store
        .dump()
        .unwrap()
        .iter()
        .map(|node| node.documents)
        .sum()
}

/// Checks the forest's invariants (docs/algorithm.md, "Invariants") on what the cluster holds,
/// by brute force, and that every
/// acknowledged document's node has the root it was answered with. Nodes last seen before
/// `cutoff` have expired: they may still be stored (until the sweep), but no longer count as
/// roots, and their documents' nodes may be gone.
fn check_invariants(
    store: &mut RedisStore,
    config: &DedupConfig,
    acknowledged: &[(Fingerprint, Fingerprint)],
    cutoff: Timestamp,
) -> Vec<StoredNode> {
    let nodes = store.dump().unwrap();
    let by_fingerprint: HashMap<Fingerprint, &StoredNode> =
        nodes.iter().map(|node| (node.fingerprint, node)).collect();
    let verifier = config.verifier();
    let mut sketches: HashMap<Fingerprint, Sketch> = HashMap::new();
    if verifier.is_some() {
        for node in &nodes {
            let sketch = store.sketch(node.fingerprint).unwrap();
            sketches.insert(node.fingerprint, sketch.expect("every node has its sketch"));
        }
    }
    let k = config.max_distance;
    let edge = |a: Fingerprint, b: Fingerprint| match &verifier {
        None => a.distance(b) <= k,
        Some(verifier) => {
            let (x, y) = (&sketches[&a], &sketches[&b]);
            let reachable = a.distance(b) <= k || x.keys().iter().any(|key| y.keys().contains(key));
            reachable && verifier.matches(x, y)
        }
    };
    let mut children: HashMap<Fingerprint, i64> = HashMap::new();
    for node in &nodes {
        assert_eq!(node.pending, None, "{} is still pending", node.fingerprint);
        if let Some((attached, root)) = node.leaf {
            let parent = by_fingerprint
                .get(&attached)
                .unwrap_or_else(|| panic!("{} hangs from missing {attached}", node.fingerprint));
            let parent_root = parent.leaf.map_or(parent.fingerprint, |(_, root)| root);
            assert_eq!(
                parent_root, root,
                "{} and its parent disagree on the root",
                node.fingerprint
            );
            assert!(
                by_fingerprint
                    .get(&root)
                    .is_some_and(|root| root.root.is_some()),
                "{}'s root {root} is not a root",
                node.fingerprint
            );
            // Or the leaf is a copy of the node plus text other stories carry, which the
            // node lies within.
            let within = |verifier: &Verifier| {
                verifier.lies_within(&sketches[&attached], &sketches[&node.fingerprint])
            };
            assert!(
                edge(node.fingerprint, attached) || verifier.as_ref().is_some_and(within),
                "{} has no edge to {attached}",
                node.fingerprint
            );
            assert!(parent.last_seen >= node.last_seen);
            *children.entry(root).or_default() += 1;
        }
    }
    let roots: Vec<&StoredNode> = nodes.iter().filter(|node| node.root.is_some()).collect();
    let live_roots: Vec<&StoredNode> = roots
        .iter()
        .copied()
        .filter(|root| root.last_seen >= cutoff)
        .collect();
    for root in &roots {
        let counted = root.root.map(|(_, children)| children).unwrap_or_default();
        assert_eq!(
            counted,
            children.get(&root.fingerprint).copied().unwrap_or(0),
            "child count of {}",
            root.fingerprint
        );
    }
    for (i, a) in live_roots.iter().enumerate() {
        for b in &live_roots[i + 1..] {
            assert!(
                !edge(a.fingerprint, b.fingerprint),
                "roots {} and {} have an edge",
                a.fingerprint,
                b.fingerprint
            );
        }
    }
    let root_of = |fingerprint: Fingerprint| {
        let node = by_fingerprint[&fingerprint];
        node.leaf.map_or(node.fingerprint, |(_, root)| root)
    };
    for &(fingerprint, root) in acknowledged {
        if !by_fingerprint.contains_key(&fingerprint) && cutoff > Timestamp::MIN {
            continue; // expired and swept
        }
        assert!(
            by_fingerprint.contains_key(&fingerprint),
            "acknowledged {fingerprint} is lost"
        );
        assert_eq!(
            root_of(fingerprint),
            root,
            "{fingerprint} was answered another root"
        );
    }
    let documents: i64 = nodes.iter().map(|node| node.documents).sum();
    let present = acknowledged
        .iter()
        .filter(|(fingerprint, _)| by_fingerprint.contains_key(fingerprint))
        .count();
    assert!(documents >= present as i64);
    nodes
}

#[test]
fn one_writer_decides_as_the_in_memory_forest() {
    let cluster = RedisCluster::start(3);
    // The in-memory forest keeps k + 1 tables; the permuted layouts on Redis must find the
    // same neighbours, so the same decisions.
    for (mode, tables) in [
        (Mode::Default, None),
        (Mode::Seed, None),
        (Mode::Seed, Some(10)),
        (Mode::Default, Some(20)),
    ] {
        cluster.flush_all();
        let config = DedupConfig {
            mode,
            tables,
            ..Default::default()
        };
        let documents = stream(&config, 150, 6, 7);
        let expected = sequential_roots(&config, &documents);
        let mut store = connect(&cluster.store_arg(), &config);
        let got = place_all(&mut store, &documents);
        assert_eq!(got, expected, "{mode:?}, {tables:?} tables");
        let acknowledged: Vec<_> = documents
            .iter()
            .map(|d| d.signature.fingerprint)
            .zip(got)
            .collect();
        check_invariants(&mut store, &config, &acknowledged, Timestamp::MIN);

        // One family of bucket keys a table of the configured layout, each key as wide as
        // its table's.
        let layout = config.layout().unwrap();
        let mut tables_seen = HashSet::new();
        for key in cluster.keys("td:b*") {
            let (table, bucket) = key["td:b".len()..].split_once(':').unwrap();
            let table: usize = table.parse().unwrap();
            let bucket = u64::from_str_radix(bucket, 16).unwrap();
            assert!(bucket < 1 << layout.tables()[table].key_bits(), "{key}");
            tables_seen.insert(table);
        }
        let all: HashSet<usize> = (0..layout.table_count()).collect();
        assert_eq!(tables_seen, all, "{tables:?} tables");
    }

    // An insert that claims a node another writer settled after it looked (so its text has
    // not been verified against the node's) takes the count back, and its next claim under
    // the same token counts the document again: once, not zero times.
    cluster.flush_all();
    let config = DedupConfig::default();
    let document = &stream(&config, 1, 1, 8)[0];
    let mut store = connect(&cluster.store_arg(), &config);
    let node = place(&mut store, &document.signature, document.time, new_token())
        .unwrap()
        .node;
    let (seen, token) = (document.time as u32, new_token());
    for _ in 0..2 {
        let claim = store.claim(node, seen, token).unwrap();
        assert!(matches!(claim, Claim::Existing { .. }), "{claim:?}");
        assert!(store.uncount_claim(node, token).unwrap());
    }
    store.claim(node, seen, token).unwrap();
    assert_eq!(
        documents_counted(&mut store),
        2,
        "the first insert and the one that claimed three times"
    );

    // Pages that carry two stories, after one of them: the page joins it, and the other
    // story and its repost stay apart from it, as in memory (the rule reads the root's
    // sketch from the store).
    cluster.flush_all();
    let mut rng = SmallRng::seed_from_u64(9);
    let signer = Signer::new(&config);
    let mut documents = Vec::new();
    for pair in 0..20 {
        let (first, second) = (story(&mut rng), story(&mut rng));
        let texts = [
            first.clone(),
            format!("{first}\n{second}"),
            second.clone(),
            format!("【转载】{second}"),
        ];
        for (i, content) in texts.into_iter().enumerate() {
            let time = T0 + documents.len() as Timestamp;
            documents.push(Document::signed(
                &signer,
                format!("{pair}-{i}"),
                content,
                2 * pair + usize::from(i >= 2),
                time,
            ));
        }
    }
    let expected = sequential_roots(&config, &documents);
    let got = place_all(&mut connect(&cluster.store_arg(), &config), &documents);
    assert_eq!(got, expected, "pages carrying two stories");
    for pair in got.chunks(4) {
        assert_eq!(pair[1], pair[0], "the page joins the first story");
        assert_ne!(
            pair[2], pair[0],
            "the second story joins the first through the page"
        );
        assert_eq!(pair[3], pair[2], "the repost of the second story");
    }
}

/// How long a pipeline's insert waits for another writer's pending node before giving it up.
const PENDING_TIMEOUT: Duration = Duration::from_secs(2);

/// The pending timeout of a writer alone on the store: far shorter than its inserts' waits for
/// each other, which it must never give up (they are its own, alive: given up, an insert
/// starts again out of turn and may decide otherwise than in turn, as 1 of 900 posts under a
/// disclaimer did on a slow machine).
const ALONE: Duration = Duration::from_millis(1);

/// `depth` stores on the cluster at `store_arg` sharing their links to the nodes, for a
/// [`Pipeline`] that gives up another writer's pending node after `pending_timeout`.
fn pipeline_stores(
    store_arg: &str,
    config: &DedupConfig,
    depth: usize,
    pending_timeout: Duration,
) -> Vec<Box<dyn ForestStore + Send>> {
    let address = RedisAddress::parse(store_arg).unwrap();
    RedisStore::connect_several(&address, config, depth)
        .unwrap()
        .into_iter()
        .map(|store| {
            Box::new(store.with_pending_timeout(pending_timeout)) as Box<dyn ForestStore + Send>
        })
        .collect()
}

/// Places every document through a [`Pipeline`] of `depth` connections sharing their links
/// to the nodes (see [`pipeline_stores`]), in batches of `batch` as a coordinator does; gives
/// the roots answered.
fn pipeline_all(
    store_arg: &str,
    config: &DedupConfig,
    documents: &[Document],
    (depth, batch): (usize, usize),
    pending_timeout: Duration,
) -> Vec<Fingerprint> {
    let stores = pipeline_stores(store_arg, config, depth, pending_timeout);
    let mut pipeline = Pipeline::new(stores).unwrap();
    let inserts: Vec<(Signature, Timestamp)> = documents
        .iter()
        .map(|document| (document.signature.clone(), document.time))
        .collect();
    inserts
        .chunks(batch)
        .flat_map(|batch| pipeline.place_all(batch).unwrap())
        .map(|placement| placement.root)
        .collect()
}

/// Fails naming how many answers differ and the first few positions, not the whole lists.
fn assert_same_roots(got: &[Fingerprint], expected: &[Fingerprint], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}");
    let differing: Vec<usize> = (0..got.len())
        .filter(|&at| got[at] != expected[at])
        .collect();
    assert!(
        differing.is_empty(),
        "{what}: {} of {} roots differ from the sequential run's, first at {:?}",
        differing.len(),
        got.len(),
        &differing[..differing.len().min(10)]
    );
}

/// Eight inserts of one ordered stream in flight at once decide as one writer placing them in
/// turn: the same roots as the in-memory forest, copies of one text arriving together, stories
/// that expire and come back included.
#[test]
fn a_pipelined_writer_decides_as_the_in_memory_forest() {
    let cluster = RedisCluster::start(3);
    for mode in [Mode::Default, Mode::Seed] {
        cluster.flush_all();
        let config = DedupConfig {
            mode,
            ..Default::default()
        };
        let mut documents = stream(&config, 150, 6, 7);
        // Copies of a text one after the other: the later ones wait for the first's node.
        let repeated: Vec<Document> = documents[..40]
            .iter()
            .map(|document| Document {
                story: document.story,
                signature: document.signature.clone(),
                time: document.time,
            })
            .collect();
        documents.splice(40..40, repeated);
        for (position, document) in documents.iter_mut().enumerate() {
            document.time = T0 + position as Timestamp / 10;
        }
        let expected = sequential_roots(&config, &documents);
        let got = pipeline_all(&cluster.store_arg(), &config, &documents, (8, 500), ALONE);
        assert_same_roots(&got, &expected, &format!("{mode:?}"));
        assert_concurrent_run_sound(&cluster.store_arg(), &config, &documents, &got, 0);
    }
    // A one-day window over twelve days, a document every 864 s: inserts judge expiry each by
    // its own position's time, and raise the shared clock only as far as the earliest one in
    // flight allows.
    cluster.flush_all();
    let (config, documents) = twelve_days_in_a_one_day_window();
    let expected = sequential_roots(&config, &documents);
    let got = pipeline_all(&cluster.store_arg(), &config, &documents, (8, 500), ALONE);
    assert_same_roots(&got, &expected, "expiry");
    // The pipeline's connections are one writer, with one clock (and the low mark).
    let mut clocks = cluster.hash_fields("td:clocks");
    clocks.sort();
    assert_eq!(clocks.len(), 2, "{clocks:?}");
    assert_eq!(clocks[1], "m", "{clocks:?}");
    // Inserts raise the shared clock only as far as the earliest one in flight allows; after
    // the last batch it holds the stream's newest time, as one writer would have left it.
    let newest = documents.last().map_or(T0, |document| document.time);
    let mut store = connect(&cluster.store_arg(), &config);
    assert_eq!(store.advance_to(T0).unwrap(), newest);
}

/// A short report and three longer texts after it, in order: a reprint with a byline, and two
/// pages that each carry the report with a paragraph of their own. The last page shares too
/// little with the other page and the reprint to be their copy, and reaches the story only by
/// containing its first text; those two are its rivals in the evidence, and only once they
/// are settled does it know they are of the same story. 32 in flight decide as one at a time:
/// before an insert waited for the pending nodes whose tree the evidence asks, edges or not,
/// the last page of such stories, placed while the two were pending, started a story of its
/// own (9 to 14 of neardup-dev's 21,666 documents).
#[test]
fn a_pipelined_insert_waits_for_earlier_candidates_it_has_no_edge_to() {
    let cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    let signer = Signer::new(&config);
    let mut rng = SmallRng::seed_from_u64(61);
    // A short paragraph: three sentences of a story.
    let paragraph =
        |rng: &mut SmallRng| -> String { story(rng).split_inclusive('。').take(3).collect() };
    let mut documents = Vec::new();
    for number in 0..60 {
        let report = paragraph(&mut rng);
        let texts = [
            report.clone(),
            format!("（本报记者 王{number}）{report}"),
            format!("{report}\n{}", paragraph(&mut rng)),
            format!("　　{report}\n{}", paragraph(&mut rng)),
        ];
        for (copy, content) in texts.into_iter().enumerate() {
            documents.push(Document::signed(
                &signer,
                format!("{number}-{copy}"),
                content,
                number,
                T0 + (number * 4 + copy) as Timestamp * 3_600,
            ));
        }
    }
    let expected = sequential_roots(&config, &documents);
    // The texts are what the test is about: one at a time, the last page joins its story
    // through the first report.
    let whole = expected
        .chunks(4)
        .filter(|story| story.iter().all(|&root| root == story[0]))
        .count();
    assert_eq!(whole, 60, "stories whole one at a time");
    let got = pipeline_all(&cluster.store_arg(), &config, &documents, (32, 500), ALONE);
    assert_same_roots(&got, &expected, "pages after a reprint");
}

/// The connections of one writer share a link to each node, which sends their requests
/// together: each still gets its own replies. Eight connections take tickets and post orders
/// at once, round after round, each its own count of them: if a reply went to another
/// request of the group, the numbers handed out would overlap or leave a gap.
#[test]
fn connections_sharing_links_get_their_own_replies() {
    const CONNECTIONS: usize = 8;
    const ROUNDS: usize = 200;
    let cluster = RedisCluster::start(3);
    let address = RedisAddress::parse(&cluster.store_arg()).unwrap();
    let stores =
        RedisStore::connect_several(&address, &DedupConfig::default(), CONNECTIONS).unwrap();
    let together = Arc::new(Barrier::new(CONNECTIONS));
    let workers: Vec<_> = stores
        .into_iter()
        .enumerate()
        .map(|(at, mut store)| {
            let together = Arc::clone(&together);
            std::thread::spawn(move || {
                let (tickets, posts) = (1u64 << at, at as u64 + 1);
                let mut taken = Vec::new();
                for _ in 0..ROUNDS {
                    together.wait();
                    let last_ticket = store.take_tickets(tickets).unwrap();
                    let first_post = store.take_post_orders(posts).unwrap();
                    taken.push((
                        last_ticket + 1 - tickets..=last_ticket,
                        first_post..=first_post + posts - 1,
                    ));
                }
                taken
            })
        })
        .collect();
    let (mut tickets, mut posts): (Vec<_>, Vec<_>) = workers
        .into_iter()
        .flat_map(|worker| worker.join().unwrap())
        .unzip();
    for (what, numbers) in [("tickets", &mut tickets), ("post orders", &mut posts)] {
        numbers.sort_by_key(|range| *range.start());
        for pair in numbers.windows(2) {
            assert_eq!(
                *pair[1].start(),
                pair[0].end() + 1,
                "{what} handed out twice or never: {:?} then {:?}",
                pair[0],
                pair[1]
            );
        }
    }
}

/// The same text with its documents dated as they were published (out of arrival order, over
/// three weeks, against the default 7-day window): many are late, start stories at the
/// window's edge and expire. 32 inserts in flight decide exactly as one insert at a time on
/// the same store.
#[test]
fn a_pipelined_writer_decides_as_one_at_a_time_on_late_documents() {
    let cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    let (_, docs) = crate::server_api::corpus(35, 2000);
    let first = docs.iter().map(|doc| doc.published_at).min().unwrap_or(T0);
    // Spread over about three weeks (the corpus's own times span under six days).
    let documents = corpus_documents(&config, &docs, |_, doc| T0 + (doc.published_at - first) * 4);
    let newest = documents
        .iter()
        .map(|document| document.time)
        .max()
        .unwrap_or(T0);
    assert!(
        newest - T0 > 3 * config.window_seconds() as Timestamp,
        "too short a span to expire"
    );
    let one_at_a_time = pipeline_all(&cluster.store_arg(), &config, &documents, (1, 40), ALONE);
    cluster.flush_all();
    let got = pipeline_all(&cluster.store_arg(), &config, &documents, (32, 40), ALONE);
    assert_same_roots(&got, &one_at_a_time, "late documents");
}

/// Texts that share much with other stories (the service tests' corpus: sentences drawn from a
/// shared pool, headlines of one template, place names) crowd their keys' postings past the
/// cap: 32 inserts in flight, in batches of 40 as a busy coordinator gets them, still decide
/// as one writer, though later inserts of a batch post under a key before earlier ones read
/// it, and the inserts' posts land in any order (before key postings were ordered by the
/// sequence and kept room for the later inserts, 18 to 20 of these 20,000 roots differed).
#[test]
fn a_pipelined_writer_decides_as_one_on_crowded_key_postings() {
    let cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    let (_, docs) = crate::server_api::corpus(35, 8000);
    let documents = corpus_documents(&config, &docs[..docs.len().min(20_000)], |position, _| {
        T0 + position as Timestamp
    });
    let expected = sequential_roots(&config, &documents);
    let got = pipeline_all(&cluster.store_arg(), &config, &documents, (32, 40), ALONE);
    assert_same_roots(&got, &expected, "crowded postings");
}

/// Posts of a dozen characters under one portal's disclaimer (most of each text), reposts of
/// some, and stories under it too: the rule for text that other stories carry decides most of
/// them (issue 34), and asks the trees of the texts that carry the disclaimer, pending ones
/// among them. 32 inserts in flight decide as one writer in turn; the posts stay apart (before
/// the rule they all joined a few stories through the disclaimer).
#[test]
fn a_pipelined_writer_decides_as_one_on_posts_under_a_disclaimer() {
    const DISCLAIMER: &str = "特别声明：以上文章内容仅代表作者本人观点，不代表本网观点或立场。\
        如有关于作品内容、版权或其它问题请于作品发表后的30日内与本网联系，我们将及时处理。";
    let cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    let signer = Signer::new(&config);
    let mut rng = SmallRng::seed_from_u64(34);
    let characters: Vec<char> = story(&mut rng).chars().filter(|&c| c != '。').collect();
    let mut posts: Vec<(usize, String)> = Vec::new();
    let mut documents = Vec::new();
    for position in 0..900 {
        let (story_id, text) = match position % 5 {
            // A story under the disclaimer: a story of its own, longer than the disclaimer.
            0 | 1 if position < 30 || position % 5 == 0 => (position, story(&mut rng)),
            4 if !posts.is_empty() => {
                let (story_id, post) = posts[rng.random_range(0..posts.len())].clone();
                (story_id, format!("转发：{post}"))
            }
            _ => {
                let post: String = (0..12)
                    .map(|_| characters[rng.random_range(0..characters.len())])
                    .chain(['。'])
                    .collect();
                posts.push((position, post.clone()));
                (position, post)
            }
        };
        documents.push(Document::signed(
            &signer,
            format!("d{position}"),
            format!("{text}\n{DISCLAIMER}"),
            story_id,
            T0 + position as Timestamp,
        ));
    }
    let expected = sequential_roots(&config, &documents);
    let got = pipeline_all(&cluster.store_arg(), &config, &documents, (32, 40), ALONE);
    assert_same_roots(&got, &expected, "posts under a disclaimer");
    let post_roots: HashSet<Fingerprint> = posts
        .iter()
        .map(|&(position, _)| expected[position])
        .collect();
    assert!(
        post_roots.len() * 10 >= posts.len() * 9,
        "{} posts in {} stories",
        posts.len(),
        post_roots.len()
    );
}

/// The service tests' corpus documents, signed under `config`, each at the time `time_of`
/// gives it from its position and itself.
fn corpus_documents(
    config: &DedupConfig,
    docs: &[crate::server_api::Doc],
    time_of: impl Fn(usize, &crate::server_api::Doc) -> Timestamp,
) -> Vec<Document> {
    let signer = Signer::new(config);
    docs.iter()
        .enumerate()
        .map(|(position, doc)| {
            let time = time_of(position, doc);
            Document::signed(
                &signer,
                doc.id.clone(),
                doc.content.clone(),
                doc.story,
                time,
            )
        })
        .collect()
}

/// A one-day window, and 1,200 documents over 12 days, copies of a story scattered over all
/// of them: many a copy arrives after its story has left the window and starts a cluster
/// again.
fn twelve_days_in_a_one_day_window() -> (DedupConfig, Vec<Document>) {
    let config = DedupConfig {
        window: Duration::from_secs(86_400),
        ..Default::default()
    };
    let mut documents = stream(&config, 200, 6, 31);
    for (position, document) in documents.iter_mut().enumerate() {
        document.time = T0 + position as Timestamp * 12 * 86_400 / 1_200;
    }
    (config, documents)
}

#[test]
fn expiry_matches_the_in_memory_forest_and_the_sweep_deletes_old_nodes() {
    let cluster = RedisCluster::start(3);
    let (config, documents) = twelve_days_in_a_one_day_window();
    let expected = sequential_roots(&config, &documents);
    let mut store = connect(&cluster.store_arg(), &config);
    let got = place_all(&mut store, &documents);
    assert_eq!(got, expected);
    // Stories whose copies ended in more than one cluster: split by expiry, since no other
    // story is near them.
    let mut story_roots: HashMap<usize, HashSet<Fingerprint>> = HashMap::new();
    for (document, root) in documents.iter().zip(&got) {
        story_roots.entry(document.story).or_default().insert(*root);
    }
    let restarted = story_roots.values().filter(|roots| roots.len() > 1).count();
    assert!(
        restarted > 50,
        "only {restarted} stories restarted: expiry was not exercised"
    );
    // Whatever is left is within the window plus the sweep's grace and hour partitions.
    let newest = documents.last().map_or(T0, |document| document.time);
    let nodes = store.dump().unwrap();
    assert!(!nodes.is_empty());
    for node in &nodes {
        assert!(
            node.last_seen >= newest - 86_400 - 3 * 3_600,
            "{} last seen {} s before the newest time was not swept",
            node.fingerprint,
            newest - node.last_seen
        );
    }
    assert!(
        nodes.len() < 400,
        "{} nodes left after the sweep",
        nodes.len()
    );
    // A text that came back after expiry got a new answer: its node holds the last one.
    let last_answers: HashMap<Fingerprint, Fingerprint> = documents
        .iter()
        .map(|document| document.signature.fingerprint)
        .zip(got)
        .collect();
    let acknowledged: Vec<_> = last_answers.into_iter().collect();
    check_invariants(&mut store, &config, &acknowledged, newest - 86_400);

    // Issue 33, item 1: a text, another text at its fingerprint a day after its story left
    // the window (before the sweep deleted the expired root, within its grace hour), and the
    // first text again after the sweep. In default mode the other text gets a story id of its
    // own and the first text resumes its story; seed mode knows no text, so the fingerprint is
    // the story. As in memory.
    for mode in [Mode::Default, Mode::Seed] {
        cluster.flush_all();
        let config = DedupConfig {
            mode,
            ..config.clone()
        };
        let texts = stream(&config, 2, 1, 9);
        let value = texts[0].signature.fingerprint;
        let at = |text: usize, later: Timestamp| Document {
            story: text,
            signature: Signature {
                fingerprint: value,
                sketch: texts[text].signature.sketch.clone(),
                reason: None,
            },
            time: T0 + later,
        };
        let returns = [at(0, 0), at(1, 86_400 + 60), at(0, 10 * 86_400)];
        let expected = sequential_roots(&config, &returns);
        let other = match mode {
            Mode::Default => Fingerprint(value.0 ^ 1),
            Mode::Seed => value,
        };
        assert_eq!(expected, [value, other, value], "{mode:?}");
        let mut store = connect(&cluster.store_arg(), &config);
        assert_eq!(place_all(&mut store, &returns), expected, "{mode:?}");
    }
}

/// Two writers whose streams are far apart in event time, as in a backfill split between
/// processes that run at different speeds: each judges expiry by its own clock, and the sweep
/// waits for the writer behind, so the copies the slower writer places still join the stories
/// of its own window, as one writer placing the documents in date order would. (With one
/// shared clock, the faster writer's made every document of the slower one late: its stories
/// had left the window, and each copy started a story of its own.) A writer holds the sweep
/// back from the moment it connects, one that stops only for its lease, and one that joins
/// behind the others starts at the oldest clock of those alive.
#[test]
fn a_writer_behind_another_in_event_time_keeps_its_window() {
    const DAY: Timestamp = 86_400;
    let cluster = RedisCluster::start(3);
    let config = DedupConfig {
        window: Duration::from_secs(DAY as u64),
        ..Default::default()
    };
    let signer = Signer::new(&config);
    let mut rng = SmallRng::seed_from_u64(41);
    // 60 stories, one every half day: the first writer places the originals, the second a
    // copy of each, dated as its original.
    let document = |content: String, story: usize| {
        let time = T0 + story as Timestamp * DAY / 2;
        Document::signed(&signer, format!("{story}"), content, story, time)
    };
    let (originals, copies): (Vec<Document>, Vec<Document>) = (0..60)
        .map(|story_number| {
            let base = story(&mut rng);
            (
                document(variant(&base, 0), story_number),
                document(variant(&base, 1 + story_number % 4), story_number),
            )
        })
        .unzip();
    // Both connect; the first writer runs thirty days ahead, thirty windows, before the
    // second places its first document.
    let mut behind = connect(&cluster.store_arg(), &config);
    let mut ahead = connect(&cluster.store_arg(), &config);
    let original_roots = place_all(&mut ahead, &originals);
    let copy_roots = place_all(&mut behind, &copies);
    let split: Vec<usize> = (0..60)
        .filter(|&story| copy_roots[story] != original_roots[story])
        .collect();
    assert!(
        split.is_empty(),
        "the copies of stories {split:?} did not join their originals"
    );
    let stories: HashSet<Fingerprint> = original_roots.iter().copied().collect();
    assert_eq!(stories.len(), 60, "different stories joined");
    // Both writers have caught up: the sweep deleted what left the window of the older clock.
    let newest = T0 + 59 * DAY / 2;
    let nodes = behind.dump().unwrap();
    assert!(
        nodes.len() < 12,
        "{} nodes left: the sweep did not follow",
        nodes.len()
    );
    for node in &nodes {
        assert!(
            node.last_seen >= newest - DAY - 3 * 3_600,
            "{} last seen {} s before the newest time was not swept",
            node.fingerprint,
            newest - node.last_seen
        );
    }

    // A writer that stops holds the sweep back for its lease only.
    cluster.flush_all();
    let later = stream(&config, 3, 1, 43);
    let mut stopped =
        connect(&cluster.store_arg(), &config).with_writer_lease(Duration::from_secs(4));
    let mut going = connect(&cluster.store_arg(), &config);
    let stored = |store: &mut RedisStore, node: Fingerprint| {
        store
            .dump()
            .unwrap()
            .iter()
            .any(|stored| stored.fingerprint == node)
    };
    let old = place(&mut stopped, &later[0].signature, T0, new_token())
        .unwrap()
        .node;
    place(&mut going, &later[1].signature, T0 + 10 * DAY, new_token()).unwrap();
    assert!(
        stored(&mut going, old),
        "swept while its writer's lease ran"
    );
    drop(stopped);
    std::thread::sleep(Duration::from_secs(5));
    place(
        &mut going,
        &later[2].signature,
        T0 + 10 * DAY + 60,
        new_token(),
    )
    .unwrap();
    assert!(
        !stored(&mut going, old),
        "the sweep still waits for a writer whose lease ran out"
    );
    // A writer that joins now starts at the oldest clock of those alive, not at its first
    // document's time: the sweep may have deleted what is older.
    let mut joining = connect(&cluster.store_arg(), &config);
    assert_eq!(joining.advance_to(T0).unwrap(), T0 + 10 * DAY + 60);
}

#[test]
fn other_settings_are_refused() {
    let cluster = RedisCluster::start(3);
    let address = RedisAddress::parse(&cluster.store_arg()).unwrap();
    RedisStore::connect(&address, &DedupConfig::default()).unwrap();
    let other = DedupConfig {
        max_distance: 4,
        ..Default::default()
    };
    let error = RedisStore::connect(&address, &other)
        .err()
        .expect("refused");
    assert!(
        error.to_string().contains("other [dedup] settings"),
        "{error}"
    );
    // Stores earlier versions wrote: key postings as lists, with no layout line in their
    // settings; one clock shared by every writer (layout 2).
    let settings = toml::to_string(&DedupConfig::default()).unwrap();
    for earlier in [
        settings.clone(),
        format!("# tantivy-dedup store layout 2\n{settings}"),
    ] {
        cluster.flush_all();
        cluster.set("td:config", &earlier);
        let error = RedisStore::connect(&address, &DedupConfig::default())
            .err()
            .expect("refused");
        assert!(
            error
                .to_string()
                .contains("earlier version of tantivy-dedup"),
            "{error}"
        );
    }
}

/// What one writer thread does, in order: a document, or a burst document released with the
/// other writers' at a barrier.
enum Step {
    Insert(usize),
    Burst(usize),
}

/// Runs `plans` on one thread each, with a connection of `stores` each; gives (document, root)
/// pairs and how many attempts the cluster refused.
fn run_writers(
    stores: Vec<RedisStore>,
    documents: &Arc<Vec<Document>>,
    plans: Vec<Vec<Step>>,
) -> (Vec<(usize, Fingerprint)>, u32) {
    assert_eq!(stores.len(), plans.len());
    let barrier = Arc::new(Barrier::new(plans.len()));
    let handles: Vec<_> = plans
        .into_iter()
        .zip(stores)
        .map(|(plan, mut store)| {
            let documents = Arc::clone(documents);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                plan.into_iter()
                    .map(|step| {
                        let number = match step {
                            Step::Insert(number) => number,
                            Step::Burst(number) => {
                                barrier.wait();
                                number
                            }
                        };
                        let (root, failures) =
                            place_until_acknowledged(&mut store, &documents[number]);
                        ((number, root), failures)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .flat_map(|handle| handle.join().unwrap())
        .collect();
    let failures = results.iter().map(|(_, failures)| failures).sum();
    (
        results.into_iter().map(|(answer, _)| answer).collect(),
        failures,
    )
}

#[test]
fn eight_writers_keep_the_invariants_and_split_no_story() {
    const WRITERS: usize = 8;
    let cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    // 9,200 documents in 920 stories, dealt round-robin, then 100 bursts of 8 (800 more):
    // half the bursts one text 8 times, half 8 different reposts of one story, each burst
    // released on all writers at once.
    let mut documents = stream(&config, 920, 10, 11);
    let bursts = stream(&config, 100, WRITERS, 12);
    let mut by_story: Vec<Vec<Document>> = (0..100).map(|_| Vec::new()).collect();
    for document in bursts {
        by_story[document.story].push(document);
    }
    let mut plans: Vec<Vec<Step>> = (0..WRITERS).map(|_| Vec::new()).collect();
    for number in 0..documents.len() {
        plans[number % WRITERS].push(Step::Insert(number));
    }
    let spacing = documents.len() / 100;
    let last_time = documents.last().map_or(T0, |document| document.time);
    for (burst, mut copies) in by_story.into_iter().enumerate() {
        if burst % 2 == 0 {
            let first = copies[0].signature.clone();
            for copy in &mut copies {
                copy.signature = first.clone();
            }
        }
        for (writer, mut copy) in copies.into_iter().enumerate() {
            copy.story += 920;
            copy.time = last_time + burst as Timestamp;
            let number = documents.len();
            documents.push(copy);
            // Bursts sit among the writer's ordinary documents, at the same place for all.
            let at = (burst * spacing / WRITERS).min(plans[writer].len());
            plans[writer].insert(at + burst, Step::Burst(number));
        }
    }
    assert_eq!(documents.len(), 10_000);
    let documents = Arc::new(documents);
    let stores = (0..plans.len())
        .map(|_| connect(&cluster.store_arg(), &config))
        .collect();
    let (answers, _) = run_writers(stores, &documents, plans);
    assert_eq!(answers.len(), documents.len());
    let mut concurrent = vec![Fingerprint(0); documents.len()];
    for &(number, root) in &answers {
        concurrent[number] = root;
    }
    assert_concurrent_run_sound(
        &cluster.store_arg(),
        &config,
        &documents,
        &concurrent,
        1_000,
    );
}

/// What concurrent writers must leave, given the root each document was answered
/// (`concurrent`): the forest's invariants, every document counted once, and every story that
/// the sequential run (in order, in memory) keeps in one cluster in one cluster too; the
/// sequential run keeps at least `whole_at_least` whole.
fn assert_concurrent_run_sound(
    store_arg: &str,
    config: &DedupConfig,
    documents: &[Document],
    concurrent: &[Fingerprint],
    whole_at_least: usize,
) {
    let mut store = connect(store_arg, config);
    let acknowledged: Vec<_> = documents
        .iter()
        .zip(concurrent)
        .map(|(document, &root)| (document.signature.fingerprint, root))
        .collect();
    let nodes = check_invariants(&mut store, config, &acknowledged, Timestamp::MIN);
    let stored_documents: i64 = nodes.iter().map(|node| node.documents).sum();
    assert_eq!(
        stored_documents,
        documents.len() as i64,
        "every document counted once"
    );
    let sequential = sequential_roots(config, documents);
    let mut stories: HashMap<usize, (HashSet<Fingerprint>, HashSet<Fingerprint>)> = HashMap::new();
    for (number, document) in documents.iter().enumerate() {
        let entry = stories.entry(document.story).or_default();
        entry.0.insert(sequential[number]);
        entry.1.insert(concurrent[number]);
    }
    let whole = stories
        .values()
        .filter(|(sequential, _)| sequential.len() == 1)
        .count();
    let split: Vec<usize> = stories
        .iter()
        .filter(|(_, (sequential, concurrent))| sequential.len() == 1 && concurrent.len() > 1)
        .map(|(&story, _)| story)
        .collect();
    assert!(
        whole >= whole_at_least,
        "the sequential run keeps {whole} of {} stories whole",
        stories.len()
    );
    assert!(split.is_empty(), "stories split by concurrency: {split:?}");
}

/// Two writers, each with eight inserts in flight, place their halves of one stream at once
/// (a story's copies dealt to both): the forest's invariants hold, every document is counted
/// once, and no story that one writer in turn keeps whole is split.
#[test]
fn two_pipelined_writers_keep_the_invariants_and_split_no_story() {
    let cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    let documents = Arc::new(stream(&config, 400, 10, 13));
    let store_arg = cluster.store_arg();
    let handles: Vec<_> = (0..2)
        .map(|writer| {
            let documents = Arc::clone(&documents);
            let store_arg = store_arg.clone();
            let config = config.clone();
            std::thread::spawn(move || {
                let numbers: Vec<usize> = (writer..documents.len()).step_by(2).collect();
                let share: Vec<Document> = numbers
                    .iter()
                    .map(|&number| Document {
                        story: documents[number].story,
                        signature: documents[number].signature.clone(),
                        time: documents[number].time,
                    })
                    .collect();
                let roots = pipeline_all(&store_arg, &config, &share, (8, 500), PENDING_TIMEOUT);
                numbers.into_iter().zip(roots).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut concurrent = vec![Fingerprint(0); documents.len()];
    for handle in handles {
        for (number, root) in handle.join().unwrap() {
            concurrent[number] = root;
        }
    }
    assert_concurrent_run_sound(&store_arg, &config, &documents, &concurrent, 390);
}

#[test]
fn a_node_killed_and_restarted_during_ingest_loses_no_acknowledged_insert() {
    const WRITERS: usize = 4;
    let mut cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    let documents = Arc::new(stream(&config, 300, 10, 21));
    let mut plans: Vec<Vec<Step>> = (0..WRITERS).map(|_| Vec::new()).collect();
    for number in 0..documents.len() {
        plans[number % WRITERS].push(Step::Insert(number));
    }
    // Connections sharing their links to the nodes: a connection dropped under a group of
    // requests fails all of them, and each sends its commands again on its own.
    let address = RedisAddress::parse(&cluster.store_arg()).unwrap();
    let stores = RedisStore::connect_several(&address, &config, WRITERS)
        .unwrap()
        .into_iter()
        .map(|store| store.with_pending_timeout(Duration::from_secs(2)))
        .collect();
    let (answers, refused) = std::thread::scope(|scope| {
        let writers = scope.spawn(|| run_writers(stores, &documents, plans));
        std::thread::sleep(Duration::from_millis(700));
        cluster.stop_node(1);
        std::thread::sleep(Duration::from_millis(1_500));
        cluster.restart_node(1);
        writers.join().unwrap()
    });
    assert_eq!(answers.len(), documents.len());
    assert!(
        refused > 0,
        "the outage refused no insert: it came too late or too early"
    );
    let mut store = connect(&cluster.store_arg(), &config);
    let acknowledged: Vec<_> = answers
        .iter()
        .map(|&(number, root)| (documents[number].signature.fingerprint, root))
        .collect();
    check_invariants(&mut store, &config, &acknowledged, Timestamp::MIN);
    assert_eq!(
        documents_counted(&mut store),
        answers.len() as i64,
        "a retried insert counted twice"
    );
}

/// `Deduplicator::run` through a pipeline, a node stopped while a batch is being placed: the
/// run reports the decisions of the lines before the failure, in order and each as the
/// in-memory forest decides it, then returns the store's error; nothing after it is reported.
#[test]
fn a_pipelined_run_cut_by_a_store_failure_reports_what_it_placed_before() {
    use std::ops::ControlFlow;
    use tantivy_dedup::Deduplicator;
    use tantivy_dedup::article::ArticleReader;

    let mut cluster = RedisCluster::start(3);
    let config = DedupConfig::default();
    let mut rng = SmallRng::seed_from_u64(47);
    let bases: Vec<String> = (0..1_500).map(|_| story(&mut rng)).collect();
    let lines: String = (0..6_000)
        .map(|number| {
            let base = &bases[rng.random_range(0..bases.len())];
            let line = serde_json::json!({
                "id": format!("doc-{number}"),
                "content": variant(base, rng.random_range(0..5)),
                "published_at": T0 + number as i64 * 10,
            });
            format!("{line}\n")
        })
        .collect();
    let articles = ArticleReader::default();
    let mut expected = Vec::new();
    Deduplicator::new(config.clone())
        .unwrap()
        .run(lines.as_bytes(), &articles, |_, decision| {
            expected.push(decision.unwrap().root);
            ControlFlow::Continue(())
        })
        .unwrap();

    let stores = pipeline_stores(&cluster.store_arg(), &config, 16, PENDING_TIMEOUT);
    let mut dedup = Deduplicator::with_pipeline(config, Pipeline::new(stores).unwrap()).unwrap();
    let mut reported = Vec::new();
    let outcome = std::thread::scope(|scope| {
        let (first_batch_done, wait_for_it) = std::sync::mpsc::channel();
        let cluster = &mut cluster;
        // The node stops once the second batch (lines 2,049 to 4,096) has published a hundred
        // nodes or so (four keys each, and more), whatever the machine's speed.
        scope.spawn(move || stop_a_node_after_400_keys_more(cluster, wait_for_it));
        // The sender is dropped when the run ends, however it ends, so the thread above ends.
        let reported = &mut reported;
        dedup.run(lines.as_bytes(), &articles, move |number, decision| {
            reported.push((number, decision.unwrap().root));
            if number == tantivy_dedup::dedup::BATCH_SIZE as u64 {
                let _ = first_batch_done.send(());
            }
            ControlFlow::Continue(())
        })
    });
    assert!(outcome.is_err(), "the run went on past the store's failure");
    // Cut within the second batch: what it placed before the failure is reported too.
    assert!(
        reported.len() > tantivy_dedup::dedup::BATCH_SIZE && reported.len() < expected.len(),
        "{} lines reported",
        reported.len()
    );
    for (at, &(number, root)) in reported.iter().enumerate() {
        assert_eq!(
            number,
            at as u64 + 1,
            "lines reported in order, none skipped"
        );
        assert_eq!(
            root, expected[at],
            "line {number} as the in-memory forest places it"
        );
    }
    eprintln!(
        "a store failure cut the run after {} of {} lines",
        reported.len(),
        expected.len()
    );
}

/// Once `start` says so (or its sender is gone), waits until the cluster holds 400 keys more
/// (two minutes at most), then stops node 1: a store failure in the middle of a run.
fn stop_a_node_after_400_keys_more(
    cluster: &mut RedisCluster,
    start: std::sync::mpsc::Receiver<()>,
) {
    if start.recv_timeout(Duration::from_secs(300)).is_ok() {
        let before = cluster.key_count();
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while cluster.key_count() < before + 400 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    cluster.stop_node(1);
}

/// The command line: two `dedup --store` processes at once, one `ingest --store` into its own
/// shard, and a mistyped address.
#[test]
fn processes_share_the_forest_through_the_command_line() {
    const BIN: &str = env!("CARGO_BIN_EXE_tantivy-dedup");
    let cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(41);
    let bases: Vec<String> = (0..40).map(|_| story(&mut rng)).collect();
    // Each half holds copies of every story, so each story's copies meet across processes.
    for half in 0..2 {
        let lines: Vec<String> = bases
            .iter()
            .enumerate()
            .flat_map(|(number, base)| {
                (0..3).map(move |copy| {
                    serde_json::json!({
                        "id": format!("{half}-{number}-{copy}"),
                        "content": variant(base, half * 3 + copy),
                        "published_at": "2026-11-01T08:00:00Z",
                    })
                    .to_string()
                })
            })
            .collect();
        std::fs::write(
            dir.path().join(format!("half{half}.jsonl")),
            lines.join("\n"),
        )
        .unwrap();
    }
    let store = cluster.store_arg();
    // Both started before either is waited for: they run at the same time.
    let children: Vec<_> = (0..2)
        .map(|half| {
            std::process::Command::new(BIN)
                .args(["dedup", "--store", &store])
                .arg(dir.path().join(format!("half{half}.jsonl")))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let processes: Vec<_> = children
        .into_iter()
        .map(|child| child.wait_with_output().unwrap())
        .collect();
    let mut roots: HashMap<String, HashSet<String>> = HashMap::new();
    for output in &processes {
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let decision: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = decision["id"].as_str().unwrap();
            let story = id.split('-').nth(1).unwrap().to_owned();
            roots
                .entry(story)
                .or_default()
                .insert(decision["root"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(roots.len(), 40);
    for (story, roots) in &roots {
        assert_eq!(roots.len(), 1, "story {story} has roots {roots:?}");
    }

    // An ingest process writes its own shard and places its documents in the same forest.
    let shard = dir.path().join("shard-a");
    let ingest = std::process::Command::new(BIN)
        .args(["ingest", "--store", &store, "--index"])
        .arg(&shard)
        .arg(dir.path().join("half0.jsonl"))
        .output()
        .unwrap();
    assert!(
        ingest.status.success(),
        "{}",
        String::from_utf8_lossy(&ingest.stderr)
    );
    assert!(shard.join("meta.json").exists());
    let summary = String::from_utf8_lossy(&ingest.stdout);
    assert!(summary.contains("120"), "{summary}");

    let refused = std::process::Command::new(BIN)
        .args(["dedup", "--store", "127.0.0.1:7000", "-"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("expected redis://HOST:PORT"), "{message}");
}

/// `DedupIndex::ingest` on the shared store with 16 inserts in flight decides every line as
/// an index with its forest in memory does: stories and their reposts in a shuffled order,
/// with ids sent again (the same text: unchanged; another: a replacement, often in the same
/// batch), lines without a time, bad lines, and commits every 300 lines.
#[test]
fn an_index_with_inserts_in_flight_decides_as_one_with_its_forest_in_memory() {
    use std::ops::ControlFlow;
    use tantivy_dedup::engine::DedupIndex;
    let cluster = RedisCluster::start(3);
    let mut rng = SmallRng::seed_from_u64(43);
    let bases: Vec<String> = (0..150).map(|_| story(&mut rng)).collect();
    let mut lines: Vec<String> = Vec::new();
    for number in 0..1_800usize {
        let line = match number % 97 {
            13 => "{\"id\": \"bad".to_owned(),
            // Sent again as it was: unchanged.
            29 | 60 => lines[number - 7].clone(),
            _ => {
                let story = rng.random_range(0..bases.len());
                // A fifth of the ids come again: many a batch holds two versions of one id.
                let id = match rng.random_range(0..5) {
                    0 => format!("again-{}", rng.random_range(0..40)),
                    _ => format!("{number}"),
                };
                let mut json = serde_json::json!({
                    "id": id,
                    "content": variant(&bases[story], rng.random_range(0..5)),
                });
                if number == 0 || rng.random_range(0..4) > 0 {
                    json["published_at"] = serde_json::json!(T0 + number as Timestamp * 60);
                }
                json.to_string()
            }
        };
        lines.push(line);
    }
    let input = lines.join("\n");
    let dir = tempfile::tempdir().unwrap();
    let address = RedisAddress::parse(&cluster.store_arg()).unwrap();
    // Each line's decision, then each id's live document: its time (its own, or the one it
    // was given), node and root.
    let decide = |name: &str, store: Option<Arc<dyn tantivy_dedup::forest::SharedForest>>| {
        let path = dir.path().join(name);
        let mut index = DedupIndex::open_or_create_with_store(&path, None, store, 16).unwrap();
        let mut decisions = Vec::new();
        index
            .ingest(input.as_bytes(), &path, Some(300), |line, outcome| {
                decisions.push((line, outcome.map_err(|error| error.to_string())));
                ControlFlow::Continue(())
            })
            .unwrap();
        index.commit().unwrap();
        let searcher = index.searcher();
        let mut live: Vec<_> = decisions
            .iter()
            .filter_map(|(_, decision)| Some(decision.as_ref().ok()?.id.clone()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|id| {
                let document = searcher.document(&id).unwrap().unwrap();
                (id, document.published_at, document.simhash, document.root)
            })
            .collect();
        live.sort();
        (decisions, live, index.places_in_flight())
    };
    let (in_memory, memory_live, one_at_a_time) = decide("memory", None);
    let (in_flight, store_live, several) = decide("store", Some(Arc::new(address)));
    assert!(!one_at_a_time && several);
    assert_eq!(store_live, memory_live, "the live documents");
    assert_eq!(in_memory.len(), lines.len());
    let changes: HashSet<String> = in_memory
        .iter()
        .filter_map(|(_, decision)| Some(format!("{:?}", decision.as_ref().ok()?.change)))
        .collect();
    assert_eq!(
        changes.len(),
        3,
        "added, replaced and unchanged: {changes:?}"
    );
    let differing: Vec<_> = in_memory
        .iter()
        .zip(&in_flight)
        .filter(|(memory, store)| memory != store)
        .take(3)
        .collect();
    assert!(differing.is_empty(), "{differing:#?}");
    assert_eq!(in_flight.len(), in_memory.len());
}

/// `DedupIndex::ingest` with 16 inserts in flight, a Redis node stopped part-way: it reports
/// a prefix of the lines, each decided as an index with its forest in memory decides it (a
/// re-send after the cut, answered from the index alone, is not reported either), then the
/// store's error.
#[test]
fn an_index_ingest_cut_by_a_store_failure_reports_a_prefix() {
    use std::ops::ControlFlow;
    use tantivy_dedup::engine::DedupIndex;
    let mut cluster = RedisCluster::start(3);
    let mut rng = SmallRng::seed_from_u64(53);
    let bases: Vec<String> = (0..600).map(|_| story(&mut rng)).collect();
    let mut lines: Vec<String> = Vec::new();
    for number in 0..4_000usize {
        // Every fifth line sends one 600 lines back again: unchanged (and, its id last seen
        // before the run of lines added together, in the middle of such a run).
        let line = if number % 5 == 4 && number >= 600 {
            lines[number - 600].clone()
        } else {
            serde_json::json!({
                "id": format!("doc-{}", rng.random_range(0..3_000)),
                "content": variant(&bases[rng.random_range(0..bases.len())], rng.random_range(0..5)),
                "published_at": T0 + number as Timestamp * 10,
            })
            .to_string()
        };
        lines.push(line);
    }
    let input = lines.join("\n");
    let dir = tempfile::tempdir().unwrap();
    let decision_of = |outcome: Result<tantivy_dedup::Decision, _>| {
        format!(
            "{:?}",
            outcome.map_err(|error: tantivy_dedup::article::ArticleError| error.to_string())
        )
    };
    let mut expected = Vec::new();
    let memory = dir.path().join("memory");
    DedupIndex::open_or_create_with_store(&memory, None, None, 1)
        .unwrap()
        .ingest(input.as_bytes(), &memory, None, |_, outcome| {
            expected.push(decision_of(outcome));
            ControlFlow::Continue(())
        })
        .unwrap();

    let address = RedisAddress::parse(&cluster.store_arg()).unwrap();
    let path = dir.path().join("store");
    let mut index =
        DedupIndex::open_or_create_with_store(&path, None, Some(Arc::new(address)), 16).unwrap();
    let mut reported = Vec::new();
    let outcome = std::thread::scope(|scope| {
        let (half_done, wait_for_it) = std::sync::mpsc::channel();
        let cluster = &mut cluster;
        // The node stops once the lines after the first 1,000 have published 400 keys or so,
        // whatever the machine's speed.
        scope.spawn(move || stop_a_node_after_400_keys_more(cluster, wait_for_it));
        // The sender is dropped when the run ends, however it ends, so the thread above ends.
        let reported = &mut reported;
        index.ingest(input.as_bytes(), &path, None, move |number, outcome| {
            reported.push((number, decision_of(outcome)));
            if number == 1_000 {
                let _ = half_done.send(());
            }
            ControlFlow::Continue(())
        })
    });
    assert!(outcome.is_err(), "the run went on past the store's failure");
    assert!(
        reported.len() > 1_000 && reported.len() < expected.len(),
        "{} lines reported",
        reported.len()
    );
    for (at, (number, decision)) in reported.iter().enumerate() {
        assert_eq!(
            *number,
            at as u64 + 1,
            "lines reported in order, none skipped"
        );
        assert_eq!(decision, &expected[at], "line {number}");
    }
    eprintln!(
        "a store failure cut the ingest after {} of {} lines",
        reported.len(),
        expected.len()
    );
}

/// A `tantivy-dedup serve --store` process on its own index, killed when dropped.
struct Served {
    child: std::process::Child,
    base: String,
    agent: ureq::Agent,
}

impl Served {
    /// Starts `serve` on a fresh index in `dir`, sharing the forest at `store_arg`; waits
    /// until it listens.
    fn start(dir: &std::path::Path, store_arg: &str) -> Served {
        let log = dir.join("serve.log");
        let (child, base) = spawn_listening(
            std::process::Command::new(env!("CARGO_BIN_EXE_tantivy-dedup"))
                .args(["serve", "--addr", "127.0.0.1:0", "--commit-delay", "20ms"])
                .args(["--store", store_arg, "--index"])
                .arg(dir.join("index"))
                .stderr(std::fs::File::create(&log).unwrap()),
            Some(&log),
        );
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Served { child, base, agent }
    }

    /// POSTs `documents` as one batch: the status and the answer.
    fn try_post(&self, documents: &[serde_json::Value]) -> (u16, serde_json::Value) {
        let body = serde_json::Value::Array(documents.to_vec()).to_string();
        let mut response = self
            .agent
            .post(format!("{}/v1/documents", self.base))
            .header("content-type", "application/json")
            .send(body.as_str())
            .unwrap();
        let text = response.body_mut().read_to_string().unwrap();
        let answer = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        (response.status().as_u16(), answer)
    }

    /// POSTs `documents` as one batch; the answered root of each, in order.
    fn post(&self, documents: &[serde_json::Value]) -> Vec<String> {
        Self::roots(self.try_post(documents), documents.len())
    }

    /// The roots a batch of `documents` documents was answered (a status and an answer, which
    /// must be 200 with every document indexed), in order.
    fn roots((status, answer): (u16, serde_json::Value), documents: usize) -> Vec<String> {
        let text = answer.to_string();
        assert_eq!(status, 200, "{text}");
        assert_eq!(answer["indexed"], documents, "{text}");
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|result| result["root"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The status of `GET path`.
    fn status(&self, path: &str) -> u16 {
        let response = self.agent.get(format!("{}{path}", self.base)).call();
        response.unwrap().status().as_u16()
    }

    /// The root and the cluster size (in this server's shard) of document `id`.
    fn cluster_of(&self, id: &str) -> (String, u64) {
        let mut response = self
            .agent
            .get(format!("{}/v1/documents/{id}", self.base))
            .call()
            .unwrap();
        let text = response.body_mut().read_to_string().unwrap();
        assert_eq!(response.status().as_u16(), 200, "{text}");
        let page: serde_json::Value = serde_json::from_str(&text).unwrap();
        let cluster = &page["cluster"];
        (
            cluster["root"].as_str().unwrap().to_owned(),
            cluster["size"].as_u64().unwrap(),
        )
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_servers_share_the_forest_over_http() {
    const STORIES: usize = 24;
    let cluster = RedisCluster::start(3);
    let store = cluster.store_arg();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let servers: Vec<Served> = dirs
        .iter()
        .map(|dir| Served::start(dir.path(), &store))
        .collect();
    let log = std::fs::read_to_string(dirs[0].path().join("serve.log")).unwrap();
    assert!(log.contains("forest on Redis"), "{log}");

    // Each server gets one batch per round holding a repost of every story; both batches of a
    // round are released at one instant, so each story's copies race across the servers.
    let mut rng = SmallRng::seed_from_u64(43);
    let bases: Vec<String> = (0..STORIES).map(|_| story(&mut rng)).collect();
    let rounds = 3;
    let barrier = Barrier::new(servers.len());
    let answers: Vec<Vec<(String, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = servers
            .iter()
            .enumerate()
            .map(|(number, server)| {
                let (bases, barrier) = (&bases, &barrier);
                scope.spawn(move || {
                    let mut answered = Vec::new();
                    for round in 0..rounds {
                        let batch: Vec<(String, serde_json::Value)> = bases
                            .iter()
                            .enumerate()
                            .map(|(story, base)| {
                                let id = format!("s{number}-{story}-{round}");
                                let document = serde_json::json!({
                                    "id": id,
                                    "content": variant(base, number * rounds + round),
                                    "published_at": "2026-11-01T08:00:00Z",
                                });
                                (id, document)
                            })
                            .collect();
                        let documents: Vec<_> = batch.iter().map(|(_, d)| d.clone()).collect();
                        barrier.wait();
                        let roots = server.post(&documents);
                        answered.extend(batch.into_iter().map(|(id, _)| id).zip(roots));
                    }
                    answered
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // One root per story, whichever server answered; each shard shows it on every copy it
    // holds, with the copies it holds counted.
    let mut roots: HashMap<String, HashSet<String>> = HashMap::new();
    for answered in &answers {
        for (id, root) in answered {
            let story = id.split('-').nth(1).unwrap().to_owned();
            roots.entry(story).or_default().insert(root.clone());
        }
    }
    assert_eq!(roots.len(), STORIES);
    for (story, story_roots) in &roots {
        assert_eq!(
            story_roots.len(),
            1,
            "story {story} has roots {story_roots:?}"
        );
    }
    for (server, answered) in servers.iter().zip(&answers) {
        for (id, root) in answered {
            assert_eq!(server.cluster_of(id), (root.clone(), rounds as u64), "{id}");
        }
    }
}

#[test]
fn a_store_outage_fails_only_the_requests_it_meets() {
    let mut cluster = RedisCluster::start(3);
    let dir = tempfile::tempdir().unwrap();
    let server = Served::start(dir.path(), &cluster.store_arg());
    let mut rng = SmallRng::seed_from_u64(47);
    let bases: Vec<String> = (0..6).map(|_| story(&mut rng)).collect();
    let batch = |copy: usize| -> Vec<serde_json::Value> {
        bases
            .iter()
            .enumerate()
            .map(|(story, base)| {
                serde_json::json!({
                    "id": format!("{story}-{copy}"),
                    "content": variant(base, copy),
                    "published_at": "2026-11-01T08:00:00Z",
                })
            })
            .collect()
    };
    let first = server.post(&batch(0));

    // A master down: the request that needs it is refused as retryable, and nothing else.
    cluster.stop_node(0);
    let (status, answer) = server.try_post(&batch(1));
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["code"], "store_unavailable", "{answer}");
    assert_eq!(server.status("/healthz"), 200);
    assert_eq!(server.cluster_of("0-0").0, first[0]);

    // Back up: the same request, sent again, goes through and joins the first batch's stories.
    // A node just restarted may still miss a reply's timeout on a loaded machine: the answer
    // is then the same retryable refusal, and the client retries as told.
    cluster.restart_node(0);
    let mut answered = server.try_post(&batch(1));
    for _ in 0..20 {
        if answered.0 != 503 {
            break;
        }
        assert_eq!(
            answered.1["error"]["code"], "store_unavailable",
            "{}",
            answered.1
        );
        std::thread::sleep(Duration::from_millis(500));
        answered = server.try_post(&batch(1));
    }
    let second = Served::roots(answered, batch(1).len());
    assert_eq!(second, first);
    for (story, root) in first.iter().enumerate() {
        assert_eq!(server.cluster_of(&format!("{story}-1")), (root.clone(), 2));
    }
}
