#!/usr/bin/python3
"""Regenerate the tokenizer fixtures from the SentencePiece library (make fixtures).

The reference is Debian's python3-sentencepiece; Marian ids are mapped through
vocab.json as Hugging Face's MarianTokenizer does (a piece missing from the
vocabulary is <unk>; </s>, <unk> and <pad> written in the text are those
tokens, split off first as tools/nllb_tokenizer.py ports it).  For each of the four OPUS-MT SentencePiece models in
../shared/data/spm it writes:

  test/fixtures/tokenizer/<name>.multi30k.gz
      one line per Multi30k sentence (train, val, test_2016_flickr,
      test_2017_flickr; de then en), a digest of everything the SQL functions
      return for it (see digest()); the sentences themselves are read from
      ../shared/data at test time, not copied here.
  test/fixtures/tokenizer/<name>.stress.jsonl
      the multilingual stress set in full: input, ids, pieces, decodings.

and the same stress file for the small models in test/fixtures/spm.

Run with Debian's interpreter: /usr/bin/python3 tools/gen_tokenizer_fixtures.py
"""
import gzip
import hashlib
import json
import os

import sentencepiece as spm

import nllb_tokenizer as nt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
OUT = os.path.join(ROOT, "test", "fixtures", "tokenizer")

OPUS = {
    "enmg_src": ("opus-mt-en-mg", "source.spm"),
    "enmg_tgt": ("opus-mt-en-mg", "target.spm"),
    "zhen_src": ("opus-mt-zh-en", "source.spm"),
    "zhen_tgt": ("opus-mt-zh-en", "target.spm"),
}
TINY = ["tiny_unigram", "tiny_bpe_bytes", "tiny_unigram_identity"]

MULTI30K = [(split, lang) for split in ("train", "val", "test_2016_flickr", "test_2017_flickr")
            for lang in ("de", "en")]

# Assembled to reach every corner of normalization and segmentation.
STRESS = [
    "",
    " ",
    "   \t \n  ",
    "Hello world",
    "  Hello,   World!\t",
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "Ein Mann\tmit\nZeilenumbruch\r\nund Tab",
    "Straße, Œuvre, Ærø, façade, naïve, coöperate",
    "e\u0301 a\u0308 o\u0302\u0323 (combining marks)",
    "\u00c5ngstr\u00f6m vs A\u030angstro\u0308m",
    "中华人民共和国成立于1949年。",
    "東京タワーは高さ３３３メートルです。",
    "한국어 문장입니다.",
    "ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ　１２３！？",
    "ｶﾀｶﾅ ﾊﾝｶｸ ｶﾞｷﾞ",
    "①②③ ⑴⑵ ⒈⒉ Ⅻ ⅷ ㈱ ㎏ ㍿",
    "ﬁ ﬂ ﬀ ﬃ ſt",
    "x\u00b2 + y\u00b3 = z\u2074, \u00bd \u00bc",
    "I ❤ 🙂🙂 you 👩‍👩‍👧‍👦 🇩🇪 👍🏽",
    "emoji only: 🚀🌍✨",
    "zero\u200bwidth\u200cjoiner\u200d and\ufeffBOM",
    "non\u00a0breaking\u2002en\u2003em\u3000ideographic spaces",
    "control \u0001\u0002\u0007\u001b\u007f\u0085 chars",
    "replacement \ufffd char and \u2581 lower block",
    "<s> </s> <unk> <pad> <0x41> ▁",
    "العربية من اليمين إلى اليسار",
    "עברית וגם English",
    "हिन्दी देवनागरी",
    "ภาษาไทยไม่มีช่องว่าง",
    "Ελληνικά και Кириллица",
    "a" * 300,
    "Donaudampfschifffahrtsgesellschaftskapitänswitwe" * 20,
    "x" + "\u0301" * 50,
    "1234567890 3.14159 -42 1e10 0x1F",
    "Email: foo.bar@example.com, URL: https://example.org/a?b=c&d=e",
    "\"quotes\" 'single' „deutsch“ «français» ‚low‘",
    "... --- !!! ??? ;;; ::: ,,,",
    "tab\tseparated\tvalues",
    "trailing spaces   ",
    "   leading spaces",
    "MiXeD CaSe UPPER lower",
    "SELECT name FROM docs WHERE id = 1; <sep> token",
    "ǅ ǈ ǋ ǲ (titlecase digraphs)",
    "\U0002a6a5 \U00020000 rare CJK extension B",
    "😀" * 30,
]


def read_lines(split, lang):
    path = os.path.join(DATA, "multi30k", "%s.%s.gz" % (split, lang))
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        return f.read().split("\n")[:-1]


class Ref:
    """The reference: SentencePiece, plus Marian's vocab.json mapping."""

    def __init__(self, model_path, vocab_path=None):
        self.sp = spm.SentencePieceProcessor(model_file=model_path)
        self.vocab = None
        if vocab_path:
            with open(vocab_path, encoding="utf-8") as f:
                self.vocab = json.load(f)
            self.inv = {i: p for p, i in self.vocab.items()}
            self.unk = self.vocab[self.sp.id_to_piece(self.sp.unk_id())]

    def run(self, text):
        spm_ids = self.sp.encode(text)
        pieces = self.sp.encode(text, out_type=str)
        r = {"input": text, "spm_ids": spm_ids, "pieces": pieces,
             "decoded": self.sp.decode(spm_ids)}
        if self.vocab is not None:
            # MarianTokenizer: its special tokens written in the text are split
            # off first (PreTrainedTokenizer.tokenize's Trie, ported in
            # tools/nllb_tokenizer.py), each segment is encoded on its own
            specials = [t for t in ("</s>", "<unk>", "<pad>") if t in self.vocab]
            ids = []
            for chunk in nt.split_on_tokens(text, specials):
                if chunk in specials:
                    ids.append(self.vocab[chunk])
                else:
                    ids += [self.vocab.get(p, self.unk) for p in self.sp.encode(chunk, out_type=str)]
            r["ids"] = ids
            r["decoded_vocab"] = self.sp.decode_pieces([self.inv[i] for i in ids])
        return r


def digest(r):
    """What test/pgtap/05_tokenizer_multi30k.sql computes in SQL, byte for byte."""
    s = "\t".join([" ".join(map(str, r["spm_ids"])), " ".join(map(str, r["ids"])),
                   " ".join(r["pieces"]), r["decoded"], r["decoded_vocab"]])
    return hashlib.md5(s.encode("utf-8")).hexdigest()[:16]


def write_stress(name, ref):
    path = os.path.join(OUT, "%s.stress.jsonl" % name)
    with open(path, "w", encoding="utf-8") as f:
        for text in STRESS:
            f.write(json.dumps(ref.run(text), ensure_ascii=True) + "\n")
    print("wrote %s: %d cases" % (path, len(STRESS)))


def main():
    os.makedirs(OUT, exist_ok=True)
    sentences = [line for split, lang in MULTI30K for line in read_lines(split, lang)]
    for name, (folder, model) in OPUS.items():
        d = os.path.join(DATA, "spm", folder)
        ref = Ref(os.path.join(d, model), os.path.join(d, "vocab.json"))
        path = os.path.join(OUT, "%s.multi30k.gz" % name)
        # mtime=0: the same input gives the same bytes
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write("".join(digest(ref.run(s)) + "\n" for s in sentences).encode())
        print("wrote %s: %d sentences" % (path, len(sentences)))
        write_stress(name, ref)
    for name in TINY:
        write_stress(name, Ref(os.path.join(ROOT, "test", "fixtures", "spm", name + ".model")))


if __name__ == "__main__":
    main()
