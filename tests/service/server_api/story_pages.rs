//! The story view (`GET /v1/stories/{root}`) against the model of the acknowledged documents:
//! its first outlet, per-outlet counts and histogram are computed here from what the server
//! answered each POST (the roots) and the documents' own sources and times; its members, paged
//! in both orders, are exactly the cluster's; each attachment names an earlier member of the
//! story; bad requests get their 4xx.

use super::*;

/// The index's zone (the default, China) as an offset, for bucket alignment.
const ZONE_OFFSET: i64 = 8 * 3600;

/// The start of the bucket of `width` seconds holding `time`, buckets aligned on the zone's
/// midnight.
fn bucket(time: i64, width: i64) -> i64 {
    (time + ZONE_OFFSET).div_euclid(width) * width - ZONE_OFFSET
}

/// Checks the story of every cluster of at least `min_size` members (and a few singletons)
/// against the model.
pub(super) fn check_story_pages(server: &TestServer, model: &Model) {
    assert_eq!(
        Config::default().index.time_zone,
        tantivy_dedup::local_time::TimeZone::CHINA
    );
    let roots = model.roots();
    let mut checked = 0;
    for root in roots {
        let members: Vec<&Live> = model
            .live
            .values()
            .filter(|live| live.root == root)
            .collect();
        if members.len() < 2 && checked % 5 != 0 {
            continue;
        }
        checked += 1;
        check_story(server, root, &members);
    }
    assert!(checked > 10, "{checked} stories checked");
}

fn check_story(server: &TestServer, root: u64, members: &[&Live]) {
    let hex = hex(root);
    let reply = server.get(&format!("/v1/stories/{hex}?limit=1000"));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let story = &reply.json;
    assert_eq!(story["root"], json!(hex));
    assert_eq!(story["cluster_size"], json!(members.len()));

    // First published: the earliest, then the first acknowledged.
    let first = members
        .iter()
        .min_by_key(|live| (live.doc.published_at, live.sequence))
        .expect("a member");
    assert_eq!(
        story["first_published"],
        json!({"id": first.doc.id, "source": first.doc.source, "published_at": first.doc.published_at}),
        "{hex}"
    );

    // Outlets: most articles, then the earliest first publication, then the name.
    let mut outlets: BTreeMap<Option<&str>, (u64, i64)> = BTreeMap::new();
    for live in members {
        let entry = outlets
            .entry(live.doc.source.as_deref())
            .or_insert((0, i64::MAX));
        entry.0 += 1;
        entry.1 = entry.1.min(live.doc.published_at);
    }
    let mut expected: Vec<(Option<&str>, u64, i64)> = outlets
        .into_iter()
        .map(|(source, (articles, first))| (source, articles, first))
        .collect();
    expected.sort_by_key(|&(source, articles, first)| (std::cmp::Reverse(articles), first, source));
    let expected: Vec<Value> = expected
        .into_iter()
        .map(|(source, articles, first)| {
            json!({"source": source, "articles": articles, "first_published_at": first})
        })
        .collect();
    assert_eq!(story["outlets"], json!(expected), "{hex}");

    // The hourly histogram, from the first member's hour to the last's, empty hours included.
    let counts: BTreeMap<i64, u64> = members.iter().fold(BTreeMap::new(), |mut counts, live| {
        *counts
            .entry(bucket(live.doc.published_at, 3600))
            .or_default() += 1;
        counts
    });
    let (first_hour, last_hour) = (counts.keys().next(), counts.keys().next_back());
    let (Some(&first_hour), Some(&last_hour)) = (first_hour, last_hour) else {
        panic!("no members");
    };
    let histogram: Vec<Value> = (first_hour..=last_hour)
        .step_by(3600)
        .map(|start| json!({"start": start, "articles": counts.get(&start).copied().unwrap_or(0)}))
        .collect();
    assert_eq!(story["interval"], json!(3600));
    assert_eq!(story["histogram"], json!(histogram), "{hex}");

    // Members: all of them, earliest first; each attachment an earlier member; evidence of
    // the distance to the root.
    let mut by_time: Vec<&&Live> = members.iter().collect();
    by_time.sort_by_key(|live| (live.doc.published_at, live.sequence));
    let listed = story["members"].as_array().expect("members");
    let ids: Vec<&str> = listed
        .iter()
        .filter_map(|member| member["id"].as_str())
        .collect();
    let expected_ids: Vec<&str> = by_time.iter().map(|live| live.doc.id.as_str()).collect();
    assert_eq!(ids, expected_ids, "{hex}");
    let by_id: HashMap<&str, &Live> = members
        .iter()
        .map(|live| (live.doc.id.as_str(), *live))
        .collect();
    for member in listed {
        let live = by_id[member["id"].as_str().expect("id")];
        check_view(member, live);
        assert_eq!(
            member["evidence"]["distance"],
            json!(distance(live.simhash, root))
        );
        assert!(
            member.get("content").is_none(),
            "members carry a snippet, not the text"
        );
        assert!(member["snippet"].as_str().is_some_and(|s| !s.is_empty()));
        match member["attached_to"].as_str() {
            None => {
                assert!(member["evidence"]["similarity"].is_null());
            }
            Some(through) => {
                let through = by_id
                    .get(through)
                    .expect("attached to a member of the story");
                assert!(
                    through.sequence < live.sequence,
                    "attached to an earlier member"
                );
                let similarity = member["evidence"]["similarity"].as_f64().expect("verified");
                assert!((0.0..=1.0).contains(&similarity), "{similarity}");
            }
        }
    }
    // Only the story's first member (when it is still live) came in through nothing.
    let unattached = listed
        .iter()
        .filter(|member| member["attached_to"].is_null())
        .count();
    assert!(unattached >= 1);

    // Pages in each order concatenate to the whole, in that order.
    for sort in ["time", "source"] {
        let mut paged = Vec::new();
        for offset in (0..members.len() + 2).step_by(3) {
            let reply = server.get(&format!(
                "/v1/stories/{hex}?sort={sort}&offset={offset}&limit=3&histogram=1d"
            ));
            assert_eq!(reply.status, 200, "{}", reply.text);
            assert_eq!(reply.json["interval"], json!(86_400));
            paged.extend(
                reply.json["members"]
                    .as_array()
                    .expect("members")
                    .iter()
                    .filter_map(|member| member["id"].as_str().map(str::to_owned)),
            );
        }
        let mut expected: Vec<&&Live> = members.iter().collect();
        if sort == "source" {
            expected.sort_by_key(|live| {
                (
                    live.doc.source.is_none(),
                    live.doc.source.clone(),
                    live.doc.published_at,
                    live.sequence,
                )
            });
        } else {
            expected.sort_by_key(|live| (live.doc.published_at, live.sequence));
        }
        let expected: Vec<String> = expected.iter().map(|live| live.doc.id.clone()).collect();
        assert_eq!(paged, expected, "{hex} by {sort}");
    }
}

/// Unknown stories are 404; bad roots and parameters 400, each naming what is wrong.
pub(super) fn check_story_errors(server: &TestServer, model: &Model) {
    let roots = model.roots();
    let unknown = (1..)
        .map(|n: u64| n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .find(|n| !roots.contains(n));
    let unknown = hex(unknown.expect("a free root"));
    let any = hex(*roots.iter().next().expect("a root"));
    for (path, status, code) in [
        (format!("/v1/stories/{unknown}"), 404, "not_found"),
        ("/v1/stories/not-hex".to_owned(), 400, "invalid_path"),
        (
            "/v1/stories/0123456789abcdef0".to_owned(),
            400,
            "invalid_path",
        ),
        (
            format!("/v1/stories/{any}?sort=newest"),
            400,
            "invalid_parameter",
        ),
        (
            format!("/v1/stories/{any}?histogram=0s"),
            400,
            "invalid_parameter",
        ),
        (
            format!("/v1/stories/{any}?limit=100000"),
            400,
            "invalid_parameter",
        ),
        (
            format!("/v1/stories/{any}?offset=-1"),
            400,
            "invalid_parameter",
        ),
        (
            format!("/v1/stories/{any}?color=red"),
            400,
            "invalid_parameter",
        ),
    ] {
        let reply = server.get(&path);
        assert_eq!(reply.status, status, "{path}: {}", reply.text);
        assert_eq!(reply.error().0, code, "{path}");
    }
}
