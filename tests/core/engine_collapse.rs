//! The Tantivy engine's answers against brute force, over a real on-disk index.
//!
//! The corpus is generated deterministically from invented story templates: each base story
//! gets reposts (a source header, an editor's footer, `<p>` markup, half-width punctuation, a
//! few changed characters), mixed with unrelated stories assembled from phrase banks. The index
//! is written over several commits (so several segments), then documents are deleted and ids
//! re-ingested with other text. Every answer of `DedupSearcher` (list pages, detail pages,
//! near-duplicate checks, statistics) is compared with a computation from Tantivy's own top
//! documents and a full scan of the live documents, which shares no code with the collapse
//! collector or the searcher.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use tantivy::collector::TopDocs;
use tantivy::schema::Value;
use tantivy::{DocAddress, TantivyDocument};
use tantivy_dedup::config::{Config, IndexConfig};
use tantivy_dedup::engine::{
    ClusterHit, Cursor, DedupIndex, DedupSearcher, MAX_PAGE_SIZE, SearchRequest, Sort, StoryTrend,
    TrendSpan,
};
use tantivy_dedup::forest::NodeInfo;
use tantivy_dedup::{Article, Deduplicator, Fingerprint};
use tempfile::TempDir;

pub(crate) const BASE_TIME: i64 = 1_700_000_000;
const SOURCES: [&str; 5] = ["新华网", "人民网", "央视网", "澎湃新闻", "中国新闻网"];
const EDITORS: [&str; 4] = ["张三", "李四", "王五", "赵六"];

/// Invented news stories: (title, body).
const TEMPLATES: [(&str, &str); 30] = [
    (
        "地铁十九号线开通试运营",
        "本报记者从市交通委获悉，地铁十九号线今天上午正式开通试运营，全线共设车站十五座，连接城北居住区与东部产业园，早晚高峰最小行车间隔为四分钟，预计日均客流将超过三十万人次。",
    ),
    (
        "秋粮收购全面展开",
        "记者从省粮食和物资储备局了解到，今年秋粮收购工作已全面展开，各地新增收购网点两百余个，并开通线上预约售粮服务，农民排队时间明显缩短，收购价格总体保持平稳。",
    ),
    (
        "三只熊猫幼崽满百日",
        "成都大熊猫繁育研究基地今天宣布，今年出生的三只熊猫幼崽已满百日，体重均超过十公斤，健康状况良好。基地工作人员介绍，幼崽将于下月与游客正式见面。",
    ),
    (
        "市图书馆延长夜间开放时间",
        "为满足市民夜间阅读需求，市图书馆自本周起将开放时间延长至晚上十点，并增设自习座位四百个。馆方表示，夜间开放期间还将举办读书分享会和非遗手工体验活动。",
    ),
    (
        "气象台发布高温橙色预警",
        "气象台今天发布高温橙色预警，预计未来三天本市最高气温将达到三十九摄氏度以上。气象专家提醒，市民应尽量减少午后户外活动，注意防暑降温，户外作业人员要合理安排工作时间。",
    ),
    (
        "新能源汽车出口持续增长",
        "海关总署最新数据显示，前十个月我国新能源汽车出口量同比增长三成以上，欧洲和东南亚市场需求旺盛。业内人士分析，产品竞争力提升和海外渠道建设是出口增长的主要原因。",
    ),
    (
        "跨江大桥主桥合龙",
        "记者在施工现场看到，历时三年建设的跨江大桥今天实现主桥合龙，大桥全长四点二公里，采用双向六车道设计。建成后两岸通行时间将由四十分钟缩短至十分钟以内。",
    ),
    (
        "滨海国际马拉松开跑",
        "第十届滨海国际马拉松赛今天鸣枪开跑，来自二十多个国家和地区的三万名选手参赛。赛事组委会在沿途设置了二十个补给站和十二个医疗点，志愿者人数超过五千人。",
    ),
    (
        "社区养老食堂陆续开业",
        "社区养老食堂近日在老城区陆续开业，六十岁以上老人凭卡就餐可享受八折优惠，行动不便的老人还可以预约送餐上门。记者走访发现，不少老人对饭菜的口味和价格都比较满意。",
    ),
    (
        "山区开通无人机配送航线",
        "一家物流企业在山区县开通无人机配送航线，包裹从县城仓库送到村级服务站只需二十分钟，比原来节省两个多小时。企业负责人说，下一步将把航线扩展到更多偏远乡镇。",
    ),
    (
        "新石器时代聚落遗址出土文物千余件",
        "考古工作者在河谷台地上发掘出一处距今约五千年的新石器时代聚落遗址，出土陶器、石器和骨器等文物一千多件。专家认为，这一发现对研究当地早期农业起源具有重要价值。",
    ),
    (
        "慢性病门诊用药纳入医保",
        "记者从市医保局获悉，自下月起，本市将把二十种常见慢性病门诊用药纳入医保报销范围，报销比例最高可达百分之七十。参保人员无需另行申请，持医保卡即可在定点药店直接结算。",
    ),
    (
        "北方城市提前供暖",
        "随着气温持续下降，北方多个城市提前启动冬季供暖。热力公司表示，已完成管网检修和设备调试，并开通二十四小时服务热线，居民家中暖气不热可随时报修，维修人员将在两小时内上门。",
    ),
    (
        "校园足球联赛落幕",
        "全市中小学校园足球联赛近日落下帷幕，共有一百二十支球队参加了为期两个月的比赛。教育部门负责人表示，将继续加大场地建设投入，让更多孩子在运动中增强体质、培养团队精神。",
    ),
    (
        "垃圾分类准确率提升",
        "垃圾分类新规实施一年来，全市居民小区分类准确率已提升到百分之八十五。记者在多个小区看到，智能回收箱前排起了队，居民投放可回收物还能获得积分兑换生活用品。",
    ),
    (
        "直播带货助农增收",
        "在县里的电商直播基地，年轻主播们正在介绍刚采摘的猕猴桃和蜂蜜。当地负责人介绍，今年以来通过直播带货销售的农产品已超过八千万元，带动两千多户农民增收。",
    ),
    (
        "青铜器特展开幕",
        "省博物馆推出的青铜器特展今天开幕，展出商周时期青铜器一百五十余件，其中三十件为首次公开亮相。展览将持续三个月，观众可通过官方小程序提前预约参观。",
    ),
    (
        "暴雨致部分路段积水",
        "受强对流天气影响，昨夜至今晨本市出现大范围暴雨，部分路段积水严重。记者在现场看到，市政部门出动抢险人员六百余人，调集排水车辆一百多台，全力保障道路通行。",
    ),
    (
        "芯片封测工厂投产",
        "位于开发区的一座芯片封装测试工厂今天正式投产，项目总投资约八十亿元，达产后年产值可达一百二十亿元。园区管委会表示，将继续完善上下游配套，打造集成电路产业集群。",
    ),
    (
        "冬春航季新开八条国际航线",
        "冬春航季今天开始执行，本市机场新开通国际和地区航线八条，国内航线也有所加密。机场方面提醒旅客，换季后部分航班时刻发生变化，出行前请及时查询航班动态。",
    ),
    (
        "林区加强森林防火",
        "进入秋冬季节，林区防火形势严峻。林业部门近日在重点区域增设瞭望塔和视频监控点，并组织护林员开展巡山。记者了解到，今年以来全省未发生重大森林火灾。",
    ),
    (
        "老旧小区改造启动",
        "今年全市计划改造老旧小区一百二十个，涉及居民四万多户。改造内容包括加装电梯、更换供水管道、增设停车位和充电桩等。街道工作人员表示，改造方案都经过居民投票决定。",
    ),
    (
        "国庆假期旅游收入增长两成",
        "国庆假期期间，全省共接待游客三千六百万人次，旅游收入同比增长两成。乡村旅游和红色旅游成为热点，不少景区推出夜游项目，延长了游客停留时间。",
    ),
    (
        "新科技馆向公众开放",
        "新建成的科技馆今天向公众开放，馆内设有航天、海洋、人工智能等八个主题展区，互动展品超过四百件。记者体验发现，许多展品可以亲手操作，深受中小学生喜爱。",
    ),
    (
        "港口集装箱吞吐量同比增长",
        "港口集团发布数据显示，前三季度集装箱吞吐量达到两千一百万标准箱，同比增长百分之六。记者在码头看到，自动化岸桥和无人驾驶集卡正在有序作业，装卸效率明显提高。",
    ),
    (
        "血站倡议无偿献血",
        "市中心血站近日发出倡议，呼吁市民参与无偿献血。血站工作人员介绍，受季节因素影响，近期临床用血量增加，库存偏紧，符合条件的市民可前往各献血屋献血。",
    ),
    (
        "本地蔬菜上市菜价回落",
        "记者走访本市多家农贸市场发现，随着本地蔬菜大量上市，青菜、萝卜、白菜等品种价格较上月下降一到两成，猪肉和鸡蛋价格基本稳定，市场供应充足。",
    ),
    (
        "警方破获电信网络诈骗案",
        "警方近日破获一起电信网络诈骗案，抓获犯罪嫌疑人二十余名，冻结涉案资金五百多万元。警方提醒，凡是要求转账到所谓安全账户的，都是诈骗，市民接到可疑电话要及时挂断并报警。",
    ),
    (
        "两省省会间高铁开通",
        "连接两省省会的高速铁路今天开通运营，设计时速三百五十公里，沿线设站十一座。开通后两地最快旅行时间缩短至一小时十分钟，将进一步促进区域经济协同发展。",
    ),
    (
        "退休教师志愿辅导功课",
        "在城市公园里，一支由退休教师组成的志愿服务队每周末为孩子们免费辅导功课。队长告诉记者，队伍成立五年来已服务上万人次，希望有更多人加入到志愿服务中来。",
    ),
];

const SUBJECTS: [&str; 16] = [
    "市场监管部门",
    "区政府",
    "一家科技公司",
    "某高校研究团队",
    "环保志愿者协会",
    "铁路部门",
    "文化和旅游局",
    "消防救援支队",
    "街道办事处",
    "农业农村局",
    "市气象台",
    "一家连锁超市",
    "社区卫生服务中心",
    "公交集团",
    "水务公司",
    "税务部门",
];
const EVENTS: [&str; 12] = [
    "近日发布了新的工作方案",
    "开展了为期一周的专项检查",
    "举办了主题开放日活动",
    "公布了上半年的工作成绩单",
    "启动了新一轮便民服务行动",
    "召开了年度工作推进会",
    "上线了一款手机应用",
    "与多家单位签订了合作协议",
    "组织了一场应急演练",
    "发布了一份调查报告",
    "宣布了一项新的补贴政策",
    "邀请市民参与意见征集",
];
const DETAILS: [&str; 15] = [
    "参与人数超过两千人",
    "相关负责人表示将持续推进",
    "不少市民在现场咨询",
    "活动受到周边居民欢迎",
    "下一步将扩大试点范围",
    "记者注意到现场秩序井然",
    "预计年底前全面完成",
    "有关数据将定期向社会公布",
    "工作人员耐心解答群众疑问",
    "部分措施已经取得初步成效",
    "专家建议进一步加强监督",
    "群众满意度明显提升",
    "相关费用由财政全额承担",
    "已累计受理申请三百余件",
    "后续还将开展回访工作",
];

/// A story of two or three sentences assembled from the phrase banks: (title, body).
fn unrelated_story(rng: &mut SmallRng) -> (String, String) {
    let mut body = String::new();
    let mut title = String::new();
    for sentence in 0..rng.random_range(2..=3) {
        let subject = SUBJECTS.choose(rng).unwrap();
        let event = EVENTS.choose(rng).unwrap();
        let details: Vec<&&str> = DETAILS.choose_multiple(rng, 2).collect();
        if sentence == 0 {
            title = format!("{subject}{event}");
        }
        body.push_str(&format!(
            "{subject}{event}，{}，{}。",
            details[0], details[1]
        ));
    }
    (title, body)
}

/// A repost of `body`: some of a source header, an editor's footer, `<p>` markup, half-width
/// punctuation, a few changed characters and an added closing sentence.
fn repost(rng: &mut SmallRng, body: &str) -> String {
    let mut text = body.to_owned();
    if rng.random_bool(0.4) {
        let mut chars: Vec<char> = text.chars().collect();
        for _ in 0..rng.random_range(1..=3) {
            let at = rng.random_range(0..chars.len());
            if ('\u{4e00}'..='\u{9fff}').contains(&chars[at]) {
                chars[at] = *['的', '了', '在', '和', '是', '有'].choose(rng).unwrap();
            }
        }
        text = chars.into_iter().collect();
    }
    if rng.random_bool(0.35) {
        text = text
            .split_inclusive('。')
            .map(|sentence| format!("<p>{sentence}</p>"))
            .collect();
    } else if rng.random_bool(0.3) {
        text = format!("<p>{text}</p>");
    }
    if rng.random_bool(0.3) {
        text = text
            .replace('，', ",")
            .replace('。', ".")
            .replace('：', ":");
    }
    if rng.random_bool(0.1) {
        text.push_str("本报将持续关注后续进展。");
    }
    let source = SOURCES.choose(rng).unwrap();
    match rng.random_range(0..3) {
        0 => text = format!("来源：{source}\n{text}"),
        1 => text = format!("【{source}讯】{text}"),
        _ => {}
    }
    if rng.random_bool(0.5) {
        let editor = EDITORS.choose(rng).unwrap();
        text.push_str(&format!("（责任编辑：{editor}）"));
    }
    text
}

/// An article with id `id` published at `BASE_TIME + slot * 60`, with a random source (or
/// none, now and then).
fn article(rng: &mut SmallRng, id: String, slot: usize, title: String, content: String) -> Article {
    let source = if rng.random_bool(0.05) {
        None
    } else {
        Some(SOURCES.choose(rng).unwrap().to_string())
    };
    Article {
        url: Some(format!("https://news.example.com/{id}")),
        id,
        title: Some(title),
        content,
        source,
        published_at: Some(BASE_TIME + slot as i64 * 60),
    }
}

/// The corpus: every template with 0 to 8 reposts, plus 110 unrelated stories, shuffled and
/// published a minute apart.
pub(crate) fn corpus(seed: u64) -> Vec<Article> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut stories: Vec<(String, String)> = Vec::new();
    for (title, body) in TEMPLATES {
        stories.push((title.to_owned(), body.to_owned()));
        for _ in 0..rng.random_range(0..=8) {
            let title = match rng.random_range(0..3) {
                0 => title.to_owned(),
                1 => format!("转载：{title}"),
                _ => format!("{title}（图）"),
            };
            stories.push((title, repost(&mut rng, body)));
        }
    }
    for _ in 0..110 {
        stories.push(unrelated_story(&mut rng));
    }
    stories.shuffle(&mut rng);
    stories
        .into_iter()
        .enumerate()
        .map(|(slot, (title, body))| article(&mut rng, format!("n{slot:04}"), slot, title, body))
        .collect()
}

pub(crate) fn config() -> Config {
    Config {
        index: IndexConfig {
            writer_threads: Some(1),
            writer_memory_mb: 15,
            ..IndexConfig::default()
        },
        ..Config::default()
    }
}

/// An index with the model of what it should hold.
struct Fixture {
    dir: TempDir,
    index: DedupIndex,
    /// The live documents by id, as last ingested.
    live: BTreeMap<String, Article>,
    /// Articles deleted or replaced (their last text).
    gone: Vec<Article>,
    /// The tombstones the index should hold.
    tombstones: u64,
    /// The next free publication slot.
    next_slot: usize,
}

/// The corpus ingested in order, with a commit every 40 documents.
fn ingested() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    let articles = corpus(0xc011_a95e);
    let next_slot = articles.len();
    let mut live = BTreeMap::new();
    for (i, article) in articles.into_iter().enumerate() {
        index.add_article(article.clone()).unwrap();
        live.insert(article.id.clone(), article);
        if i % 40 == 39 {
            index.commit().unwrap();
        }
    }
    index.commit().unwrap();
    Fixture {
        dir,
        index,
        live,
        gone: Vec::new(),
        tombstones: 0,
        next_slot,
    }
}

impl Fixture {
    /// Deletes `id`; the index must say whether the model had it.
    fn delete(&mut self, id: &str) {
        let existed = self.live.contains_key(id);
        assert_eq!(self.index.delete(id).unwrap(), existed, "delete {id}");
        if let Some(article) = self.live.remove(id) {
            self.gone.push(article);
            self.tombstones += 1;
        }
    }

    /// Ingests `article` (replacing any live document with its id).
    fn add(&mut self, article: Article) {
        self.index.add_article(article.clone()).unwrap();
        if let Some(old) = self.live.insert(article.id.clone(), article) {
            self.gone.push(old);
            self.tombstones += 1;
        }
    }

    /// A fresh article with id `id` and text unlike its old one.
    fn new_text(&mut self, rng: &mut SmallRng, id: &str) -> Article {
        let (title, body) = if rng.random_bool(0.5) {
            let (title, body) = TEMPLATES.choose(rng).unwrap();
            (title.to_string(), repost(rng, body))
        } else {
            unrelated_story(rng)
        };
        let slot = self.next_slot;
        self.next_slot += 1;
        article(rng, id.to_owned(), slot, title, body)
    }

    /// Deletes and replaces documents over two commits: the first document of the largest
    /// cluster, random ones, one twice, unknown ids, an id replaced twice before a commit, an
    /// id added and deleted before a commit, brand-new ids.
    fn mutate(&mut self) {
        let mut rng = SmallRng::seed_from_u64(0xde1e7e);
        let scan = live_docs(&self.index.searcher().tantivy_searcher());
        let mut sizes: HashMap<u64, usize> = HashMap::new();
        for doc in &scan {
            *sizes.entry(doc.root).or_default() += 1;
        }
        let largest = sizes
            .iter()
            .max_by_key(|&(root, size)| (size, root))
            .unwrap();
        assert!(*largest.1 >= 3, "the corpus should have reposted stories");
        let first = scan
            .iter()
            .filter(|doc| doc.root == *largest.0)
            .min_by_key(|doc| doc.seq)
            .unwrap();
        let first = first.id.clone();
        self.delete(&first);
        self.delete(&first); // again: nothing to delete
        self.delete("no-such-id");

        let ids: Vec<String> = self.live.keys().cloned().collect();
        for id in ids.choose_multiple(&mut rng, 12) {
            self.delete(id);
        }
        let ids: Vec<String> = self.live.keys().cloned().collect();
        for id in ids.choose_multiple(&mut rng, 8) {
            let article = self.new_text(&mut rng, id);
            self.add(article);
        }
        self.index.commit().unwrap();

        let ids: Vec<String> = self.live.keys().cloned().collect();
        let chosen: Vec<String> = ids.choose_multiple(&mut rng, 16).cloned().collect();
        for id in &chosen[..8] {
            self.delete(id);
        }
        for id in &chosen[8..] {
            let article = self.new_text(&mut rng, id);
            self.add(article);
        }
        // Replaced twice in one batch.
        let twice = chosen[8].clone();
        let article = self.new_text(&mut rng, &twice);
        self.add(article);
        // Added and deleted in one batch; added, deleted and added again.
        let transient = self.new_text(&mut rng, "transient");
        self.add(transient);
        self.delete("transient");
        for id in ["again", "fresh-1", "fresh-2"] {
            let article = self.new_text(&mut rng, id);
            self.add(article);
        }
        self.delete("again");
        let again = self.new_text(&mut rng, "again");
        self.add(again);
        // A re-ingest that keeps the text but changes the source.
        let id = self.live.keys().nth(5).unwrap().clone();
        let mut same = self.live[&id].clone();
        same.source = Some("央视网".to_owned());
        self.add(same);
        self.index.commit().unwrap();
    }
}

/// A live document, read straight from the index.
#[derive(Debug, Clone)]
struct LiveDoc {
    address: DocAddress,
    id: String,
    source: Option<String>,
    published_at: Option<i64>,
    root: u64,
    simhash: u64,
    time: i64,
    seq: u64,
}

/// Every live document (alive, with a root) of the searcher, from the fast fields and the
/// stored fields. Asserts that the other alive documents (tombstones) have no id.
fn live_docs(searcher: &tantivy::Searcher) -> Vec<LiveDoc> {
    let schema = searcher.schema();
    let field = |name: &str| schema.get_field(name).unwrap();
    let (id_field, source_field, published_field) =
        (field("id"), field("source"), field("published_at"));
    let mut docs = Vec::new();
    for (ordinal, segment) in searcher.segment_readers().iter().enumerate() {
        let fast = segment.fast_fields();
        let roots = fast.u64("root").unwrap();
        let simhashes = fast.u64("simhash").unwrap();
        let times = fast.i64("_time").unwrap();
        let sequences = fast.u64("_seq").unwrap();
        for doc in segment.doc_ids_alive() {
            let address = DocAddress::new(ordinal as u32, doc);
            let stored: TantivyDocument = searcher.doc(address).unwrap();
            let text = |field| {
                stored
                    .get_first(field)
                    .and_then(|value| value.as_str())
                    .map(str::to_owned)
            };
            let Some(root) = roots.first(doc) else {
                assert_eq!(text(id_field), None, "a tombstone with an id");
                continue;
            };
            docs.push(LiveDoc {
                address,
                id: text(id_field).expect("a live document without an id"),
                source: text(source_field),
                published_at: stored
                    .get_first(published_field)
                    .and_then(|value| value.as_datetime())
                    .map(|time| time.into_timestamp_secs()),
                root,
                simhash: simhashes.first(doc).unwrap(),
                time: times.first(doc).unwrap(),
                seq: sequences.first(doc).unwrap(),
            });
        }
    }
    docs
}

/// Checks that the index holds exactly the model's live documents, with their sources, times
/// and fingerprints (those of the standalone deduplicator), and returns them.
fn check_live(index: &DedupIndex, live: &BTreeMap<String, Article>) -> Vec<LiveDoc> {
    let docs = live_docs(&index.searcher().tantivy_searcher());
    let ids: Vec<&str> = docs.iter().map(|doc| doc.id.as_str()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an id is live twice");
    assert_eq!(
        unique,
        live.keys().map(String::as_str).collect::<BTreeSet<_>>()
    );
    let dedup = Deduplicator::new(index.config().dedup.clone()).unwrap();
    for doc in &docs {
        let article = &live[&doc.id];
        assert_eq!(doc.source, article.source, "{}", doc.id);
        assert_eq!(doc.published_at, article.published_at, "{}", doc.id);
        assert_eq!(Some(doc.time), article.published_at, "{}", doc.id);
        assert_eq!(
            Fingerprint(doc.simhash),
            dedup.fingerprint(article),
            "the index and the standalone deduplicator fingerprint {} differently",
            doc.id
        );
    }
    docs
}

/// One cluster of a list page, as brute force expects it.
#[derive(Debug, Clone, PartialEq)]
struct Expected {
    root: u64,
    representative: String,
    score: f32,
    hits: u64,
    cluster_size: u64,
    sources: Vec<String>,
    newest: i64,
    oldest: i64,
    trend: Option<StoryTrend>,
    hot: Option<f64>,
    /// The listed members' ids.
    members: Option<Vec<String>>,
}

impl Expected {
    fn of(hit: &ClusterHit) -> Self {
        Expected {
            root: hit.root.0,
            representative: hit.representative.id.clone(),
            score: hit.score,
            hits: hit.hits,
            cluster_size: hit.cluster_size,
            sources: hit.sources.clone(),
            newest: hit.newest,
            oldest: hit.oldest,
            trend: hit.trend,
            hot: hit.hot,
            members: hit
                .members
                .as_ref()
                .map(|members| members.iter().map(|member| member.id.clone()).collect()),
        }
    }

    /// The growth and the articles in the window (0 and 0 when not counted).
    fn growth(&self) -> (i64, u64) {
        self.trend
            .map_or((0, 0), |trend| (trend.growth, trend.recent))
    }
}

/// The documented order of clusters: the sort's key, then the better score, then the smaller
/// root.
fn order(sort: Sort, a: &Expected, b: &Expected) -> Ordering {
    let key = match sort {
        Sort::Relevance => Ordering::Equal,
        Sort::SimilarDesc => b.cluster_size.cmp(&a.cluster_size),
        Sort::SimilarAsc => a.cluster_size.cmp(&b.cluster_size),
        Sort::Newest => b.newest.cmp(&a.newest),
        Sort::Oldest => a.oldest.cmp(&b.oldest),
        Sort::Trending => b.growth().cmp(&a.growth()),
        Sort::Hot => b.hot.unwrap().total_cmp(&a.hot.unwrap()),
        // Checked against brute force in `own_fields`, whose schema has such fields.
        Sort::FieldDesc | Sort::FieldAsc => unreachable!("{sort:?} is not in Sort::ALL"),
    };
    key.then(b.score.total_cmp(&a.score))
        .then(a.root.cmp(&b.root))
}

/// Every matching cluster of `request`, unsorted, and the number of matching documents: the
/// request's Tantivy query through `TopDocs`, grouped by the `root` fast field; cluster sizes,
/// sources and trend figures (articles by event time in the window ending at the request's
/// `trend_end` and in the window before, the recent ones' distinct sources) from a scan of
/// the live documents. Trend figures and `hot` as the request's sort shows them.
fn brute_force(searcher: &DedupSearcher, request: &SearchRequest) -> (u64, Vec<Expected>) {
    let tantivy = searcher.tantivy_searcher();
    let docs = live_docs(&tantivy);
    let by_address: HashMap<DocAddress, &LiveDoc> =
        docs.iter().map(|doc| (doc.address, doc)).collect();
    let mut sizes: HashMap<u64, u64> = HashMap::new();
    let mut sources: HashMap<u64, BTreeMap<String, u64>> = HashMap::new();
    // root -> (recent, previous, recent sources)
    let mut trends: HashMap<u64, (u64, u64, BTreeSet<String>)> = HashMap::new();
    let span = request.trend.seconds() as i64;
    let end = request
        .trend_end
        .expect("the tests fix the trend window's end");
    for doc in &docs {
        *sizes.entry(doc.root).or_default() += 1;
        let counts = sources.entry(doc.root).or_default();
        if let Some(source) = &doc.source {
            *counts.entry(source.clone()).or_default() += 1;
        }
        let trend = trends.entry(doc.root).or_default();
        if doc.time > end - span && doc.time <= end {
            trend.0 += 1;
            trend.2.extend(doc.source.clone());
        } else if doc.time > end - 2 * span && doc.time <= end - span {
            trend.1 += 1;
        }
    }
    let counts_trends =
        request.sort == Sort::Trending || request.sort == Sort::Hot || request.min_recent > 0;

    let query = searcher.query(request).unwrap();
    let top = tantivy
        .search(&*query, &TopDocs::with_limit(100_000).order_by_score())
        .unwrap();
    assert!(top.len() < 100_000);
    let columns: Vec<_> = tantivy
        .segment_readers()
        .iter()
        .map(|segment| {
            let fast = segment.fast_fields();
            (
                fast.u64("root").unwrap(),
                fast.i64("_time").unwrap(),
                fast.u64("_seq").unwrap(),
            )
        })
        .collect();
    // root -> (best score, its seniority, its address, hits, newest, oldest): on equal scores
    // the earliest document (then the first inserted) represents its cluster.
    type Seniority = (i64, u64);
    let mut groups: HashMap<u64, (f32, Seniority, DocAddress, u64, i64, i64)> = HashMap::new();
    // root -> every hit: (score, seniority, address)
    let mut hits_of: HashMap<u64, Vec<(f32, Seniority, DocAddress)>> = HashMap::new();
    let mut total_hits = 0;
    for (score, address) in top {
        let (roots, times, sequences) = &columns[address.segment_ord as usize];
        let Some(root) = roots.first(address.doc_id) else {
            continue; // a tombstone (only the match-all query reaches them)
        };
        assert!(by_address.contains_key(&address));
        if trends[&root].0 < request.min_recent {
            continue;
        }
        let time = times.first(address.doc_id).unwrap();
        let seniority = (time, sequences.first(address.doc_id).unwrap());
        total_hits += 1;
        let group = groups
            .entry(root)
            .or_insert((score, seniority, address, 0, time, time));
        if score > group.0 || (score == group.0 && seniority < group.1) {
            group.0 = score;
            group.1 = seniority;
            group.2 = address;
        }
        group.3 += 1;
        group.4 = group.4.max(time);
        group.5 = group.5.min(time);
        hits_of
            .entry(root)
            .or_default()
            .push((score, seniority, address));
    }
    let clusters = groups
        .into_iter()
        .map(|(root, (score, _, address, hits, newest, oldest))| {
            let mut named: Vec<(String, u64)> = sources[&root].clone().into_iter().collect();
            named.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let (recent, previous, recent_sources) = &trends[&root];
            // score x (1 + ln size) x one half per window of age, in the formula's order.
            let age = (end - newest).max(0) as f64;
            let hot = f64::from(score)
                * (1.0 + (sizes[&root] as f64).ln())
                * 0.5f64.powf(age / span as f64);
            // The other hits, best first: the newest for `newest`, the oldest for `oldest`,
            // else the best score, then the earliest.
            let mut others: Vec<(f32, Seniority, DocAddress)> = hits_of[&root]
                .iter()
                .filter(|hit| hit.2 != address)
                .copied()
                .collect();
            if request.sort == Sort::Newest {
                others.sort_by_key(|hit| std::cmp::Reverse(hit.1));
            } else if request.sort == Sort::Oldest {
                others.sort_by_key(|hit| hit.1);
            } else {
                others.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            }
            let members = (request.members > 0).then(|| {
                others
                    .iter()
                    .take(request.members)
                    .map(|hit| by_address[&hit.2].id.clone())
                    .collect()
            });
            Expected {
                root,
                members,
                representative: by_address[&address].id.clone(),
                score,
                hits,
                cluster_size: sizes[&root],
                sources: named.into_iter().map(|(name, _)| name).collect(),
                newest,
                oldest,
                trend: counts_trends.then_some(StoryTrend {
                    recent: *recent,
                    recent_outlets: recent_sources.len() as u64,
                    previous: *previous,
                    growth: *recent as i64 - *previous as i64,
                }),
                hot: (request.sort == Sort::Hot).then_some(hot),
            }
        })
        .collect();
    (total_hits, clusters)
}

/// Compares `searcher.search` with brute force for every sort and several pages of
/// `request`; returns (matching documents, matching clusters).
fn check_search(searcher: &DedupSearcher, request: &SearchRequest) -> (u64, u64) {
    let mut found = None;
    for (name, sort) in Sort::ALL {
        let (total_hits, mut clusters) = brute_force(searcher, &request.clone().sort(sort));
        let total = clusters.len();
        found = Some((total_hits, total as u64));
        clusters.sort_by(|a, b| order(sort, a, b));
        for (offset, limit) in [
            (0, 10),
            (0, MAX_PAGE_SIZE),
            (total / 2, 7),
            (total.saturating_sub(3), 10),
            (total, 5),
            (total + 4, 5),
        ] {
            let request = request.clone().sort(sort).page(offset, limit);
            let page = searcher.search(&request).unwrap();
            let context = format!("{request:?} ({name})");
            assert_eq!(page.total_hits, total_hits, "{context}");
            assert_eq!(page.total_clusters, total as u64, "{context}");
            let expected: Vec<Expected> =
                clusters.iter().skip(offset).take(limit).cloned().collect();
            let actual: Vec<Expected> = page.clusters.iter().map(Expected::of).collect();
            if let Some(at) =
                (0..actual.len().max(expected.len())).find(|&at| actual.get(at) != expected.get(at))
            {
                let position = |root: Option<u64>, list: &[Expected]| {
                    list.iter().position(|cluster| Some(cluster.root) == root)
                };
                let (mine, theirs) = (
                    actual.get(at).map(|cluster| cluster.root),
                    expected.get(at).map(|cluster| cluster.root),
                );
                panic!(
                    "{context}: cluster {at} of the page is\n{:?} (brute force's {:?}), brute \
                     force says\n{:?} (the page's {:?})",
                    actual.get(at),
                    position(mine, &expected).map(|at| &expected[at]),
                    expected.get(at),
                    position(theirs, &actual).map(|at| &actual[at]),
                );
            }
            for hit in &page.clusters {
                assert_eq!(hit.representative.root, hit.root, "{context}");
                assert!(hit.hits >= 1 && hit.hits <= hit.cluster_size, "{context}");
                assert!(hit.newest >= hit.representative.published_at.unwrap());
            }
        }
    }
    found.unwrap()
}

/// The requests checked against brute force, over a corpus of `slots` publication slots.
fn requests(slots: usize) -> Vec<SearchRequest> {
    let at = |slot: usize| BASE_TIME + slot as i64 * 60;
    // Half an hour, two thirds into the corpus: about 30 articles in the window and 30 in
    // the one before.
    let half_hour = TrendSpan::from_seconds(1800).unwrap();
    let trend_end = Some(at(2 * slots / 3));
    let requests = vec![
        SearchRequest::new("记者"),
        SearchRequest::new("熊猫"),
        SearchRequest::new(""),
        SearchRequest::new("").source("人民网"),
        SearchRequest::new("记者").source("新华网"),
        SearchRequest::new("").published(Some(at(slots / 3)), Some(at(2 * slots / 3))),
        SearchRequest::new("今天").published(Some(at(slots / 2)), None),
        SearchRequest::new("记者 今天")
            .published(None, Some(at(slots / 2)))
            .members(3),
        SearchRequest::new("量子计算"),
        SearchRequest::new("").min_recent(1),
        SearchRequest::new("记者").min_recent(2),
        SearchRequest::new("").members(2),
    ];
    requests
        .into_iter()
        .map(|request| request.trend(half_hour, trend_end))
        .collect()
}

/// Checks every request, and that the interesting ones match something worth checking.
fn check_requests(fixture: &Fixture) {
    let searcher = fixture.index.searcher();
    let requests = requests(fixture.next_slot);
    let results: Vec<(u64, u64)> = requests
        .iter()
        .map(|request| check_search(&searcher, request))
        .collect();
    let live = fixture.live.len() as u64;
    // The filters and the rare word, against the model rather than Tantivy's query: `from`
    // and `to` are inclusive (they fall on documents' times), the source is exact, and a word
    // matches the documents whose title or body contains it.
    let matching = |keep: &dyn Fn(&Article) -> bool| {
        fixture
            .live
            .values()
            .filter(|article| keep(article))
            .count() as u64
    };
    let contains = |article: &Article, word: &str| {
        article.content.contains(word) || article.title.as_deref().unwrap_or("").contains(word)
    };
    assert_eq!(results[1].0, matching(&|article| contains(article, "熊猫")));
    let source = requests[3].source.as_deref();
    assert_eq!(
        results[3].0,
        matching(&|article| article.source.as_deref() == source)
    );
    let (from, to) = (requests[5].from.unwrap(), requests[5].to.unwrap());
    let within = |article: &Article| (from..=to).contains(&article.published_at.unwrap());
    assert_eq!(results[5].0, matching(&within));
    assert!(
        fixture
            .live
            .values()
            .any(|article| article.published_at == Some(from))
            && fixture
                .live
                .values()
                .any(|article| article.published_at == Some(to))
    );
    let reversed = SearchRequest::new("").published(Some(to), Some(from));
    assert!(searcher.search(&reversed).is_err());
    assert_eq!(
        results[2].0, live,
        "the empty query matches every live document"
    );
    assert!(
        results[0].0 > 40 && results[0].1 < results[0].0,
        "{results:?}"
    );
    assert!(results[1].0 >= 1 && results[1].0 < 15, "{results:?}");
    for (hits, clusters) in &results[3..8] {
        assert!(*clusters > 3 && *hits < live, "{results:?}");
    }
    assert_eq!(results[8], (0, 0));
    // Stories with an article in the window: a few dozen articles, fewer than all; with two
    // of them, fewer still.
    assert!(results[9].1 > 10 && results[9].0 < live, "{results:?}");
    assert!(
        results[10].1 >= 1 && results[10].1 < results[9].1,
        "{results:?}"
    );
}

/// List pages equal brute force for every sort, several queries (common word, rare word, all
/// documents, source filter, time filters, no match) and several pages (first, whole, middle,
/// last, at and past the end), over several segments, before and after deletes and
/// replacements; statistics count live documents, clusters and tombstones.
#[test]
fn collapsed_search_equals_brute_force() {
    let mut fixture = ingested();
    check_live(&fixture.index, &fixture.live);
    let stats = fixture.index.searcher().stats().unwrap();
    assert!(stats.segments >= 2, "{stats:?}");
    assert_eq!(stats.documents, fixture.live.len() as u64);
    assert_eq!(stats.tombstones, 0);
    check_requests(&fixture);

    fixture.mutate();
    let docs = check_live(&fixture.index, &fixture.live);
    let stats = fixture.index.searcher().stats().unwrap();
    assert!(stats.segments >= 2, "{stats:?}");
    assert_eq!(stats.documents, fixture.live.len() as u64);
    assert_eq!(stats.tombstones, fixture.tombstones);
    let roots: BTreeSet<u64> = docs.iter().map(|doc| doc.root).collect();
    assert_eq!(stats.clusters, roots.len() as u64);
    for &root in roots.iter().step_by(5) {
        let size = docs.iter().filter(|doc| doc.root == root).count() as u64;
        let searcher = fixture.index.searcher();
        assert_eq!(searcher.cluster_size(Fingerprint(root)).unwrap(), size);
    }
    check_requests(&fixture);
    assert!(
        fixture
            .index
            .searcher()
            .search(&SearchRequest::new("").page(0, MAX_PAGE_SIZE + 1))
            .is_err()
    );
}

/// Cursor walks, for every sort and several lists: the pages together are the list that brute
/// force gives of the index when the walk started, each story once and in order, while
/// reposts join stories, documents are deleted and replaced and new stories arrive between
/// the pages (each change committed); the totals are the start's on every page. A walk goes
/// on in another process that opens the unchanged index, and is refused there once the index
/// changed; a cursor is refused by another list and with an offset.
#[test]
fn a_cursor_walks_the_list_as_it_was() {
    let mut fixture = ingested();
    let mut rng = SmallRng::seed_from_u64(0xc0_750e);
    let searcher = fixture.index.searcher();
    let requests = requests(fixture.next_slot);
    for base in [&requests[0], &requests[2], &requests[9], &requests[11]] {
        for (name, sort) in Sort::ALL {
            let request = base.clone().sort(sort);
            let (total_hits, mut expected) = brute_force(&searcher, &request);
            expected.sort_by(|a, b| order(sort, a, b));
            let mut walk = request.clone().page(0, 9).cursor(Cursor::start());
            let mut walked: Vec<Expected> = Vec::new();
            for turn in 0.. {
                let page = searcher.search(&walk).unwrap();
                let context = format!("{name}, page {turn} of {request:?}");
                assert_eq!(page.total_hits, total_hits, "{context}");
                assert_eq!(page.total_clusters, expected.len() as u64, "{context}");
                walked.extend(page.clusters.iter().map(Expected::of));
                let Some(next) = page.next_cursor else {
                    break;
                };
                assert_eq!(page.clusters.len(), 9, "{context}");
                walk.cursor = Some(next.parse().unwrap());
                if turn % 2 == 0 {
                    // A repost joins a live story, a document leaves, a story arrives.
                    let ids: Vec<String> = fixture.live.keys().cloned().collect();
                    let original = fixture.live[ids.choose(&mut rng).unwrap()].clone();
                    let slot = fixture.next_slot;
                    fixture.next_slot += 1;
                    let text = repost(&mut rng, &original.content);
                    let title = original.title.clone().unwrap_or_default();
                    let reposted =
                        article(&mut rng, format!("walk-{name}-{turn}"), slot, title, text);
                    fixture.add(reposted);
                    fixture.delete(ids.choose(&mut rng).unwrap());
                    let fresh = fixture.new_text(&mut rng, &format!("new-{name}-{turn}"));
                    fixture.add(fresh);
                    fixture.index.commit().unwrap();
                }
            }
            assert_eq!(walked.len(), expected.len(), "{name}: {request:?}");
            assert!(
                walked == expected,
                "{name}: the walk differs from the list at its start"
            );
        }
    }

    // A last page exactly full has no next cursor; one story more, and it has.
    let all = SearchRequest::new("").sort(Sort::SimilarDesc);
    let stories = searcher.search(&all).unwrap().total_clusters as usize;
    let whole = all.clone().page(0, stories).cursor(Cursor::start());
    assert_eq!(searcher.search(&whole).unwrap().next_cursor, None);
    let short = all.page(0, stories - 1).cursor(Cursor::start());
    let first = searcher.search(&short).unwrap();
    let next = first.next_cursor.unwrap().parse().unwrap();
    let last = searcher.search(&short.clone().cursor(next)).unwrap();
    assert_eq!((last.clusters.len(), last.next_cursor), (1, None));

    // A walk without a trend window's end keeps the one of its first page.
    let trending = SearchRequest::new("").sort(Sort::Trending).page(0, 5);
    let first = searcher
        .search(&trending.clone().cursor(Cursor::start()))
        .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let next: Cursor = first.next_cursor.unwrap().parse().unwrap();
    let second = searcher.search(&trending.cursor(next)).unwrap();
    assert!(first.trend_end.is_some());
    assert_eq!(second.trend_end, first.trend_end);

    // Another process, the index unchanged since the walk's first page: the walk goes on.
    let request = SearchRequest::new("").sort(Sort::SimilarDesc).page(0, 5);
    let first = searcher
        .search(&request.clone().cursor(Cursor::start()))
        .unwrap();
    let next: Cursor = first.next_cursor.unwrap().parse().unwrap();
    let elsewhere = DedupSearcher::open(fixture.dir.path()).unwrap();
    let second = elsewhere
        .search(&request.clone().cursor(next.clone()))
        .unwrap();
    let by_offset = searcher.search(&request.clone().page(5, 5)).unwrap();
    assert_eq!(second.clusters, by_offset.clusters);
    // A cursor of another list, or with an offset: refused.
    let other = SearchRequest::new("记者")
        .sort(Sort::SimilarDesc)
        .cursor(next.clone());
    assert!(matches!(
        searcher.search(&other),
        Err(tantivy_dedup::Error::Query(_))
    ));
    let offset = request.clone().page(5, 5).cursor(next.clone());
    assert!(matches!(
        searcher.search(&offset),
        Err(tantivy_dedup::Error::Query(_))
    ));
    // The index changed: a process that did not pin the walk's snapshot cannot go on.
    let fresh = fixture.new_text(&mut rng, "after-the-walk");
    fixture.add(fresh);
    fixture.index.commit().unwrap();
    let changed = DedupSearcher::open(fixture.dir.path()).unwrap();
    assert!(matches!(
        changed.search(&request.clone().cursor(next.clone())),
        Err(tantivy_dedup::Error::CursorExpired)
    ));
    // The process that pinned it still can.
    assert_eq!(
        searcher.search(&request.cursor(next)).unwrap().clusters,
        by_offset.clusters
    );
}

/// Detail pages: `similar(id, ..)` lists the other live documents of the id's cluster by
/// (event time, insert order), paginated, with `total = cluster_size - 1`; unknown and
/// deleted ids give `None`.
#[test]
fn similar_lists_the_rest_of_the_cluster() {
    let mut fixture = ingested();
    fixture.mutate();
    let docs = check_live(&fixture.index, &fixture.live);
    let searcher = fixture.index.searcher();
    let mut by_root: HashMap<u64, Vec<&LiveDoc>> = HashMap::new();
    for doc in &docs {
        by_root.entry(doc.root).or_default().push(doc);
    }
    for members in by_root.values_mut() {
        members.sort_by_key(|doc| (doc.time, doc.seq));
    }
    let largest = by_root.values().map(Vec::len).max().unwrap();
    assert!(largest >= 4, "largest cluster has {largest} documents");
    let mut checked_with_others = 0;
    for (i, doc) in docs.iter().enumerate() {
        let members = &by_root[&doc.root];
        if i % 4 != 0 && members.len() < 3 {
            continue;
        }
        let expected: Vec<&str> = members
            .iter()
            .filter(|member| member.id != doc.id)
            .map(|member| member.id.as_str())
            .collect();
        let page = searcher
            .similar(&doc.id, 0, MAX_PAGE_SIZE)
            .unwrap()
            .unwrap();
        assert_eq!(page.document.id, doc.id);
        assert_eq!(page.document.root, Fingerprint(doc.root));
        assert_eq!(page.document.simhash, Fingerprint(doc.simhash));
        assert_eq!(page.document.source, doc.source);
        assert_eq!(page.document.published_at, Some(doc.time));
        assert_eq!(page.cluster_size, members.len() as u64, "{}", doc.id);
        assert_eq!(page.total, members.len() as u64 - 1, "{}", doc.id);
        let ids: Vec<&str> = page.documents.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, expected, "{}", doc.id);
        for view in &page.documents {
            let article = &fixture.live[&view.id];
            assert_eq!(view.source, article.source);
            assert_eq!(view.published_at, article.published_at);
            assert_eq!(view.title, article.title);
            assert_eq!(view.url, article.url);
            assert_eq!(view.root, Fingerprint(doc.root));
        }
        checked_with_others += usize::from(!expected.is_empty());
        let total = expected.len();
        for (offset, limit) in [(1, 2), (0, 1), (total.saturating_sub(1), 5), (total, 3)] {
            let page = searcher.similar(&doc.id, offset, limit).unwrap().unwrap();
            assert_eq!(page.total, total as u64);
            let ids: Vec<&str> = page.documents.iter().map(|d| d.id.as_str()).collect();
            let want: Vec<&str> = expected.iter().copied().skip(offset).take(limit).collect();
            assert_eq!(ids, want, "{} at {offset}+{limit}", doc.id);
        }
    }
    assert!(checked_with_others >= 10, "{checked_with_others}");
    assert_eq!(searcher.similar("no-such-id", 0, 10).unwrap(), None);
    let mut deleted = 0;
    for article in &fixture.gone {
        if !fixture.live.contains_key(&article.id) {
            assert_eq!(searcher.similar(&article.id, 0, 10).unwrap(), None);
            assert_eq!(searcher.document(&article.id).unwrap(), None);
            deleted += 1;
        }
    }
    assert!(deleted >= 20, "{deleted}");
    assert!(searcher.similar(&docs[0].id, 0, MAX_PAGE_SIZE + 1).is_err());
}

/// Near-duplicate checks equal a scan of every live document by the forest's edge rule (default
/// mode: reached, within `max_distance` or through a shared sketch key, and verified by the
/// sketches), nearest fingerprint first then earliest, for indexed texts, deleted and replaced
/// texts and new reposts that were never indexed.
#[test]
fn near_duplicates_equal_a_scan() {
    let mut fixture = ingested();
    fixture.mutate();
    let docs = check_live(&fixture.index, &fixture.live);
    let searcher = fixture.index.searcher();
    let config = searcher.config().clone();
    let k = config.dedup.max_distance;
    let dedup = Deduplicator::new(config.dedup.clone()).unwrap();

    let mut texts: Vec<(Article, bool)> = Vec::new();
    for article in fixture.live.values().step_by(6) {
        texts.push((article.clone(), true));
    }
    for article in fixture.gone.iter().step_by(2) {
        texts.push((article.clone(), false));
    }
    let mut rng = SmallRng::seed_from_u64(0x0ea7);
    for (title, body) in TEMPLATES {
        let content = repost(&mut rng, body);
        let article = article(&mut rng, "unindexed".into(), 0, title.into(), content);
        texts.push((article, false));
    }
    let (title, content) = unrelated_story(&mut rng);
    texts.push((article(&mut rng, "new".into(), 0, title, content), false));

    let signer = dedup.signer();
    let verifier = config
        .dedup
        .verifier()
        .expect("the fixture runs default mode");
    let (mut with_matches, mut with_several, mut unindexed_with_matches) = (0, 0, 0);
    let mut beyond_k = 0;
    for (article, indexed) in &texts {
        let signature = signer.sign(article);
        let (simhash, sketch) = (signature.fingerprint, signature.sketch.unwrap());
        let is_near = |doc: &&LiveDoc| {
            let other = signer.sign(&fixture.live[&doc.id]).sketch.unwrap();
            let shares_key = sketch.keys().iter().any(|key| other.keys().contains(key));
            let within_k = simhash.distance(Fingerprint(doc.simhash)) <= k;
            (within_k || shares_key) && verifier.matches(&sketch, &other)
        };
        let mut near: Vec<(u32, i64, DocAddress, &str)> = docs
            .iter()
            .filter(is_near)
            .map(|doc| {
                let distance = simhash.distance(Fingerprint(doc.simhash));
                (distance, doc.time, doc.address, doc.id.as_str())
            })
            .collect();
        near.sort();
        let expected: Vec<(u32, &str)> = near.iter().map(|&(d, _, _, id)| (d, id)).collect();
        for limit in [MAX_PAGE_SIZE, 1, 2] {
            let found = searcher.near_duplicates(article, limit).unwrap();
            assert_eq!(found.simhash, simhash, "{}", article.content);
            let actual: Vec<(u32, &str)> = found
                .matches
                .iter()
                .map(|m| (m.distance, m.document.id.as_str()))
                .collect();
            let want: Vec<(u32, &str)> = expected.iter().copied().take(limit).collect();
            assert_eq!(actual, want, "limit {limit}: {}", article.content);
            for found in &found.matches {
                let doc = docs.iter().find(|doc| doc.id == found.document.id).unwrap();
                assert_eq!(found.document.simhash, Fingerprint(doc.simhash));
                assert_eq!(found.document.root, Fingerprint(doc.root));
            }
        }
        if *indexed {
            assert_eq!(expected.first().map(|&(d, _)| d), Some(0), "{}", article.id);
        }
        beyond_k += expected.iter().filter(|&&(d, _)| d > k).count();
        with_matches += usize::from(!expected.is_empty());
        with_several += usize::from(expected.len() >= 2);
        unindexed_with_matches += usize::from(!indexed && !expected.is_empty());
    }
    assert!(with_matches >= 40, "{with_matches}");
    assert!(with_several >= 5, "{with_several}");
    assert!(unindexed_with_matches >= 5, "{unindexed_with_matches}");
    assert!(beyond_k >= 5, "verified matches beyond k: {beyond_k}");
    assert!(
        searcher
            .near_duplicates(&texts[0].0, MAX_PAGE_SIZE + 1)
            .is_err()
    );
}

/// Retention: each commit deletes the documents published before the newest time minus the
/// retention; they leave search and `stats().documents` and are counted as tombstones,
/// including an old document ingested again after it expired.
#[test]
fn retention_deletes_old_documents_on_commit() {
    const RETENTION: i64 = 2 * 3600;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config();
    config.index.retention = Some(Duration::from_secs(RETENTION as u64));
    let mut index = DedupIndex::create(dir.path(), config).unwrap();
    let articles = corpus(0x7e7e);
    assert!(articles.len() as i64 * 60 > 2 * RETENTION);
    let mut ingested: BTreeMap<String, Article> = BTreeMap::new();
    let mut newest = i64::MIN;
    let mut expired = 0u64;

    let check = |index: &DedupIndex, ingested: &BTreeMap<String, Article>, newest, expired| {
        let cutoff = newest - RETENTION;
        let live: BTreeMap<String, Article> = ingested
            .iter()
            .filter(|(_, article)| article.published_at.unwrap() >= cutoff)
            .map(|(id, article)| (id.clone(), article.clone()))
            .collect();
        check_live(index, &live);
        let searcher = index.searcher();
        let stats = searcher.stats().unwrap();
        assert_eq!(stats.documents, live.len() as u64);
        assert_eq!(stats.tombstones, expired);
        let all = searcher.search(&SearchRequest::new("")).unwrap();
        assert_eq!(all.total_hits, live.len() as u64);
        let old = SearchRequest::new("").published(None, Some(cutoff - 1));
        assert_eq!(searcher.search(&old).unwrap().total_hits, 0);
        let trending = SearchRequest::new("记者").trend(TrendSpan::default(), Some(newest));
        check_search(&searcher, &trending);
        live.len() as u64
    };

    for chunk in articles.chunks(50) {
        for article in chunk {
            index.add_article(article.clone()).unwrap();
            newest = newest.max(article.published_at.unwrap());
            ingested.insert(article.id.clone(), article.clone());
        }
        let before = ingested
            .values()
            .filter(|article| article.published_at.unwrap() < newest - RETENTION)
            .count() as u64;
        let deleted = index.commit().unwrap();
        assert_eq!(deleted, before - expired, "deleted by this commit");
        expired = before;
        check(&index, &ingested, newest, expired);
    }
    assert!(expired > 50, "{expired}");

    // An expired document ingested again, still old: deleted again by the commit.
    let first = articles[0].clone();
    index.add_article(first).unwrap();
    assert_eq!(index.commit().unwrap(), 1);
    expired += 1;
    check(&index, &ingested, newest, expired);
    assert_eq!(index.searcher().document(&articles[0].id).unwrap(), None);

    // A live document ingested again with a new time replaces it (a tombstone) and moves
    // the cutoff forward.
    let mut moved = articles[articles.len() - 1].clone();
    moved.published_at = Some(newest + 1800);
    newest += 1800;
    index.add_article(moved.clone()).unwrap();
    ingested.insert(moved.id.clone(), moved);
    let before = ingested
        .values()
        .filter(|article| article.published_at.unwrap() < newest - RETENTION)
        .count() as u64;
    let deleted = index.commit().unwrap();
    assert_eq!(deleted, before + 1 - expired);
    expired = before + 2;
    let live = check(&index, &ingested, newest, expired);
    assert!(live > 50);
    index.forest().check_invariants().unwrap();

    // Reopened, the index rebuilds the forest it had: the same nodes, roots, attachments,
    // times and children. (Not compared: the nodes' document counts, which retention's deletes
    // leave as they were while the replay takes the deleted documents off.)
    let shape = |index: &DedupIndex| {
        nodes(index)
            .into_iter()
            .map(|node| {
                let (fingerprint, root, attached) = (node.fingerprint, node.root, node.attached_to);
                (fingerprint, root, attached, node.last_seen, node.children)
            })
            .collect::<Vec<_>>()
    };
    let before = shape(&index);
    // Closed, it saves the forest's checkpoint, which the reopened index loads.
    index.close().unwrap();
    let index = DedupIndex::open(dir.path()).unwrap();
    let recovery = index.recovery();
    assert!(recovery.checkpoint_sequence.is_some(), "{recovery:?}");
    assert_eq!((recovery.replayed, recovery.mismatched_roots), (0, 0));
    index.forest().check_invariants().unwrap();
    assert_eq!(shape(&index), before);
    check(&index, &ingested, newest, expired);
}

/// Every node of the forest, by fingerprint.
fn nodes(index: &DedupIndex) -> Vec<NodeInfo> {
    let mut nodes: Vec<NodeInfo> = index.forest().nodes().collect();
    nodes.sort_by_key(|node| node.fingerprint);
    nodes
}

/// What a list page says of its clusters apart from scores (which Tantivy's statistics change
/// when segments merge), by root.
fn clusters_without_scores(index: &DedupIndex, request: &SearchRequest) -> Vec<String> {
    let request = request.clone().page(0, MAX_PAGE_SIZE);
    let page = index.searcher().search(&request).unwrap();
    let mut clusters: Vec<String> = page
        .clusters
        .iter()
        .map(|hit| {
            format!(
                "{} hits={} size={} sources={:?} newest={}",
                hit.root, hit.hits, hit.cluster_size, hit.sources, hit.newest
            )
        })
        .collect();
    clusters.sort();
    clusters
}

/// The forest keeps its invariants after ingest, deletes and replacements; an index reopened
/// from disk rebuilds the same forest (every node, with its root, attachment, time and
/// counts), answers list pages that equal brute force and the same clusters as before, and
/// decides later inserts exactly as an index that was never reopened.
#[test]
fn forest_invariants_hold_and_survive_a_reopen() {
    let mut fixture = ingested();
    fixture.index.forest().check_invariants().unwrap();
    fixture.mutate();
    fixture.index.forest().check_invariants().unwrap();

    let before = nodes(&fixture.index);
    let docs = check_live(&fixture.index, &fixture.live);
    for doc in &docs {
        let root = fixture.index.forest().root_of(Fingerprint(doc.simhash));
        assert_eq!(root, Some(Fingerprint(doc.root)), "{}", doc.id);
    }
    let request_list = requests(fixture.next_slot);
    let clusters: Vec<_> = request_list
        .iter()
        .map(|request| clusters_without_scores(&fixture.index, request))
        .collect();

    let Fixture {
        dir,
        index,
        live,
        gone,
        tombstones,
        next_slot,
    } = fixture;
    // Without `close` (and its checkpoint): every insert is replayed.
    drop(index);
    let index = DedupIndex::open(dir.path()).unwrap();
    let recovery = index.recovery();
    assert_eq!(recovery.mismatched_roots, 0);
    assert_eq!(recovery.tombstones, tombstones);
    assert_eq!(recovery.replayed, live.len() as u64 + tombstones);
    index.forest().check_invariants().unwrap();
    assert_eq!(nodes(&index), before);
    for (request, clusters) in request_list.iter().zip(&clusters) {
        assert_eq!(&clusters_without_scores(&index, request), clusters);
    }
    let mut reopened = Fixture {
        dir,
        index,
        live,
        gone,
        tombstones,
        next_slot,
    };
    check_live(&reopened.index, &reopened.live);
    check_requests(&reopened);

    // The same history without the reopen, then the same new articles into both.
    let mut straight = ingested();
    straight.mutate();
    let mut rng = SmallRng::seed_from_u64(0xaf7e7);
    for i in 0..60 {
        let (title, body) = if i % 3 == 0 {
            unrelated_story(&mut rng)
        } else {
            let (title, body) = TEMPLATES.choose(&mut rng).unwrap();
            (title.to_string(), repost(&mut rng, body))
        };
        let id = if i % 10 == 0 {
            reopened.live.keys().nth(i).unwrap().clone() // a replacement
        } else {
            format!("later-{i}")
        };
        let article = article(&mut rng, id, reopened.next_slot + i, title, body);
        assert_eq!(
            reopened.index.add_article(article.clone()).unwrap(),
            straight.index.add_article(article).unwrap()
        );
        if i % 25 == 24 {
            reopened.index.commit().unwrap();
            straight.index.commit().unwrap();
        }
    }
    reopened.index.commit().unwrap();
    straight.index.commit().unwrap();
    assert_eq!(nodes(&reopened.index), nodes(&straight.index));
    reopened.index.forest().check_invariants().unwrap();
}

/// Without keywords every member of a story scores alike: the earliest published heads it,
/// whatever order the documents came in (and so do identical reprints under keywords).
#[test]
fn a_story_is_headed_by_its_first_outlet() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    let text =
        "市气象台发布暴雨橙色预警，预计未来六小时内城区将出现五十毫米以上降雨，请市民减少外出。";
    let day = 1_714_492_800;
    for (id, source, time) in [
        ("late", "人民网", day + 7_200),
        ("first", "新华网", day),
        ("next", "央视网", day + 3_600),
    ] {
        let article = Article {
            id: id.into(),
            source: Some(source.into()),
            content: text.into(),
            published_at: Some(time),
            ..Default::default()
        };
        index.add_article(article).unwrap();
    }
    index.commit().unwrap();
    let searcher = index.searcher();
    for (query, sort) in [
        ("", Sort::Newest),
        ("", Sort::Oldest),
        ("", Sort::SimilarDesc),
        ("暴雨", Sort::Relevance),
    ] {
        let page = searcher
            .search(&SearchRequest::new(query).sort(sort))
            .unwrap();
        assert_eq!(page.clusters.len(), 1, "{query:?}");
        assert_eq!(page.clusters[0].cluster_size, 3);
        assert_eq!(
            page.clusters[0].representative.id, "first",
            "{query:?} {sort:?}"
        );
    }
}
