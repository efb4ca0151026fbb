# usage: footers.py labeled.jsonl.gz out.jsonl.gz share pages seed
# Appends one portal's disclaimer to `share` of the documents (at random), and adds `pages`
# documents that are only the disclaimer (each a story of its own), at random places.
import gzip, json, random, sys
src, out, share, pages, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
footer = ("特别声明：以上文章内容仅代表作者本人观点，不代表本网观点或立场。如有关于作品内容、"
          "版权或其它问题请于作品发表后的30日内与本网联系，我们将及时处理。")
docs = [json.loads(l) for l in gzip.open(src, 'rt')]
for d in docs:
    if rng.random() < share:
        d['content'] = d['content'] + '\n' + footer
for i in range(pages):
    at = rng.randrange(len(docs))
    page = dict(docs[at]); page.update(id=f'footer-page-{i}', content=footer, title='', cluster=f'footer-page-{i}', kind='footer_page')
    docs.insert(at, page)
with gzip.open(out, 'wt') as f:
    for d in docs: f.write(json.dumps(d, ensure_ascii=False) + '\n')
