"""Splits a profile of `tantivy-dedup bench --only ingest --rounds 1` into stages, for plain
Tantivy and for tantivy-dedup side by side, in microseconds of CPU a document (issue 37,
"account for every microsecond").

usage:
  perf record -F 299 --call-graph dwarf,16384 -o perf.data \\
      target/release/tantivy-dedup bench --only ingest --rounds 1 > bench.json
  perf script -i perf.data > perf.txt
  python3 scripts/ingest_stages.py perf.txt [DOCUMENTS] [HZ]

DOCUMENTS is the corpus' document count (default 74,545, xwlb-news), HZ the sampling rate
given to `perf record` (default 299). A sample belongs to a stage by the frames on its stack:
Tantivy's indexing threads by the document type they index (plain Tantivy's `CompactDoc`,
ours `NewsDocument`), ours' preparation and placement by their functions. The bench runs plain
Tantivy first, then ours: the samples of the threads both runs have (reading, parsing,
compressing the doc store, merging, committing) go to the run whose time they fall in, the
boundary being halfway between plain Tantivy's last indexing sample and ours' first. The
figures are estimates: a stage's sampling error is about the square root of its samples, and
two profiles of the same build differ more than that (15% on a 35 us stage).
"""
import collections
import re
import sys

# Stages by the first pattern a sample's stack matches, in this order.
WORKER_STAGES = [
    ('worker: jieba (plain Tantivy tokenizes in its indexing threads)', r'jieba_rs'),
    ('worker: segment flush (postings, fast fields, term dictionary)', r'finalize_inner'),
    ('worker: inverting title and content', r'PostingsWriter::index_text'),
    ('worker: doc store', r'StorePluginWriter'),
    ('worker: fast field values', r'FastFieldsWriter|add_doc_value|columnar'),
    ('worker: other (other fields\' terms, document drop)', r''),
]
PREPARE_STAGES = [
    ('prepare: jieba', r'jieba_rs'),
    ('prepare: normalisation', r'normalize'),
    ('prepare: fingerprint', r'fingerprint_analyzed|weigh|words_in|SimhashBuilder'),
    ('prepare: sketch', r'[Ss]ketch'),
    ('prepare: other (parsing, digest, document building)', r''),
]
PLACE_STAGES = [
    ('place: forest (candidates, verification, placement)', r'Deduplicator::place'),
    ('place: the dedup fields of the document', r'add_insert_fields|add_u64|add_bool'),
    ('place: other (re-send check, bookkeeping)', r''),
]
SHARED_STAGES = [
    ('both: reading and decompressing the input', r'inflate|miniz|next_record|next_line'),
    ('both: doc store compression', r'compress_block_and_write|lz4'),
    ('both: parsing JSON lines, building documents', r'ArticleReader|serde|for_each_batch'),
    ('both: merges, commits, the rest', r''),
]


def stacks(path):
    """Each sample as (time in seconds, stack as a list of function names, leaf first)."""
    time, current = None, None
    with open(path, errors='replace') as lines:
        for line in lines:
            if not line.strip():
                if current:
                    yield time, current
                current = None
            elif line[0] not in ' \t':
                found = re.search(r'\s(\d+\.\d+):', line)
                time = float(found.group(1)) if found else None
                current = []
            elif current is not None:
                parts = line.strip().split(' ', 1)
                if len(parts) == 2:
                    name = re.sub(r'\s+\([^()]*\)$', '', parts[1])
                    current.append(re.sub(r'\+0x[0-9a-f]+$', '', name))
    if current:
        yield time, current


def stage_of(frames, stages):
    """The first stage whose pattern a frame matches; the last stage (pattern '') otherwise."""
    for name, pattern in stages:
        if not pattern or any(re.search(pattern, frame) for frame in frames):
            return name


def main():
    path = sys.argv[1]
    documents = int(sys.argv[2]) if len(sys.argv) > 2 else 74_545
    hz = int(sys.argv[3]) if len(sys.argv) > 3 else 299
    counts = {'plain': collections.Counter(), 'dedup': collections.Counter()}
    shared = []
    plain_last, dedup_first = None, None
    for time, frames in stacks(path):
        text = '\n'.join(frames)
        indexing = 'index_documents' in text
        if indexing and 'CompactDoc' in text:
            counts['plain'][stage_of(frames, WORKER_STAGES)] += 1
            plain_last = time if plain_last is None else max(plain_last, time)
            continue
        if indexing and 'NewsDocument' in text:
            counts['dedup'][stage_of(frames, WORKER_STAGES)] += 1
        elif 'Preparer::prepare' in text:
            counts['dedup'][stage_of(frames, PREPARE_STAGES)] += 1
        elif 'DedupIndex::ingest' in text:
            counts['dedup'][stage_of(frames, PLACE_STAGES)] += 1
        else:
            shared.append((time, stage_of(frames, SHARED_STAGES)))
            continue
        dedup_first = time if dedup_first is None else min(dedup_first, time)
    if plain_last is None or dedup_first is None:
        sys.exit('no indexing samples of one of the runs: is this a profile of '
                 '`bench --only ingest --rounds 1`, with call graphs?')
    boundary = (plain_last + dedup_first) / 2
    for time, stage in shared:
        counts['plain' if time < boundary else 'dedup'][stage] += 1
    print(f'{len(shared)} samples of threads both runs have, split at {boundary:.3f} s\n')
    micros = 1e6 / hz / documents
    stages = [name for name, _ in WORKER_STAGES + PREPARE_STAGES + PLACE_STAGES + SHARED_STAGES]
    print('| stage | plain Tantivy, us/doc | tantivy-dedup, us/doc |')
    print('|---|---|---|')
    for stage in stages:
        plain, dedup = counts['plain'][stage], counts['dedup'][stage]
        if plain or dedup:
            print(f'| {stage} | {plain * micros:.1f} | {dedup * micros:.1f} |')
    total_plain = sum(counts['plain'].values()) * micros
    total_dedup = sum(counts['dedup'].values()) * micros
    print(f'| **total** | **{total_plain:.1f}** | **{total_dedup:.1f}** |')
    print(f'\nratio of CPU a document, plain / dedup: {total_plain / total_dedup:.2f}')


if __name__ == '__main__':
    try:
        main()
    except BrokenPipeError:
        pass
