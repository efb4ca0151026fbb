//! The web page of `serve` (`src/server/web.rs`) in a real browser: Debian's headless
//! Chromium (`apt-get install -y chromium`; missing, these tests fail rather than skip) loads
//! the pages from a `serve` process on loopback, runs their script against the API, and the
//! test reads the DOM it leaves (`--dump-dom`, after the page's requests have settled under
//! `--virtual-time-budget`) and takes screenshots. The DOM is read through the hooks of SPEC
//! §4: `data-testid="cluster"` with `data-root` and `data-cluster-size`, `data-testid="member"`
//! with `data-id`, `data-testid="first-published"` with `data-id`.
//!
//! The corpus is written here: four stories about railways, each first published by one outlet
//! and reposted by others over the next hours with small edits (a source line, an original
//! title line, an editor's footer, markup, a changed word), and articles that stand alone.
//!
//! `TANTIVY_DEDUP_SCREENSHOTS=docs/images cargo test --test service web_page` also writes the
//! three pages' screenshots there (the README's).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::required_programs::require_on_path;
use crate::serve_process::{Serve, pct};

/// 2024-11-25 00:00 in China (UTC+8), the day the first story breaks.
const DAY0: i64 = 1_732_464_000;
/// The list page the tests open, and the keyword every story shares.
const QUERY: &str = "高铁";
const HOUR: i64 = 3600;

/// A story: its title, its sentences, and the outlets that carry it, the first publishing it
/// at `start` hours after `DAY0` and the others `delay` hours after that.
struct Story {
    title: &'static str,
    sentences: &'static [&'static str],
    start: i64,
    outlets: &'static [(&'static str, f64)],
}

const STORIES: [Story; 4] = [
    Story {
        title: "沪渝蓉高铁武汉至宜昌段开通运营 两地最快1小时通达",
        sentences: &[
            "11月25日上午9时，随着G6701次列车从武汉站缓缓驶出，沪渝蓉高铁武汉至宜昌段正式开通运营。",
            "这段线路全长约315公里，设计时速350公里，沿线设有汉川、天门、潜江、荆州、枝江等车站。",
            "开通后，武汉至宜昌最快旅行时间由原来的2小时压缩至1小时左右，江汉平原腹地首次接入时速350公里的高铁网。",
            "建设过程中，施工单位攻克了软土地基沉降控制、跨越汉江特大桥合龙等多项技术难题。",
            "铁路部门表示，开通初期每天安排动车组列车40余对，并将根据客流变化适时增开。",
            "沿线不少市民专程赶来体验首发列车，有人带着孩子拍照留念，说以后回老家看父母方便多了。",
        ],
        start: 9,
        outlets: &[
            ("长江日报", 0.0),
            ("湖北日报", 0.6),
            ("新华网", 1.2),
            ("人民网", 2.5),
            ("澎湃新闻", 3.2),
            ("中国新闻网", 5.0),
            ("央视新闻", 8.5),
        ],
    },
    Story {
        title: "2025年春运火车票今起开售 12306候补购票新增自动提醒",
        sentences: &[
            "记者从国铁集团获悉，2025年春运火车票将于今日起陆续开售，春运期间全国铁路预计发送旅客5.1亿人次。",
            "今年春运自1月14日开始，至2月22日结束，共计40天。",
            "为方便旅客出行，铁路12306客户端新增了候补购票自动兑现提醒功能，旅客可同时选择多个车次和席别。",
            "铁路部门提醒，高铁和普速列车的开售时间不同，旅客应以车站公告和12306网站信息为准。",
            "针对老年旅客，部分车站还将开设爱心窗口，提供现场购票和改签服务。",
            "专家建议，出行时间较灵活的旅客可以错峰购票，避开节前客流最高峰。",
        ],
        start: 24 + 8,
        outlets: &[
            ("新华网", 0.0),
            ("央视新闻", 0.4),
            ("北京青年报", 1.5),
            ("环球网", 3.0),
            ("光明网", 26.0),
        ],
    },
    Story {
        title: "京沪高铁复兴号静音车厢扩大试点 每天超过80趟列车设置",
        sentences: &[
            "从本月起，京沪高铁静音车厢试点范围进一步扩大，每天有超过80趟复兴号列车设置静音车厢。",
            "选择静音车厢的旅客需将手机调至静音模式，接打电话和视频通话须到车厢连接处进行。",
            "列车工作人员会在静音车厢内轻声服务，车厢内的广播音量也相应调低。",
            "据统计，试点以来静音车厢的上座率一直保持在九成以上，受到商务旅客和学生群体欢迎。",
            "也有旅客建议，静音车厢应进一步明确儿童乘车的相关规则，避免产生矛盾。",
            "铁路部门表示，将结合旅客意见不断完善服务规范。",
        ],
        start: 24 + 14,
        outlets: &[
            ("人民网", 0.0),
            ("北京青年报", 2.0),
            ("澎湃新闻", 4.5),
            ("中国新闻网", 20.0),
        ],
    },
    Story {
        title: "杭州东站扩容改造完工 新增候车面积约一万平方米",
        sentences: &[
            "经过一年多施工，杭州东站扩容改造工程日前全部完工，车站新增候车面积约一万平方米。",
            "改造后的候车大厅增设了母婴室、自助寄存柜和充电座椅，进站安检通道由24条增加到32条。",
            "车站还优化了高铁与地铁、公交之间的换乘流线，旅客从出站口步行到地铁站只需三分钟。",
            "杭州东站是长三角重要的铁路枢纽，节假日单日旅客发送量曾突破二十万人次。",
            "车站负责人介绍，改造期间车站始终保持正常运营，施工主要安排在夜间进行。",
            "下一步，车站还将上线智能导航服务，帮助旅客快速找到检票口。",
        ],
        start: 48 + 10,
        outlets: &[("钱江晚报", 0.0), ("浙江日报", 1.0), ("新华网", 6.0)],
    },
];

/// Articles that no other outlet carries: (outlet, hours after `DAY0`, title, text).
const ALONE: [(&str, i64, &str, &str); 4] = [
    (
        "中国铁路",
        20,
        "高铁乘务员的一天：从清晨五点开始",
        "凌晨四点五十分，乘务员小周已经在公寓里整理好制服，准备值乘当天的第一趟高铁。\
         出乘前，她要参加班前点名，熟悉当天的客流情况和重点旅客名单。\
         一趟往返下来，她在车厢里要走上两万多步，帮旅客放行李、找座位、解答换乘问题。\
         小周说，最让她难忘的是一次帮一位突发低血糖的老人联系列车上的医生。",
    ),
    (
        "光明网",
        50,
        "山区小城盼来高铁 当地居民讲述出行变化",
        "以前去省城要坐六个小时的大巴，如今坐高铁一个半小时就到了。\
         在县城开了二十年小饭馆的老陈说，高铁站通车以后，周末来吃饭的外地游客明显多了。\
         当地政府正在高铁站附近规划建设物流园和游客集散中心。\
         不少在外打工的年轻人也开始考虑回乡创业。",
    ),
    (
        "界面新闻",
        62,
        "研究报告：高铁网络带动沿线城市旅游消费",
        "一家研究机构近日发布报告称，高铁开通三年后，沿线中小城市的旅游收入平均增长约两成。\
         报告分析了全国一百多个城市的数据，发现距离省会两小时高铁圈内的城市受益最为明显。\
         研究人员同时提醒，客流增加并不会自动转化为消费，城市还需要补齐住宿和餐饮短板。",
    ),
    (
        "北京日报",
        30,
        "社区食堂推出老年助餐服务 每餐优惠三元",
        "朝阳区一家社区食堂本周起推出老年助餐服务，六十岁以上老人凭卡就餐每餐优惠三元。\
         食堂每天提供两荤两素和一份汤，菜品少油少盐，还可以按需加工软烂饭菜。\
         行动不便的老人可以通过电话预约，由志愿者送餐上门。",
    ),
];

/// An article as posted, with the root its answer gave.
struct Posted {
    id: String,
    time: i64,
    root: String,
}

/// The title and text of copy number `copy` of `story` (the copy of its outlet number `copy`):
/// the first is the story as written; the others carry what reposts carry (a source line, an
/// original-title line, an editor, markup, a changed word), a different one each.
fn repost(story: &Story, copy: usize) -> (String, String) {
    let body = story.sentences.join("");
    let (first_outlet, _) = story.outlets[0];
    match copy {
        0 => (story.title.to_owned(), body),
        1 => (
            story.title.to_owned(),
            format!("来源：{first_outlet}\n{body}"),
        ),
        2 => (
            story.title.to_owned(),
            format!("{body}\n（责任编辑：王磊）"),
        ),
        3 => (
            format!("{}（组图）", story.title),
            format!("原标题：{}\n{body}", story.title),
        ),
        4 => (
            story.title.to_owned(),
            story
                .sentences
                .iter()
                .map(|sentence| format!("<p>{sentence}</p>"))
                .chain([format!("<p>转载自：{first_outlet}</p>")])
                .collect(),
        ),
        5 => (
            story.title.to_owned(),
            format!("{}\n编辑：李晓", body.replacen("表示", "介绍", 1)),
        ),
        _ => (
            format!("【转载】{}", story.title),
            format!("来源：{first_outlet}\n{body}\n（完）"),
        ),
    }
}

/// Posts the corpus in publication order, as a feed brings it; returns what was posted, with
/// the roots.
fn post_corpus(server: &Serve) -> Vec<Posted> {
    let mut articles = Vec::new();
    for (number, story) in STORIES.iter().enumerate() {
        for (copy, (outlet, delay)) in story.outlets.iter().enumerate() {
            let (title, content) = repost(story, copy);
            let time = DAY0 + story.start * HOUR + (delay * HOUR as f64) as i64;
            articles.push(json!({
                "id": format!("story{number}-{copy}"), "title": title, "content": content,
                "source": outlet, "published_at": time,
                "url": format!("https://news.example.cn/{number}/{copy}.html"),
            }));
        }
    }
    for (number, (outlet, hours, title, content)) in ALONE.iter().enumerate() {
        articles.push(json!({
            "id": format!("alone-{number}"), "title": title, "content": content,
            "source": outlet, "published_at": DAY0 + hours * HOUR,
            "url": format!("https://news.example.cn/alone/{number}.html"),
        }));
    }
    articles.sort_by_key(|article| article["published_at"].as_i64());
    let answer = server.post(&Value::Array(articles.clone()));
    assert_eq!(answer["failed"], 0, "{answer}");
    articles
        .iter()
        .zip(answer["results"].as_array().unwrap())
        .map(|(article, result)| {
            assert_eq!(result["id"], article["id"]);
            Posted {
                id: result["id"].as_str().unwrap().to_owned(),
                time: article["published_at"].as_i64().unwrap(),
                root: result["root"].as_str().unwrap().to_owned(),
            }
        })
        .collect()
}

// ---- the browser ----------------------------------------------------------------------------

/// How long one page may take in the browser, wall-clock.
const PAGE_DEADLINE: Duration = Duration::from_secs(90);
/// The window screenshots are taken at.
const WINDOW: (u32, u32) = (1280, 1100);

/// Debian's headless Chromium, run once per page, each run in a fresh profile under `dir`
/// (so no key, cache or storage carries over), its clock in UTC: far from the index's zone
/// (UTC+8), in which the pages show times and days whatever the reader's clock.
struct Browser {
    dir: PathBuf,
    runs: usize,
}

impl Browser {
    fn new(dir: &Path) -> Self {
        require_on_path("chromium", "chromium");
        Browser {
            dir: dir.to_owned(),
            runs: 0,
        }
    }

    /// Loads `url`, lets its script's requests settle, and runs the browser with `action`
    /// (`--dump-dom`, `--screenshot=FILE`); answers its standard output.
    fn run(&mut self, url: &str, action: &str) -> String {
        self.runs += 1;
        let profile = self.dir.join(format!("profile-{}", self.runs));
        let log = self.dir.join(format!("chromium-{}.log", self.runs));
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--lang=zh-CN",
                "--virtual-time-budget=20000",
                &format!("--window-size={},{}", WINDOW.0, WINDOW.1),
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(action)
            .arg(url)
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            stdout.read_to_string(&mut text).map(|_| text)
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > PAGE_DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "chromium did not finish {url} within {PAGE_DEADLINE:?}:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let output = reader.join().unwrap().unwrap();
        assert!(
            status.success(),
            "chromium {action} {url}: {status}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        output
    }

    /// The DOM of `url` once its script has drawn it, checked to be drawn without an error.
    fn drawn_page(&mut self, url: &str) -> String {
        let dom = self.run(url, "--dump-dom");
        let main = elements_with(&dom, "id", "main");
        assert_eq!(
            main.first()
                .and_then(|main| main.get("data-state"))
                .map(String::as_str),
            Some("ready"),
            "{url} was not drawn:\n{dom}"
        );
        dom
    }

    /// A screenshot of `url` as `NAME.png` in the browser's directory, checked to be a PNG of
    /// the window's size; the README's three (`list`, `story`, `check`) copied as
    /// `web-NAME.png` into `$TANTIVY_DEDUP_SCREENSHOTS` (relative to the crate) when that is
    /// set.
    fn screenshot(&mut self, url: &str, name: &str) {
        let file = self.dir.join(format!("{name}.png"));
        self.run(url, &format!("--screenshot={}", file.display()));
        let png = std::fs::read(&file).unwrap();
        assert!(
            png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR",
            "{} is not a PNG",
            file.display()
        );
        let size = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
        assert_eq!((size(16), size(20)), WINDOW, "{}", file.display());
        let in_readme = ["list", "trending", "story", "check"].contains(&name);
        if let Some(copies) = std::env::var_os("TANTIVY_DEDUP_SCREENSHOTS").filter(|_| in_readme) {
            let copies = Path::new(env!("CARGO_MANIFEST_DIR")).join(copies);
            std::fs::create_dir_all(&copies).unwrap();
            std::fs::copy(&file, copies.join(format!("web-{name}.png"))).unwrap();
        }
    }
}

// ---- reading the DOM ------------------------------------------------------------------------

/// The attributes of every start tag of `html` (a serialised DOM, where `<` only opens tags)
/// that has `name="value"`, in document order; the page's `<template>`s (the pieces it is
/// drawn from, not drawn themselves) left out.
fn elements_with(html: &str, name: &str, value: &str) -> Vec<BTreeMap<String, String>> {
    let mut drawn = Vec::new();
    let mut rest = html;
    while let Some((before, template)) = rest.split_once("<template") {
        drawn.push(before);
        rest = template
            .split_once("</template>")
            .map_or("", |(_, after)| after);
    }
    drawn.push(rest);
    drawn
        .into_iter()
        .flat_map(|part| part.split('<').skip(1))
        .map(attributes)
        .filter(|attributes| attributes.get(name).map(String::as_str) == Some(value))
        .collect()
}

/// The attributes of the start tag at the beginning of `tag` (after its `<`).
fn attributes(tag: &str) -> BTreeMap<String, String> {
    let mut attributes = BTreeMap::new();
    let Some(mut rest) = tag.split_once(char::is_whitespace).map(|(_, rest)| rest) else {
        return attributes;
    };
    loop {
        rest = rest.trim_start();
        let end = rest
            .find(|c: char| c == '=' || c == '>' || c.is_whitespace())
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(end);
        if name.is_empty() || name == "/" {
            return attributes;
        }
        match after.strip_prefix("=\"") {
            Some(quoted) => {
                let (value, after) = quoted.split_once('"').unwrap();
                let value = value
                    .replace("&quot;", "\"")
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&");
                attributes.insert(name.to_owned(), value);
                rest = after;
            }
            None => {
                attributes.insert(name.to_owned(), String::new());
                rest = after;
            }
        }
    }
}

/// The values of `attribute` on the elements with `data-testid="testid"`, in page order.
fn hooks(dom: &str, testid: &str, attribute: &str) -> Vec<String> {
    elements_with(dom, "data-testid", testid)
        .into_iter()
        .map(|element| {
            element
                .get(attribute)
                .unwrap_or_else(|| panic!("a {testid} without {attribute}: {element:?}"))
                .clone()
        })
        .collect()
}

// ---- the tests ------------------------------------------------------------------------------

#[test]
fn list_story_and_check_pages_show_what_the_api_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut browser = Browser::new(dir.path());
    let server = Serve::start(&dir.path().join("index"), |_| {});
    let posted = post_corpus(&server);
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    for article in &posted {
        *sizes.entry(&article.root).or_default() += 1;
    }

    // The list page shows the API's stories, in its order, each with its size.
    let list = format!("{}/?q={}&sort=similar_desc", server.base, pct(QUERY));
    let dom = browser.drawn_page(&list);
    let page = server.search(&format!(
        "q={}&sort=similar_desc&limit=20&highlight=true&facets=source&histogram=1d&members=3",
        pct(QUERY)
    ));
    let api_lines: Vec<(String, String)> = page["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cluster| {
            let root = cluster["root"].as_str().unwrap().to_owned();
            let size = cluster["cluster_size"].as_u64().unwrap();
            assert_eq!(Some(&size), sizes.get(root.as_str()), "{cluster}");
            (root, size.to_string())
        })
        .collect();
    let page_lines: Vec<(String, String)> = hooks(&dom, "cluster", "data-root")
        .into_iter()
        .zip(hooks(&dom, "cluster", "data-cluster-size"))
        .collect();
    assert_eq!(page_lines, api_lines);
    // Under each story, its other articles as the API lists them (three at most).
    let api_members: Vec<String> = page["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|cluster| cluster["members"].as_array().unwrap())
        .map(|member| member["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(api_members.len() >= 2 * STORIES.len(), "{api_members:?}");
    assert_eq!(hooks(&dom, "list-member", "data-id"), api_members);
    assert!(
        page_lines.iter().filter(|(_, size)| size != "1").count() >= STORIES.len(),
        "every story is a line with its reposts: {page_lines:?}"
    );
    assert!(
        page_lines
            .iter()
            .all(|(root, _)| root.len() == 16 && root.bytes().all(|b| b.is_ascii_hexdigit())),
        "{page_lines:?}"
    );
    // Each story's highlights as the API gives them: its title with the words marked when
    // they are in it, the fragments of its body one after the other; its link carries the
    // keywords to the story page.
    let lines: Vec<&str> = dom
        .split("data-testid=\"cluster\"")
        .skip(1)
        .filter(|line| line.trim_start().starts_with("data-root"))
        .collect();
    let clusters = page["clusters"].as_array().unwrap();
    assert_eq!(lines.len(), clusters.len());
    let mut marked_titles = 0;
    for (line, cluster) in lines.iter().zip(clusters) {
        let highlights = &cluster["representative"]["highlights"];
        let fragments = highlights["content"].as_array().map_or(0, Vec::len);
        assert_eq!(
            line.matches("class=\"fragment\"").count(),
            fragments,
            "{cluster}"
        );
        let title = &line[line.find("cluster-title").unwrap()..line.find("</h2>").unwrap()];
        assert_eq!(
            title.contains("<em>"),
            highlights.get("title").is_some(),
            "{title}"
        );
        marked_titles += usize::from(title.contains("<em>"));
        let root = cluster["root"].as_str().unwrap();
        assert!(
            line.contains(&format!("href=\"/story/{root}?q={}\"", pct(QUERY))),
            "{line}"
        );
    }
    assert!(
        marked_titles >= 1,
        "a title with the keywords is marked:\n{dom}"
    );
    assert!(
        dom.matches("class=\"fragment\"").count() > clusters.len(),
        "{dom}"
    );
    browser.screenshot(&list, "list");

    // The trending tab, looking back from the end of the second day over one day: the
    // stories with articles in that day, as GET /v1/trending orders them, each with the
    // articles that joined it in the window (counted here from what was posted) and its
    // growth against the day before.
    let end = DAY0 + 48 * HOUR;
    let trending = format!("{}/?sort=trending&window=24h&end={end}", server.base);
    let dom = browser.drawn_page(&trending);
    let (status, answer) = server.get(&format!("/v1/trending?window=24h&end={end}&limit=20"));
    assert_eq!(status, 200, "{answer}");
    let joined = |root: &str, hours: std::ops::Range<i64>| {
        posted
            .iter()
            .filter(|article| article.root == root)
            .filter(|article| {
                article.time > end - hours.end * HOUR && article.time <= end - hours.start * HOUR
            })
            .count() as i64
    };
    let api_lines: Vec<(String, String, String)> = answer["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cluster| {
            let root = cluster["root"].as_str().unwrap();
            let (recent, previous) = (joined(root, 0..24), joined(root, 24..48));
            assert_eq!(cluster["trend"]["recent"], recent, "{cluster}");
            assert_eq!(cluster["trend"]["growth"], recent - previous, "{cluster}");
            (
                root.to_owned(),
                recent.to_string(),
                (recent - previous).to_string(),
            )
        })
        .collect();
    let in_window: BTreeSet<&str> = posted
        .iter()
        .filter(|article| article.time > end - 24 * HOUR && article.time <= end)
        .map(|article| article.root.as_str())
        .collect();
    assert_eq!(api_lines.len(), in_window.len(), "{answer}");
    let page_lines: Vec<(String, String, String)> = hooks(&dom, "cluster", "data-root")
        .into_iter()
        .zip(hooks(&dom, "cluster", "data-recent"))
        .zip(hooks(&dom, "cluster", "data-growth"))
        .map(|((root, recent), growth)| (root, recent, growth))
        .collect();
    assert_eq!(page_lines, api_lines);
    let tab = elements_with(&dom, "data-tab", "trending");
    assert_eq!(
        tab[0].get("aria-current").map(String::as_str),
        Some("page"),
        "the trending tab is the current one: {tab:?}"
    );
    browser.screenshot(&trending, "trending");

    // The biggest story's page lists the API's members, first outlet the earliest article.
    let (biggest, _) = sizes.iter().max_by_key(|(_, size)| **size).unwrap();
    let members: BTreeSet<&str> = posted
        .iter()
        .filter(|article| article.root == *biggest)
        .map(|article| article.id.as_str())
        .collect();
    let earliest = posted
        .iter()
        .filter(|article| article.root == *biggest)
        .min_by_key(|article| article.time)
        .unwrap();
    let story = format!("{}/story/{biggest}", server.base);
    let dom = browser.drawn_page(&story);
    let (status, answer) = server.get(&format!("/v1/stories/{biggest}"));
    assert_eq!(status, 200, "{answer}");
    let api_members: Vec<&str> = answer["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| member["id"].as_str().unwrap())
        .collect();
    assert_eq!(hooks(&dom, "member", "data-id"), api_members);
    assert_eq!(
        api_members.iter().copied().collect::<BTreeSet<_>>(),
        members
    );
    assert_eq!(
        hooks(&dom, "first-published", "data-id"),
        [earliest.id.as_str()]
    );
    // Opened from the list, its members show where they match the list's keywords.
    let story = format!("{}/story/{biggest}?q={}", server.base, pct(QUERY));
    let dom = browser.drawn_page(&story);
    let (status, answer) = server.get(&format!("/v1/stories/{biggest}?q={}", pct(QUERY)));
    assert_eq!(status, 200, "{answer}");
    let fragments: usize = answer["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| {
            member["highlights"]["content"]
                .as_array()
                .map_or(0, Vec::len)
        })
        .sum();
    assert!(fragments >= api_members.len(), "{answer}");
    assert_eq!(
        dom.matches("class=\"fragment\"").count(),
        fragments,
        "{dom}"
    );
    assert!(dom.contains("<em>"), "{dom}");
    browser.screenshot(&story, "story");

    // The check page finds a repost of that story, linked to its story page.
    let (title, content) = repost(&STORIES[0], 2);
    let check = format!(
        "{}/check?title={}&text={}",
        server.base,
        pct(&title),
        pct(&content)
    );
    let dom = browser.drawn_page(&check);
    assert!(
        hooks(&dom, "match", "data-root").contains(&biggest.to_string()),
        "the check finds story {biggest}:\n{dom}"
    );

    browser.screenshot(&check, "check");
}

#[test]
fn the_page_loads_without_a_key_and_asks_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut browser = Browser::new(dir.path());
    let server = Serve::start(&dir.path().join("index"), |command| {
        command
            .env("TANTIVY_DEDUP_WRITE_KEY", "write-key-for-the-web-test")
            .env("TANTIVY_DEDUP_READ_KEY", "read-key-for-the-web-test");
    });
    let get = |path: &str, headers: &[(&str, &str)]| {
        let mut request = server.agent.get(format!("{}{path}", server.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.call().unwrap()
    };

    // The shell and its files need no key, and come with their type, policy and validator.
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/story/0123456789abcdef", "text/html; charset=utf-8"),
        ("/check", "text/html; charset=utf-8"),
        ("/assets/app.js", "text/javascript; charset=utf-8"),
        ("/assets/style.css", "text/css; charset=utf-8"),
        ("/assets/icon.svg", "image/svg+xml"),
    ] {
        let mut response = get(path, &[]);
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(header("content-type"), content_type, "{path}");
        assert_eq!(header("cache-control"), "no-cache", "{path}");
        assert!(
            header("content-security-policy").starts_with("default-src 'self';"),
            "{path}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        let etag = header("etag");
        let body = response.body_mut().read_to_string().unwrap();
        if path == "/" {
            // Scripts come from files only: the policy allows no inline script.
            assert!(body.contains("lang=\"zh-CN\""));
            for tag in body.split("<script").skip(1) {
                assert!(tag.trim_start().starts_with("src="), "inline script: {tag}");
            }
        }
        let again = get(path, &[("if-none-match", &etag)]);
        assert_eq!(again.status().as_u16(), 304, "{path} with {etag}");
    }

    // The API still needs the key, and the page still the Host check.
    assert_eq!(get("/v1/search", &[]).status().as_u16(), 401);
    assert_eq!(
        get("/", &[("host", "news.example.com")]).status().as_u16(),
        421
    );

    // In the browser, the list page's first call is refused and the page asks for the key.
    let dom = browser.run(&format!("{}/?q={}", server.base, pct(QUERY)), "--dump-dom");
    let form = elements_with(&dom, "data-testid", "key-form");
    assert_eq!(form.len(), 1, "{dom}");
    assert!(
        !form[0].contains_key("hidden"),
        "the key form shows:\n{dom}"
    );
    let main = elements_with(&dom, "id", "main");
    assert_eq!(main[0]["data-state"], "needs-key", "{dom}");
}

/// Issue 33, item 9: a source with an unterminated right-to-left override (U+202E) turns only
/// itself around, not the outlets after it: each value set among other text is wrapped in
/// First Strong Isolate / Pop Directional Isolate, and inline elements are isolates.
#[test]
fn direction_marks_in_a_value_stay_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut browser = Browser::new(dir.path());
    let server = Serve::start(&dir.path().join("index"), |_| {});
    let hostile = "\u{202E}evil.example";
    let text = "高铁新线今天开通运营，沿线群众乘坐首发列车出行，车站秩序井然，旅客纷纷拍照留念。";
    server.post(&json!([
        {"id": "b1", "content": text, "source": hostile, "published_at": DAY0},
        {"id": "b2", "content": text, "source": "人民网", "published_at": DAY0 + HOUR},
    ]));
    let dom = browser.drawn_page(&format!("{}/?q={}", server.base, pct(QUERY)));
    assert!(
        dom.contains(&format!("\u{2068}{hostile}\u{2069}")),
        "the source is not isolated:\n{dom}"
    );
    assert!(dom.contains("\u{2068}人民网\u{2069}"), "{dom}");
    browser.screenshot(&format!("{}/?q={}", server.base, pct(QUERY)), "bidi");
}

/// Issue 33, items 6 and 14: the pages on data as it comes. A document dated 1990 beside this
/// year's news and a story of over a year still draw (histograms sized to the span; a story
/// page asked for too fine an interval falls back to one that fits, and says so); times are
/// the index's (UTC+8) on a reader's clock in UTC; a post without a title is named by its
/// first words; a snippet shows no markup; an outlet's many copies of its own story are one
/// line of the reprint path; errors are told in Chinese.
#[test]
fn the_pages_read_well_on_real_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut browser = Browser::new(dir.path());
    let config = dir.path().join("long-window.toml");
    // A window long enough for one story to last more than a year.
    std::fs::write(&config, "[dedup]\nwindow = \"1000d\"\n").unwrap();
    let server = Serve::start(&dir.path().join("index"), |command| {
        command.arg("--config").arg(&config);
    });
    let post = "#高铁# 今天第一次坐上新开通的高铁，从武汉到宜昌只要一个小时，窗外的江汉平原真美，推荐大家都来体验一下！";
    let gates = "<p>高铁沿线十二座车站今天同步启用新的电子客票闸机，旅客刷身份证即可进站乘车。</p>\
                 <p>铁路部门表示，新设备可将旅客进站时间缩短一半，高峰时段排队明显减少。</p>";
    let plan =
        "一份一九九〇年的高铁规划讨论稿近日公开，介绍了当时对京沪高铁线路走向的几种设想和争论。";
    let mut documents = vec![
        json!({"id": "post", "content": post, "source": "微博", "published_at": DAY0 + 9 * HOUR}),
        json!({"id": "plan-1990", "title": "高铁规划旧稿", "content": plan, "source": "档案馆",
               "published_at": 631_123_200 + 3 * 86_400}),
        json!({"id": "plan-again", "title": "高铁规划旧稿", "content": plan, "source": "档案馆",
               "published_at": 631_123_200 + 420 * 86_400}),
    ];
    for copy in 0..6 {
        documents.push(json!({
            "id": format!("gates-{copy}"), "title": "高铁车站启用电子客票闸机", "content": gates,
            "source": "铁路日报", "published_at": DAY0 + (10 + copy) * HOUR,
        }));
    }
    documents.sort_by_key(|document| document["published_at"].as_i64());
    let answer = server.post(&Value::Array(documents));
    assert_eq!(answer["failed"], 0, "{answer}");
    let root_of = |id: &str| {
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|result| result["id"] == id)
            .and_then(|result| result["root"].as_str())
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        root_of("plan-1990"),
        root_of("plan-again"),
        "one story over 417 days"
    );

    let list = format!("{}/?q={}", server.base, pct(QUERY));
    let dom = browser.drawn_page(&list);
    assert!(
        dom.contains("#高铁#今天第一次坐上新开通的高铁"),
        "the post's title:\n{dom}"
    );
    assert!(!dom.contains("（无标题）"), "{dom}");
    assert!(!dom.contains("&lt;p&gt;"), "markup in a snippet:\n{dom}");
    assert!(
        dom.contains("2024-11-25 09:00"),
        "the post's time in UTC+8:\n{dom}"
    );
    assert!(
        dom.contains("每年文章数"),
        "35 years in year buckets:\n{dom}"
    );
    browser.screenshot(&list, "real-data-list");

    // Six copies from one outlet: the first, then one line for the other five.
    let gates_story = format!("{}/story/{}", server.base, root_of("gates-0"));
    let dom = browser.drawn_page(&gates_story);
    assert!(dom.contains(" ×5"), "{dom}");
    assert_eq!(
        dom.matches("<li><strong>铁路日报</strong>").count(),
        2,
        "{dom}"
    );

    // Half-hour buckets over 417 days would be over 10,000: the page asks again, coarser.
    let plan_story = format!(
        "{}/story/{}?histogram=30m",
        server.base,
        root_of("plan-1990")
    );
    let dom = browser.drawn_page(&plan_story);
    assert!(dom.contains("已改为自动间隔"), "{dom}");

    // A story no index holds: told in Chinese, the server's words in small print.
    let dom = browser.run(
        &format!("{}/story/0123456789abcdef", server.base),
        "--dump-dom",
    );
    assert!(dom.contains("没有找到这项内容"), "{dom}");
    assert_eq!(
        elements_with(&dom, "id", "main")[0]["data-state"],
        "error",
        "{dom}"
    );
}
