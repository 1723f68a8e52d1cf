#!/usr/bin/python3
"""Builds a BERT-style WordPiece vocab.txt from text files, deterministically.

    /usr/bin/python3 tools/build_wordpiece_vocab.py OUT/vocab.txt --size 12000 \\
        [--lowercase | --cased] [--keep-accents] [--unused K] [--min-char-count N] \\
        [--max-lines N] INPUT...

INPUT: a text file (one sentence a line), a .gz of one, or a .jsonl whose
lines are JSON strings (test/fixtures/tokenizers/corpus.jsonl).

Order of the vocabulary (the line number is the id):
    [PAD] (0), [unused0] .. [unused{K-1}], [UNK], [CLS], [SEP], [MASK],
    every character seen at least --min-char-count times, most frequent first,
    each followed by its "##" form,
    then the most frequent whole words (seen twice or more; --word-share of
    the entries left), then the most frequent "##" suffix pieces (count times
    length), then more whole words if the suffixes run out, until --size.

Text goes through BERT's basic tokenization as Hugging Face's tokenizers do
it (BertNormalizer + BertPreTokenizer): control characters (Unicode
categories Cc, Cf, Co, Cs, but tab/newline/CR) and U+0000/U+FFFD dropped, whitespace
(Unicode White_Space) to a space, CJK ideographs padded with spaces
(tokenizers' ranges: its extension E/F range starts at U+2B920),
with --lowercase: accents stripped (NFD, nonspacing marks dropped, unless
--keep-accents) and each character lowercased; then split on whitespace and
on punctuation (ASCII punctuation and Unicode P*), each punctuation
character a word of its own.

Ties are broken by the piece's code points, so the same inputs and options
give the same file byte for byte.
"""
import argparse
import collections
import gzip
import json
import sys
import unicodedata

SPECIALS_AFTER_UNUSED = ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Unicode White_Space (what Rust's char::is_whitespace tests)
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | \
    {chr(c) for c in range(0x2000, 0x200B)}


def is_control(c):
    # tokenizers' is_other: Cc, Cf, Co, Cs (unassigned code points are kept)
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs")


def is_punctuation(c):
    o = ord(c)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def is_cjk(o):
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2A6DF
            or 0x2A700 <= o <= 0x2B73F or 0x2B740 <= o <= 0x2B81F or 0x2B920 <= o <= 0x2CEAF  # tokenizers' 0x2B920, not 0x2B820
            or 0xF900 <= o <= 0xFAFF or 0x2F800 <= o <= 0x2FA1F)


def normalize(text, lowercase, strip_accents):
    out = []
    for c in text:
        o = ord(c)
        if o == 0 or o == 0xFFFD or is_control(c):
            continue
        if c in WHITE_SPACE:
            out.append(" ")
        elif is_cjk(o):
            out.append(" " + c + " ")
        else:
            out.append(c)
    text = "".join(out)
    if strip_accents:
        text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    if lowercase:
        text = "".join(c.lower() for c in text)  # character by character: no final-sigma rule
    return text


def pre_tokenize(text):
    words, cur = [], []
    for c in text:
        if c in WHITE_SPACE or is_punctuation(c):
            if cur:
                words.append("".join(cur))
                cur = []
            if c not in WHITE_SPACE:
                words.append(c)
        else:
            cur.append(c)
    if cur:
        words.append("".join(cur))
    return words


def basic_tokenize(text, lowercase=True, strip_accents=True):
    return pre_tokenize(normalize(text, lowercase, strip_accents))


def read_lines(path, max_lines=None):
    opener = gzip.open if path.endswith(".gz") else open
    n = 0
    with opener(path, "rt", encoding="utf-8", newline="\n") as f:
        for line in f:
            line = line.rstrip("\n")
            if path.endswith(".jsonl") or path.endswith(".jsonl.gz"):
                if not line.strip():
                    continue
                line = json.loads(line)
            yield line
            n += 1
            if max_lines and n >= max_lines:
                return


def key(piece):
    return [ord(c) for c in piece]


def build(inputs, size, lowercase, strip_accents, unused=0, min_char_count=1, word_share=0.6,
          max_lines=None):
    words = collections.Counter()
    for path in inputs:
        for line in read_lines(path, max_lines):
            words.update(basic_tokenize(line, lowercase, strip_accents))

    vocab = ["[PAD]"] + ["[unused%d]" % i for i in range(unused)] + SPECIALS_AFTER_UNUSED
    seen = set(vocab)

    def add(piece):
        if piece not in seen and len(vocab) < size:
            seen.add(piece)
            vocab.append(piece)

    chars = collections.Counter()
    for w, f in words.items():
        for c in w:
            chars[c] += f
    for c, f in sorted(chars.items(), key=lambda kv: (-kv[1], key(kv[0]))):
        if f >= min_char_count:
            add(c)
            add("##" + c)
    if len(vocab) >= size:
        print("build_wordpiece_vocab: --size %d is used up by the characters" % size, file=sys.stderr)

    # whole words seen twice or more; "##" suffixes (2+ characters) of the
    # words, weighted by the words' counts and the suffix's length
    whole = sorted(((w, f) for w, f in words.items() if f >= 2 and len(w) > 1),
                   key=lambda kv: (-kv[1], key(kv[0])))
    suffixes = collections.Counter()
    for w, f in words.items():
        if len(w) > 100:
            continue
        for i in range(1, len(w) - 1):
            suffixes["##" + w[i:]] += f
    suffix_list = sorted(((s, f * (len(s) - 2)) for s, f in suffixes.items() if f >= 2),
                         key=lambda kv: (-kv[1], key(kv[0])))

    n_whole = len(vocab) + int(round((size - len(vocab)) * word_share))
    wi = 0
    while len(vocab) < n_whole and wi < len(whole):
        add(whole[wi][0])
        wi += 1
    for s, _ in suffix_list:
        if len(vocab) >= size:
            break
        add(s)
    for w, _ in whole[wi:]:
        if len(vocab) >= size:
            break
        add(w)
    return vocab


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("output")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--size", type=int, default=10000)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--lowercase", dest="lowercase", action="store_true", default=True)
    g.add_argument("--cased", dest="lowercase", action="store_false")
    ap.add_argument("--keep-accents", action="store_true",
                    help="with --lowercase, do not strip accents (strip_accents false)")
    ap.add_argument("--unused", type=int, default=0, help="number of [unusedN] entries after [PAD]")
    ap.add_argument("--min-char-count", type=int, default=1)
    ap.add_argument("--word-share", type=float, default=0.6)
    ap.add_argument("--max-lines", type=int, default=None, help="read at most N lines of each input")
    a = ap.parse_args(argv)
    vocab = build(a.inputs, a.size, a.lowercase, a.lowercase and not a.keep_accents, a.unused,
                  a.min_char_count, a.word_share, a.max_lines)
    with open(a.output, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(v + "\n" for v in vocab))
    print("%s: %d entries" % (a.output, len(vocab)), file=sys.stderr)


if __name__ == "__main__":
    main()
