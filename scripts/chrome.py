# usage: chrome.py labeled.jsonl.gz out.jsonl.gz sites seed
# Wraps every document in the page of one of `sites` invented news sites, chosen at random:
# the site's own header (navigation, a source and editor line) and footer (a disclaimer, a
# copyright and licence line, a hotline), 100 to 300 characters of chrome a page, the same on
# every page of a site, whose name becomes the document's `source`. Reprints of one story
# land on different sites, as scraped pages do; labels are kept. Measures what a site's
# chrome does to precision and recall (BENCHMARKS.md, "No bridges").
import gzip, json, random, sys

src, out, sites, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
places = "江城 海州 云岭 北川 南湖 西坪 东港 青田 临川 石门 白沙 金水 清河 长宁 安平 永和".split()
sections = "要闻 本地 社会 财经 民生 文旅 体育 科技".split()
names = "王芳 李华 赵强 陈静 刘洋 周敏 吴磊 孙丽 郑伟 黄婷".split()


def site(i):
    place = places[i % len(places)] + ("" if i < len(places) else str(i // len(places)))
    header = f"{place}网 首页 > {rng.choice(sections)} > 正文\n来源：{place}网 编辑：{rng.choice(names)} 责任编辑：{rng.choice(names)}\n"
    footer = (
        f"\n特别声明：本文仅代表作者观点，不代表{place}网立场。转载请注明来源{place}网，"
        f"如有侵权请联系删除。\n版权所有 {place}网 {rng.randrange(10, 99)}ICP备{rng.randrange(10**7, 10**8)}号 "
        f"新闻热线：0{rng.randrange(100, 999)}-{rng.randrange(10**7, 10**8)}"
    )
    if rng.random() < 0.5:
        footer += f"\n{place}网客户端 扫码下载 关注{place}网微信公众号，获取更多本地新闻资讯。"
    return f"{place}网", header, footer


chrome = [site(i) for i in range(sites)]
with gzip.open(src, "rt") as lines, gzip.open(out, "wt") as output:
    for line in lines:
        document = json.loads(line)
        source, header, footer = rng.choice(chrome)
        document["content"] = header + document["content"] + footer
        document["source"] = source
        output.write(json.dumps(document, ensure_ascii=False) + "\n")
