//! A news index end to end: ingest a few invented stories as several outlets reposted them,
//! show a list page (one line per story, with its number of similar articles), a detail page
//! (the other outlets that carried the top story), and a check before publishing.
//!
//! Run with `cargo run --example list_and_detail`. The articles below were written for this
//! example; outlets, places and figures are made up. The reposts differ by markup, punctuation
//! and character width, which seed mode's simhash already absorbs; default mode (used here)
//! also finds copies with headers, footers and cuts, which move the simhash past k.

use tantivy_dedup::config::Config;
use tantivy_dedup::engine::{DedupIndex, SearchRequest, Sort};
use tantivy_dedup::{Article, Fingerprint};

/// Invented stories: (outlet, minutes after the first, headline, body).
const ARTICLES: &[(&str, i64, &str, &str)] = &[
    (
        "青川日报",
        0,
        "青川县遭遇强降雨 转移群众两千余人",
        "受强对流天气影响，青川县昨夜至今晨普降暴雨，局地降雨量超过一百五十毫米。县防汛指挥部\
         启动防汛三级应急响应，连夜转移安置低洼地带群众两千三百余人，目前暂无人员伤亡报告。\
         气象部门预计，未来三天当地仍有中到大雨，提醒群众远离河道和山体边坡。",
    ),
    (
        "江城晚报",
        25,
        "青川暴雨：两千余名群众连夜转移",
        "<div class=\"article\">受强对流天气影响,青川县昨夜至今晨普降暴雨,局地降雨量超过一百五十毫米.\
         县防汛指挥部启动防汛三级应急响应,连夜转移安置低洼地带群众两千三百余人,目前暂无人员\
         伤亡报告.气象部门预计,未来三天当地仍有中到大雨,提醒群众远离河道和山体边坡.</div>",
    ),
    (
        "山南新闻网",
        70,
        "青川县启动防汛三级应急响应",
        "<p>受强对流天气影响，青川县昨夜至今晨普降暴雨，局地降雨量超过一百五十毫米。</p>\
         <p>县防汛指挥部启动防汛三级应急响应，连夜转移安置低洼地带群众两千三百余人，目前暂无人员伤亡报告。</p>\
         <p>气象部门预计，未来三天当地仍有中到大雨，提醒群众远离河道和山体边坡。&nbsp;</p>",
    ),
    (
        "青川日报",
        90,
        "青川县新建防汛物资仓库投入使用",
        "青川县新建的防汛物资储备仓库今天正式投入使用。仓库面积一千二百平方米，储备冲锋舟、\
         救生衣、沙袋等物资四十余种，可满足全县一次较大汛情的抢险需要。县应急管理局表示，\
         将定期检查物资状态，确保关键时刻调得出、用得上。",
    ),
    (
        "江城晚报",
        120,
        "江城地铁五号线试运行",
        "江城地铁五号线今天开始空载试运行，全线设站十八座，连接老城区与东部新区。运营单位介绍，\
         试运行期间将全面检验车辆、信号、供电等系统的稳定性，预计年底前开通载客运营，届时\
         东部新区到老城区的通勤时间将缩短二十分钟以上。",
    ),
    (
        "山南新闻网",
        150,
        "江城地铁五号线开始空载试运行 年底前有望载客",
        "江城地铁五号线今天开始空载试运行，全线设站十八座，连接老城区与东部新区。运营单位介绍，\
         试运行期间将全面检验车辆、信号、供电等系统的稳定性，预计年底前开通载客运营，届时\
         东部新区到老城区的通勤时间将缩短二十分钟以上。",
    ),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut index = DedupIndex::create(dir.path(), Config::default())?;
    let start = 1_714_521_600; // 2024-05-01T00:00:00Z
    for (number, (source, minutes, title, content)) in ARTICLES.iter().enumerate() {
        let decision = index.add_article(Article {
            id: format!("a{number}"),
            title: Some((*title).to_owned()),
            content: (*content).to_owned(),
            source: Some((*source).to_owned()),
            url: Some(format!("https://news.example/{number}")),
            published_at: Some(start + minutes * 60),
        })?;
        println!(
            "indexed a{number} from {source}: cluster {}{}",
            decision.root,
            if decision.duplicate { " (repost)" } else { "" }
        );
    }
    index.commit()?;
    let searcher = index.searcher();

    println!("\nList page for 青川, most reposted first:");
    let page = searcher.search(&SearchRequest::new("青川").sort(Sort::SimilarDesc))?;
    println!(
        "{} articles in {} stories",
        page.total_hits, page.total_clusters
    );
    for cluster in &page.clusters {
        println!(
            "  {}  ({} similar articles; carried by {})",
            cluster.representative.title.as_deref().unwrap_or("-"),
            cluster.cluster_size - 1,
            cluster.sources.join("、")
        );
    }

    let top = &page.clusters[0].representative;
    println!(
        "\nDetail page of {:?}: the other outlets, earliest first",
        top.id
    );
    if let Some(detail) = searcher.similar(&top.id, 0, 10)? {
        for other in &detail.documents {
            println!(
                "  {}  {}  {}",
                other.source.as_deref().unwrap_or("-"),
                other.title.as_deref().unwrap_or("-"),
                other.url.as_deref().unwrap_or("-")
            );
        }
    }

    let draft = Article {
        id: "draft".into(),
        content:
            "【本网讯】江城地铁五号线今天开始空载试运行，全线设站十八座，连接老城区与东部新区。\
                  运营单位介绍，试运行期间将全面检验车辆、信号、供电等系统的稳定性，预计年底前开通\
                  载客运营，届时东部新区到老城区的通勤时间将缩短二十分钟以上。"
                .into(),
        ..Default::default()
    };
    let check = searcher.near_duplicates(&draft, 5)?;
    println!(
        "\nBefore publishing a draft (fingerprint {}): {} near-duplicates already indexed",
        check.simhash,
        check.matches.len()
    );
    for found in &check.matches {
        println!(
            "  {} bits apart: {} ({})",
            found.distance,
            found.document.title.as_deref().unwrap_or("-"),
            found.document.source.as_deref().unwrap_or("-")
        );
    }
    assert!(
        page.clusters[0].cluster_size >= 2,
        "the reposts form one story"
    );
    assert_ne!(check.simhash, Fingerprint(0));
    Ok(())
}
