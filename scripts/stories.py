"""Reads the stories of a `tantivy-dedup dedup` run against its input, for issue 34's checks.

usage:
  stories.py dated INPUT OUTPUT
      Writes INPUT in date order with a `published_at` (19:00 +08:00 of its `date`, YYYYMMDD),
      as a news broadcast's archive such as xwlb-news needs: without one, every document
      arrives "now", no story ever expires, and notices years apart join (on xwlb-news, 222
      stories run over several days that way, against 82 with the dates).
  stories.py multiday INPUT DECISIONS [WORD ...]
      Counts the stories that ran over several days (by the date of `published_at`), and lists
      those whose first title holds one of the WORDs (all of them when none is given). On a
      news broadcast's archive (xwlb-news), most such stories are notices of one template with
      other names, dates or titles, the rest are reruns of one text.
  stories.py diff INPUT BEFORE AFTER [N]
      Compares two runs over the same input pair by pair: the pairs one run puts in one story
      and the other does not, how many of them share a `cluster` label (when the input has
      one), and the first N of each (default 20) with their titles and the start of their
      texts, to be read before a label is trusted.

INPUT is JSON Lines (plain or gzip) with `id`, `content`, optionally `title`, `published_at`
(RFC 3339 or Unix seconds; or `date`, YYYYMMDD) and `cluster`; DECISIONS, BEFORE and AFTER are `dedup` outputs.
"""
import collections
import datetime
import gzip
import json
import sys


def read_lines(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', encoding='utf-8') as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def stories(decisions):
    """id -> root of a dedup output."""
    return {decision['id']: decision['root'] for decision in read_lines(decisions)}


def members(roots):
    grouped = collections.defaultdict(list)
    for document, root in roots.items():
        grouped[root].append(document)
    return grouped


def day(document):
    if 'date' in document:
        return str(document['date'])[:8]
    published = document.get('published_at')
    if isinstance(published, (int, float)):
        return datetime.datetime.fromtimestamp(published, datetime.timezone.utc).date().isoformat()
    return str(published or '')[:10]


def multiday(input_path, decisions, words):
    documents = {document['id']: document for document in read_lines(input_path)}
    grouped = [group for group in members(stories(decisions)).values() if len(group) > 1]
    over_days = [group for group in grouped if len({day(documents[i]) for i in group}) > 1]
    print(f'stories of two documents or more: {len(grouped)}; over several days: '
          f'{len(over_days)} ({sum(map(len, over_days))} documents)')
    for group in sorted(over_days, key=len, reverse=True):
        first = documents[group[0]].get('title', '')
        if words and not any(word in first for word in words):
            continue
        print(f'== {len(group)} documents')
        for i in group:
            print(f'  {day(documents[i])}  {heading(documents[i])}')


def heading(document):
    """A document's title, or the start of its text when it has none (a post)."""
    return (document.get('title') or document['content'])[:60].replace('\n', ' ')


def pairs_apart(together, apart):
    """The pairs that `together` puts in one story and `apart` does not."""
    found = []
    for group in members(together).values():
        for i, first in enumerate(group):
            for second in group[i + 1:]:
                if apart[first] != apart[second]:
                    found.append((first, second))
    return found


def diff(input_path, before_path, after_path, shown):
    documents = {document['id']: document for document in read_lines(input_path)}
    before, after = stories(before_path), stories(after_path)
    label = lambda i: documents[i].get('cluster')
    same = lambda pair: label(pair[0]) is not None and label(pair[0]) == label(pair[1])
    for what, pairs in (('split', pairs_apart(before, after)), ('joined', pairs_apart(after, before))):
        print(f'pairs {what}: {len(pairs)}, of which labeled one story: {sum(map(same, pairs))}')
        for first, second in pairs[:shown]:
            print(f'  {what} (same label: {same((first, second))})')
            for i in (first, second):
                text = documents[i]['content'][:100].replace('\n', ' ')
                print(f'    {i}  {documents[i].get("title", "")[:40]} | {text}')


def dated(input_path, output_path):
    documents = sorted(read_lines(input_path), key=lambda document: str(document['date']))
    opener = gzip.open if output_path.endswith('.gz') else open
    with opener(output_path, 'wt', encoding='utf-8') as out:
        for document in documents:
            date = str(document['date'])
            document['published_at'] = f'{date[:4]}-{date[4:6]}-{date[6:8]}T19:00:00+08:00'
            out.write(json.dumps(document, ensure_ascii=False) + '\n')


def main(argv):
    if len(argv) == 4 and argv[1] == 'dated':
        dated(argv[2], argv[3])
    elif len(argv) >= 4 and argv[1] == 'multiday':
        multiday(argv[2], argv[3], argv[4:])
    elif len(argv) in (5, 6) and argv[1] == 'diff':
        diff(argv[2], argv[3], argv[4], int(argv[5]) if len(argv) == 6 else 20)
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    try:
        main(sys.argv)
    except BrokenPipeError:
        # The reader (`head`) has seen enough.
        sys.stderr.close()
