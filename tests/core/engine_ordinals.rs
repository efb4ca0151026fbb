//! Cluster numbers kept across searcher generations (`ClusterNumbering`) against numbers built
//! from scratch and a brute-force count of the roots, after random adds, replacements,
//! deletes, commits and merges on a real index on disk; every generation handed out keeps its
//! own numbers and sizes while later ones are made, and an older searcher asked for again
//! gets its own.

use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;
use tantivy::indexer::NoMergePolicy;
use tantivy::schema::{STORED, STRING, Schema, TEXT};
use tantivy::{Index, IndexWriter, Searcher, doc};
use tantivy_dedup::engine::schema::DedupFields;
use tantivy_dedup::engine::{ClusterNumbering, ClusterOrdinals, DedupWriter, NO_CLUSTER};
use tantivy_dedup::{DedupConfig, Mode};
use tempfile::TempDir;

/// Invented stories, different enough never to share a cluster: a document's cluster is its
/// text's.
const TEXTS: [&str; 12] = [
    "地铁十九号线今天上午正式开通试运营，全线共设车站十五座，连接城北居住区与东部产业园。",
    "今年秋粮收购工作已全面展开，各地新增收购网点两百余个，并开通线上预约售粮服务。",
    "成都大熊猫繁育研究基地宣布，今年出生的三只熊猫幼崽已满百日，体重均超过十公斤。",
    "市图书馆自本周起将开放时间延长至晚上十点，并增设自习座位四百个，举办读书分享会。",
    "气象台发布高温橙色预警，预计未来三天最高气温将达到三十九摄氏度以上，注意防暑降温。",
    "海关总署数据显示，前十个月新能源汽车出口量同比增长三成以上，欧洲市场需求旺盛。",
    "历时三年建设的跨江大桥今天实现主桥合龙，大桥全长四点二公里，采用双向六车道设计。",
    "第十届滨海国际马拉松赛鸣枪开跑，来自二十多个国家和地区的三万名选手参赛。",
    "社区养老食堂在老城区陆续开业，老人凭卡就餐可享受八折优惠，还可以预约送餐上门。",
    "物流企业在山区县开通无人机配送航线，包裹从县城仓库送到村级服务站只需二十分钟。",
    "考古工作者发掘出一处距今约五千年的新石器时代聚落遗址，出土陶器石器骨器一千多件。",
    "央行宣布下调金融机构存款准备金率零点五个百分点，释放长期资金约一万亿元。",
];

/// Ids the operations pick from (so that adds replace and deletes find documents).
const IDS: u8 = 24;

#[derive(Debug, Clone)]
enum Op {
    /// Adds (or replaces) document `id` with text `text`.
    Add { id: u8, text: u8 },
    /// Deletes document `id`, if live.
    Delete { id: u8 },
    /// Deletes every live document with text `text`: a whole cluster dies.
    DeleteStory { text: u8 },
    /// Commits, then checks the new generation.
    Commit,
    /// Merges the first `segments` segments (at least two), then checks.
    Merge { segments: u8 },
    /// Asks for an earlier generation again, then checks it.
    Back { generation: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..IDS, 0..TEXTS.len() as u8).prop_map(|(id, text)| Op::Add { id, text }),
        3 => (0..IDS).prop_map(|id| Op::Delete { id }),
        1 => (0..TEXTS.len() as u8).prop_map(|text| Op::DeleteStory { text }),
        3 => Just(Op::Commit),
        1 => (2..5u8).prop_map(|segments| Op::Merge { segments }),
        1 => any::<u8>().prop_map(|generation| Op::Back { generation }),
    ]
}

/// An index on disk with a schema of its own, merged only when told.
struct Store {
    _dir: TempDir,
    index: Index,
    writer: IndexWriter,
    dedup: DedupWriter,
    /// The live documents' texts, by id.
    live: HashMap<u8, u8>,
}

impl Store {
    fn new() -> Store {
        let config = DedupConfig {
            mode: Mode::Seed,
            ..DedupConfig::default()
        };
        let mut builder = Schema::builder();
        let id = builder.add_text_field("id", STRING | STORED);
        let body = builder.add_text_field("body", TEXT);
        DedupFields::add_to(&mut builder, &config).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let index = Index::create_in_dir(dir.path(), builder.build()).unwrap();
        let writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        writer.set_merge_policy(Box::new(NoMergePolicy));
        let dedup = DedupWriter::builder(config)
            .id_field(id)
            .text_fields([body])
            .open(&index)
            .unwrap();
        Store {
            _dir: dir,
            index,
            writer,
            dedup,
            live: HashMap::new(),
        }
    }

    fn add(&mut self, id: u8, text: u8) {
        let schema = self.index.schema();
        let (id_field, body) = (
            schema.get_field("id").unwrap(),
            schema.get_field("body").unwrap(),
        );
        let document = doc!(id_field => id.to_string(), body => TEXTS[text as usize]);
        self.dedup.add_document(&self.writer, document).unwrap();
        self.live.insert(id, text);
    }

    fn delete(&mut self, id: u8) {
        if self.live.remove(&id).is_some() {
            assert!(self.dedup.delete(&self.writer, &id.to_string()).unwrap());
        }
    }

    fn merge(&mut self, segments: usize) {
        let ids = self.index.searchable_segment_ids().unwrap();
        if ids.len() >= 2 {
            let chosen = &ids[..segments.clamp(2, ids.len())];
            self.writer.merge(chosen).wait().unwrap();
            self.dedup.reload().unwrap();
        }
    }
}

/// `ordinals` against numbers built from scratch for `searcher` (the same partition of the
/// live documents, the same sizes) and a count of the roots read from the fast field.
fn check(ordinals: &ClusterOrdinals, searcher: &Searcher) {
    assert!(ordinals.is_for(searcher));
    let fresh = ClusterOrdinals::build(searcher).unwrap();
    let mut by_root: HashMap<u64, u64> = HashMap::new();
    let mut to_fresh: HashMap<u32, u32> = HashMap::new();
    let mut from_fresh: HashMap<u32, u32> = HashMap::new();
    let mut numbered = Vec::new();
    for (ord, segment) in searcher.segment_readers().iter().enumerate() {
        let roots = segment.fast_fields().u64("root").unwrap();
        for doc in segment.doc_ids_alive() {
            let (number, fresh_number) = (
                ordinals.number(ord as u32, doc),
                fresh.number(ord as u32, doc),
            );
            let root = roots.first(doc);
            assert_eq!(
                number == NO_CLUSTER,
                root.is_none(),
                "a number exactly when a root"
            );
            assert_eq!(fresh_number == NO_CLUSTER, root.is_none());
            let Some(root) = root else { continue };
            *by_root.entry(root).or_default() += 1;
            assert!((number as usize) < ordinals.number_bound());
            assert_eq!(
                *to_fresh.entry(number).or_insert(fresh_number),
                fresh_number
            );
            assert_eq!(*from_fresh.entry(fresh_number).or_insert(number), number);
            numbered.push((root, number));
        }
    }
    for (root, number) in numbered {
        assert_eq!(
            ordinals.size(number),
            by_root[&root],
            "size of root {root:x}"
        );
    }
    for (&number, &fresh_number) in &to_fresh {
        assert_eq!(ordinals.size(number), fresh.size(fresh_number));
    }
    let documents: u64 = by_root.values().sum();
    assert_eq!(
        (ordinals.documents(), ordinals.clusters()),
        (documents, by_root.len())
    );
    assert_eq!(
        (fresh.documents(), fresh.clusters()),
        (documents, by_root.len())
    );
    // At most half the numbers are dead.
    assert!(ordinals.number_bound() <= 2 * ordinals.clusters());
}

fn run(ops: &[Op]) {
    let mut store = Store::new();
    let mut numbering = ClusterNumbering::default();
    let mut generations: Vec<(Searcher, Arc<ClusterOrdinals>)> = Vec::new();
    for op in ops {
        let searcher = match *op {
            Op::Add { id, text } => {
                store.add(id, text);
                continue;
            }
            Op::Delete { id } => {
                store.delete(id);
                continue;
            }
            Op::DeleteStory { text } => {
                let ids: Vec<u8> = store
                    .live
                    .iter()
                    .filter(|&(_, &t)| t == text)
                    .map(|(&id, _)| id)
                    .collect();
                for id in ids {
                    store.delete(id);
                }
                continue;
            }
            Op::Commit => {
                store.dedup.commit(&mut store.writer).unwrap();
                store.dedup.reader().searcher()
            }
            Op::Merge { segments } => {
                store.merge(segments as usize);
                store.dedup.reader().searcher()
            }
            Op::Back { generation } => match generations.len() {
                0 => continue,
                count => generations[generation as usize % count].0.clone(),
            },
        };
        let ordinals = numbering.ordinals(&searcher).unwrap();
        check(&ordinals, &searcher);
        generations.push((searcher, ordinals));
    }
    // Every generation handed out still has its own numbers and sizes.
    for (searcher, ordinals) in &generations {
        check(ordinals, searcher);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn kept_numbers_equal_numbers_built_from_scratch(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops);
    }
}

/// Whole clusters dying while others live: the dead numbers are dropped once they outnumber
/// the live ones, and the numbers stay right through it.
#[test]
fn renumbering_after_clusters_die() {
    let mut ops = Vec::new();
    for round in 0..4u8 {
        for id in 0..IDS {
            ops.push(Op::Add {
                id,
                text: (id + round) % TEXTS.len() as u8,
            });
        }
        ops.push(Op::Commit);
        for text in 0..9 {
            ops.push(Op::DeleteStory {
                text: (text + round) % TEXTS.len() as u8,
            });
        }
        ops.push(Op::Commit);
        ops.push(Op::Merge { segments: 3 });
        ops.push(Op::Back { generation: round });
    }
    run(&ops);
}
