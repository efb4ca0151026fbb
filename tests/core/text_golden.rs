//! Golden cases for the text pipeline (docs/algorithm.md, "The fingerprint"): what a repost
//! changes without
//! changing the content must not change the fingerprint, a small edit must move it only a few
//! bits, and unrelated stories must land far apart.
//!
//! The stories below are invented for these tests (places, people and figures are fictional).

use tantivy_dedup::Fingerprint;
use tantivy_dedup::text::{
    AnalyzedText, Fingerprinter, Weighting, is_feature, jieba, longest_sentence, normalize,
};

const K: u32 = 3;

/// A made-up local news story of some 1,500 characters, paragraphs separated by line breaks,
/// written with the usual Chinese (full-width) punctuation and ASCII digits.
const STORY: &str = "临江市启动老旧小区改造三年行动，首批42个小区本月开工
本报讯（记者 周明远）3月18日上午，临江市政府召开新闻发布会，正式公布《临江市老旧小区改造三年行动方案（2024—2026年）》。根据方案，全市计划在三年内完成186个老旧小区的综合改造，惠及居民约5.8万户，总投资预计达到37.6亿元，其中首批42个小区将于本月底陆续开工。
临江市住房和城乡建设局局长王海涛在发布会上介绍，此次纳入改造范围的小区大多建成于上世纪八九十年代，普遍存在管网老化、屋面渗漏、停车位不足、缺少无障碍设施等问题。“过去几年，我们收到的群众来信中，有将近三成与老旧小区的居住条件有关。”王海涛说，“这次改造不搞大拆大建，而是坚持‘一区一策’，先问需于民，再定改造清单。”
据了解，改造内容分为基础类、完善类和提升类三个层次。基础类主要包括供水、排水、供电、燃气等管线更新，以及楼体外墙保温和屋面防水；完善类包括加装电梯、增设停车位、建设充电桩和改造小区道路；提升类则涉及社区养老托育、便民市场、文化活动室等公共服务设施的配建。对于居民意愿强烈的加装电梯项目，市财政将给予每台最高20万元的补贴，不足部分由业主按楼层分摊。
在资金筹措方面，方案提出建立政府、企业、居民合理共担的机制。除中央和省级补助资金外，临江市还将发行专项债券，并引入社会资本参与小区停车场、充电设施等经营性项目的建设与运营。市财政局相关负责人表示，今年已安排配套资金9.2亿元，确保首批项目按期启动。
记者走访了首批改造名单中的东湖新村。这个建成于1987年的小区共有23栋楼、1100余户居民，其中60岁以上老人占比超过四成。72岁的居民李桂芳告诉记者，她家住在6楼，每次买菜回来都要歇好几次才能爬上去。“听说要装电梯，楼里的老邻居都签了字，大家盼了好多年了。”
东湖新村所在的滨河街道党工委书记陈晓丽介绍，街道从去年11月起就组织工作人员逐户上门征求意见，共发放问卷3400多份，收集到的意见建议涉及停车、绿化、晾晒、快递存放等十几个方面。“有的居民希望多留一些绿地，有的希望多划停车位，我们通过议事会反复协商，最后形成了大家都能接受的方案。”
为保障施工期间居民的正常生活，临江市要求各施工单位实行“一楼一公示”制度，在每栋楼下张贴施工内容、工期安排和投诉电话，并合理安排作业时间，夜间和午休时段禁止高噪声施工。同时，市住建局将联合第三方机构开展全过程质量监督，改造完成后还将组织居民代表参与验收，验收不合格的项目不予结算。
业内专家认为，老旧小区改造既是民生工程，也是扩大内需的重要抓手。临江大学城市规划系教授刘建国表示，改造不仅能改善居民的居住条件，还能带动建材、家装、养老服务等相关产业的发展。“关键是要建立长效管理机制，防止改造完了又回到老样子。”他建议，各小区在改造后应引入专业物业服务，或者由社区牵头成立业主自治组织，把后续的维护管理落到实处。
按照计划，临江市今年将完成首批42个小区的改造任务，明年和后年再分别完成72个。市政府表示，将定期向社会公布改造进度，接受群众监督。";

/// A second, unrelated made-up story of some 650 characters.
const OTHER_STORY: &str = "青石县万亩茶园迎来春茶开采，电商直播助力茶农增收
清明前夕，青石县云雾山上的万亩茶园一片新绿，茶农们背着竹篓穿行在茶垄间，抢抓晴好天气采摘今年的头茬春茶。据县农业农村局统计，今年全县茶园面积达到12.3万亩，预计春茶产量约2600吨，产值有望突破9亿元。
“今年开春以后雨水充足，气温回升平稳，茶芽长得又嫩又匀。”在云雾山村种了三十多年茶的老茶农赵德胜一边熟练地掐下芽尖，一边向记者介绍。他家今年承包了15亩茶园，采下的鲜叶直接送到村里的合作社加工，每斤鲜叶的收购价比去年高出五六元。
近年来，青石县大力推广生态种植技术，在茶园里套种绿肥、安装太阳能杀虫灯、悬挂粘虫板，减少化肥农药使用量。县里还建起了茶叶质量追溯平台，消费者扫描包装上的二维码，就能查到茶叶的产地、采摘时间和加工流程。
与此同时，电商直播正在改变茶叶的销售方式。在云雾山村的直播间里，返乡青年孙雨婷正对着手机镜头冲泡新茶，向网友讲解绿茶的冲泡水温和品鉴方法。她告诉记者，去年她的直播间一共卖出了8万多单茶叶，带动周边200多户茶农增收。县商务局负责人表示，今年将继续开展电商培训，计划培养本土主播500名，让更多的好茶走出大山。
为了稳定茶叶品质，青石县今年还在各乡镇设立了12个鲜叶收购点，统一执行分级收购标准，由县茶叶协会派出技术员现场指导。协会会长周国平说，以前茶农各自为战，价格容易被压低，现在有了统一标准和品牌，外地客商愿意出更高的价钱。他希望再过几年，“青石云雾”能成为全国叫得响的茶叶品牌。";

/// A third made-up story with English abbreviations and figures, for the width tests.
const TECH_STORY: &str = "南港市5G智慧港口项目通过验收
记者从南港市港务集团获悉，该集团与本地通信运营商合作建设的5G智慧港口项目日前通过专家验收。项目在3号集装箱码头部署了46个5G基站，实现了岸桥远程操控、AGV无人集卡调度和AI理货识别等应用，码头作业效率提升约18%，单箱能耗下降约12%。
港务集团信息中心主任何立新介绍，过去一名岸桥司机要在离地40多米的驾驶室里连续工作数小时，如今通过5G网络，司机坐在中控室里就能同时操控3台岸桥。“视频回传的时延控制在20毫秒以内，画面清晰稳定，操作手感和在现场差不多。”
据悉，南港市计划到2026年底建成覆盖全部集装箱码头的5G专网，并探索北斗定位、数字孪生等技术在港口调度中的应用，力争把南港打造成区域性的智慧物流枢纽。";

fn tf() -> Fingerprinter {
    Fingerprinter::new(Weighting::Tf, false)
}

fn tfidf() -> Fingerprinter {
    Fingerprinter::new(Weighting::TfIdf, false)
}

/// Every full-width ASCII variant (U+FF01..U+FF5E) and the ideographic space to its ordinary
/// half-width form.
fn to_half_width(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xff01 + 0x21).unwrap(),
            '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

/// Every printable ASCII character (letters, digits, punctuation) to its full-width form.
fn to_full_width(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xff01).unwrap(),
            other => other,
        })
        .collect()
}

fn is_cjk(c: char) -> bool {
    ('\u{4e00}'..='\u{9fff}').contains(&c)
}

#[test]
fn stories_are_long_enough() {
    assert!(STORY.chars().count() >= 1_000, "{}", STORY.chars().count());
    assert!(OTHER_STORY.chars().count() >= 600);
    assert!(TECH_STORY.chars().count() >= 300);
}

#[test]
fn full_and_half_width_give_one_fingerprint() {
    for story in [STORY, OTHER_STORY, TECH_STORY] {
        let half = to_half_width(story);
        let full = to_full_width(story);
        // The variants really differ as text.
        assert_ne!(half, story);
        assert_ne!(full, story);
        assert!(full.contains('１') || full.contains('５'));
        assert!(half.contains(','));
        let fingerprint = tf().fingerprint(story);
        assert_eq!(tf().fingerprint(&half), fingerprint, "half-width");
        assert_eq!(tf().fingerprint(&full), fingerprint, "full-width");
        // Mixed: full-width digits and letters, half-width punctuation.
        let mixed: String = half
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    to_full_width(&c.to_string()).chars().next().unwrap()
                } else {
                    c
                }
            })
            .collect();
        assert_eq!(tf().fingerprint(&mixed), fingerprint, "mixed widths");
    }
}

#[test]
fn ascii_letter_case_does_not_matter() {
    let upper = TECH_STORY.replace("AGV", "agv").replace("AI", "Ai");
    assert_eq!(tf().fingerprint(&upper), tf().fingerprint(TECH_STORY));
}

#[test]
fn tf_idf_also_maps_width_variants_to_one_fingerprint() {
    for story in [STORY, OTHER_STORY, TECH_STORY] {
        let fingerprint = tfidf().fingerprint(story);
        assert_eq!(tfidf().fingerprint(&to_half_width(story)), fingerprint);
        assert_eq!(tfidf().fingerprint(&to_full_width(story)), fingerprint);
    }
    // TF-IDF is a different weighting: it should not coincide with TF on a long story.
    assert_ne!(tfidf().fingerprint(STORY), tf().fingerprint(STORY));
}

/// The story as a web page: document head with script and style, comments, wrapper divs,
/// paragraphs, inline markup, `&nbsp;` between characters and numeric character references.
fn as_html(story: &str) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"zh-CN\"><head><meta charset=\"utf-8\">\
         <script type=\"text/javascript\">var _hm = [];\nfunction track(){ if (a < b && c > d) { return '<p>新闻</p>'; } }</script>\
         <style>p { text-indent: 2em; } .ad{display:none}</style></head>\n\
         <body><!-- 页头广告位 开始 --><!-- 页头广告位 结束 -->\n<div class=\"main\"><div id=\"article-body\">\n",
    );
    for (number, paragraph) in story.lines().enumerate() {
        let mut marked = paragraph
            .replacen("中", "&#20013;", 1)
            .replacen("国", "&#x56fd;", 1)
            .replacen("市", "<strong>市</strong>", 1)
            .replacen("，", "，<!-- 内文注释 -->", 1);
        // A non-breaking space between two Chinese characters, as editors' tools leave them.
        let chars: Vec<(usize, char)> = marked.char_indices().collect();
        if let Some(pair) = chars
            .windows(2)
            .skip(5)
            .find(|pair| is_cjk(pair[0].1) && is_cjk(pair[1].1))
        {
            marked.insert_str(pair[1].0, "&nbsp;");
        }
        if number == 0 {
            html.push_str(&format!("<h1 class=\"title\">{marked}</h1>\n"));
        } else {
            html.push_str(&format!(
                "<p style=\"text-indent:2em\">\n  <span>{marked}</span>\n</p>\n"
            ));
        }
        if number == 3 {
            html.push_str("<script>document.write('<div>推荐阅读</div>');</script>\n");
        }
    }
    html.push_str(
        "</div></div><!-- 正文结束 -->\n<script src=\"/static/app.js\"></script></body></html>",
    );
    html
}

#[test]
fn html_noise_gives_the_clean_texts_fingerprint() {
    for story in [STORY, OTHER_STORY, TECH_STORY] {
        let html = as_html(story);
        assert!(html.contains("&#") && html.contains("&nbsp;") && html.contains("<script>"));
        assert_eq!(tf().fingerprint(&html), tf().fingerprint(story), "{html}");
        assert_eq!(tfidf().fingerprint(&html), tfidf().fingerprint(story));
    }
}

#[test]
fn entities_decode_to_the_characters_they_stand_for() {
    let plain = "中国人民银行今天宣布下调存款准备金率。";
    let encoded = "&#20013;&#x56fd;人民&#38134;&#34892;今天宣布下调存款准备金率。";
    assert_eq!(tf().fingerprint(encoded), tf().fingerprint(plain));
    assert_eq!(normalize(encoded), normalize(plain));
}

#[test]
fn white_space_between_chinese_characters_is_ignored() {
    let spaces = [" ", "\t", "\u{3000}", "  ", " \t ", "\u{a0}", "\u{200b}"];
    let mut spaced = String::new();
    let mut previous: Option<char> = None;
    let mut inserted = 0;
    for (i, c) in STORY.chars().enumerate() {
        if i % 5 == 0 && previous.is_some_and(is_cjk) && is_cjk(c) {
            spaced.push_str(spaces[inserted % spaces.len()]);
            inserted += 1;
        }
        spaced.push(c);
        previous = Some(c);
    }
    assert!(inserted > 100, "{inserted}");
    assert_eq!(tf().fingerprint(&spaced), tf().fingerprint(STORY));
    assert_eq!(tfidf().fingerprint(&spaced), tfidf().fingerprint(STORY));
    // Leading and trailing white space, and runs of blank lines between paragraphs.
    let padded = format!(
        "  \n\n{}\n\n \t",
        STORY.replace('\n', "\n \n\u{3000}\u{3000}")
    );
    assert_eq!(tf().fingerprint(&padded), tf().fingerprint(STORY));
    // Hard-wrapped lines (a copy taken from a fixed-width layout) move it at most k bits.
    let joined = STORY.replace('\n', "");
    let mut wrapped = String::new();
    for (i, c) in joined.chars().enumerate() {
        if i % 37 == 36 {
            wrapped.push('\n');
        }
        wrapped.push(c);
    }
    assert!(
        tf().fingerprint(&wrapped)
            .distance(tf().fingerprint(&joined))
            <= K
    );
    // Windows line ends.
    assert_eq!(
        tf().fingerprint(&STORY.replace('\n', "\r\n")),
        tf().fingerprint(STORY)
    );
}

/// Replaces the `nth` character (which must be a Chinese character) with `with`.
fn replace_char(text: &str, nth: usize, with: &str) -> String {
    let (position, c) = text.char_indices().nth(nth).unwrap();
    format!(
        "{}{with}{}",
        &text[..position],
        &text[position + c.len_utf8()..]
    )
}

/// Indexes of Chinese characters spread evenly over the text.
fn edit_positions(text: &str, count: usize) -> Vec<usize> {
    let chars: Vec<char> = text.chars().collect();
    (0..count)
        .map(|i| {
            let mut at = (i * 2 + 1) * chars.len() / (count * 2);
            while !is_cjk(chars[at]) {
                at += 1;
            }
            at
        })
        .collect()
}

#[test]
fn one_character_edit_moves_the_fingerprint_at_most_k_bits() {
    let original = tf().fingerprint(STORY);
    let mut report = Vec::new();
    let mut moved = 0;
    for at in edit_positions(STORY, 12) {
        let current = STORY.chars().nth(at).unwrap();
        let with = if current == '甲' { "乙" } else { "甲" };
        let edits = [
            ("substitute", replace_char(STORY, at, with)),
            ("delete", replace_char(STORY, at, "")),
            (
                "insert",
                replace_char(STORY, at, &format!("{current}{with}")),
            ),
        ];
        for (kind, edited) in edits {
            assert_ne!(edited, STORY);
            let distance = tf().fingerprint(&edited).distance(original);
            report.push(format!("{kind} at {at}: {distance}"));
            moved += usize::from(distance > 0);
            assert!(
                distance <= K,
                "{kind} at char {at} moved {distance} bits: {report:?}"
            );
        }
    }
    eprintln!("{report:?}");
    // Simhash is locality-sensitive, not blind: some edits do move some bits.
    assert!(moved > 0, "no edit changed the fingerprint: {report:?}");
}

#[test]
fn unrelated_stories_are_far_apart() {
    let stories = [STORY, OTHER_STORY, TECH_STORY];
    for weighting in [Weighting::Tf, Weighting::TfIdf] {
        let fingerprinter = Fingerprinter::new(weighting, false);
        let fingerprints: Vec<Fingerprint> = stories
            .iter()
            .map(|s| fingerprinter.fingerprint(s))
            .collect();
        for i in 0..stories.len() {
            for j in i + 1..stories.len() {
                let distance = fingerprints[i].distance(fingerprints[j]);
                assert!(
                    distance > K,
                    "{weighting:?}: stories {i} and {j} only {distance} apart"
                );
            }
        }
    }
}

#[test]
fn longest_sentence_option_ignores_an_edited_short_paragraph() {
    let longest = longest_sentence(STORY);
    assert!(longest.chars().count() > 60, "{longest}");
    // Rewrite the last paragraph entirely (it is short and holds no longest sentence).
    let last = STORY.lines().last().unwrap();
    assert!(!last.contains(longest));
    let edited = STORY.replace(
        last,
        "截至发稿时，首批项目中已有十个小区完成围挡施工，其余小区正在办理开工手续。",
    );
    assert_eq!(longest_sentence(&edited), longest);
    let by_sentence = Fingerprinter::new(Weighting::Tf, true);
    assert_eq!(
        by_sentence.fingerprint(&edited),
        by_sentence.fingerprint(STORY)
    );
    // The whole-text fingerprint does see the edit (so the option is what made the difference).
    assert_ne!(tf().fingerprint(&edited), tf().fingerprint(STORY));
    // And the longest sentence alone fingerprints like the option over the whole text.
    assert_eq!(by_sentence.fingerprint(STORY), tf().fingerprint(longest));
    // TF-IDF with the option as well.
    let by_sentence_idf = Fingerprinter::new(Weighting::TfIdf, true);
    assert_eq!(
        by_sentence_idf.fingerprint(&edited),
        by_sentence_idf.fingerprint(STORY)
    );
}

#[test]
fn sentence_end_punctuation_repeated_does_not_matter() {
    let shouty = STORY.replace('。', "。。").replace('，', "，，");
    assert_eq!(tf().fingerprint(&shouty), tf().fingerprint(STORY));
}

/// The weighted simhash of docs/algorithm.md ("Weights and the simhash"), written out
/// independently: jieba words of the normalised text,
/// features by `is_feature`, each hashed with xxh3 and summed +1 / -1 per bit.
fn reference_tf_simhash(text: &str) -> Fingerprint {
    let normalized = normalize(text);
    let mut sums = [0i64; 64];
    for token in jieba().cut(&normalized, true) {
        if !is_feature(token.word) {
            continue;
        }
        let hash = xxhash_rust::xxh3::xxh3_64(token.word.as_bytes());
        for (bit, sum) in sums.iter_mut().enumerate() {
            *sum += if hash >> bit & 1 == 1 { 1 } else { -1 };
        }
    }
    Fingerprint(
        sums.iter()
            .enumerate()
            .filter(|&(_, &sum)| sum > 0)
            .fold(0, |value, (bit, _)| value | 1 << bit),
    )
}

#[test]
fn tf_fingerprint_equals_a_reference_simhash() {
    // (Text with no word features at all takes a fallback fingerprint, tested in the library.)
    for story in [STORY, OTHER_STORY, TECH_STORY, "短讯：今日无事。"] {
        assert_eq!(
            tf().fingerprint(story),
            reference_tf_simhash(story),
            "{story}"
        );
    }
    // Text without word features does not collapse to the all-zero fingerprint (which would
    // put every such text in one cluster); a single feature gives its own hash.
    assert_ne!(tf().fingerprint(""), Fingerprint(0));
    assert_ne!(tf().fingerprint("，。！"), tf().fingerprint(""));
    assert_eq!(
        tf().fingerprint("新闻"),
        Fingerprint(xxhash_rust::xxh3::xxh3_64("新闻".as_bytes()))
    );
}

#[test]
fn stop_words_and_punctuation_are_not_features() {
    assert!(!is_feature("的"));
    assert!(!is_feature("，"));
    assert!(!is_feature("。"));
    assert!(is_feature("改造"));
    assert!(is_feature("5g"));
}

/// Characters to build random texts from: common Chinese characters (so jieba finds real
/// words of every length), ASCII letters and digits, connectors, punctuation, markup and
/// white space.
const POOL: &[&str] = &[
    "中", "华", "人", "民", "共", "和", "国", "新", "闻", "联", "播", "经", "济", "发", "展", "会",
    "议", "今", "天", "上", "午", "交", "通", "部", "门", "百", "分", "之", "十", "一", "的", "了",
    "是", "在", "北", "京", "大", "学", "生", "产", "线", "重", "点", "项", "目", "A", "b", "WES",
    "5", ".", "-", "2024", "，", "。", "！", " ", "\n", "<p>", "&amp;", "（", "）", "Ｃ", "１",
    "😀",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// The index's one-pass analysis (search-mode tokens, whole words picked out) gives the
    /// default segmentation's words, so the fingerprint is the same on both paths.
    #[test]
    fn analysis_gives_the_default_segmentation(picks in proptest::collection::vec(0..POOL.len(), 0..80)) {
        let text: String = picks.iter().map(|&i| POOL[i]).collect();
        let normalized = normalize(&text);
        // The index keeps only words with a letter or digit (the only possible features).
        let mut cut = Vec::new();
        tantivy_dedup::text::split_words(&normalized, |word| {
            if tantivy_dedup::text::has_letter_or_digit(word) {
                cut.push(word.to_owned());
            }
        });
        let analyzed = AnalyzedText::new(&text);
        let whole: Vec<String> = analyzed
            .tokens()
            .filter(|(_, span)| span.whole_word)
            .map(|(word, _)| word.to_owned())
            .collect();
        proptest::prop_assert_eq!(&cut, &whole, "{:?}", text);
        for fingerprinter in [tf(), Fingerprinter::new(Weighting::TfIdf, true)] {
            proptest::prop_assert_eq!(
                fingerprinter.fingerprint_analyzed(&[&analyzed]),
                fingerprinter.fingerprint(&text)
            );
        }
    }
}
