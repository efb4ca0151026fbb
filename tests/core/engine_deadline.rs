//! A list page's time limit (`SearchRequest::deadline`): a page past it is stopped and
//! answers `Error::DeadlineExceeded`, never a partial page; a page within it is the page
//! without one, figures and counts included.

use std::time::{Duration, Instant};

use tantivy_dedup::engine::{DedupIndex, HistogramWidth, SearchRequest, Sort};
use tantivy_dedup::{Article, Error};

use crate::engine_collapse::config;

const OUTLETS: [&str; 3] = ["新华网", "人民网", "央视网"];

#[test]
fn a_page_past_its_deadline_answers_no_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupIndex::create(dir.path(), config()).unwrap();
    // Two segments, and more matches than the collector takes between looks at the clock.
    for part in 0..2 {
        for n in 0..1500 {
            index
                .add_article(Article {
                    id: format!("{part}-{n}"),
                    source: Some(OUTLETS[n % OUTLETS.len()].into()),
                    content: format!(
                        "第{part}批第{n}号通知：本市第{n}个社区服务中心今天启用，提供{}项便民服务。",
                        n % 37
                    ),
                    published_at: Some(1_714_492_800 + (part * 1500 + n) as i64 * 600),
                    ..Default::default()
                })
                .unwrap();
        }
        index.commit().unwrap();
    }
    let searcher = index.searcher();
    let requests = [
        SearchRequest::new(""),
        SearchRequest::new("社区")
            .sort(Sort::SimilarDesc)
            .facets(["source"])
            .histogram(HistogramWidth::Auto),
    ];
    for request in requests {
        let unlimited = searcher.search(&request).unwrap();
        assert!(unlimited.total_hits > 1024, "{request:?}");
        let in_time = request
            .clone()
            .deadline(Instant::now() + Duration::from_secs(600));
        assert_eq!(searcher.search(&in_time).unwrap(), unlimited);
        let too_late = request.clone().deadline(Instant::now());
        assert!(
            matches!(searcher.search(&too_late), Err(Error::DeadlineExceeded)),
            "{request:?}"
        );
    }
}
