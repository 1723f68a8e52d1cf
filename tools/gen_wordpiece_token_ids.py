#!/usr/bin/python3
"""The ids Hugging Face's tokenizers give every line of
test/fixtures/tokenizers/corpus.jsonl on the WordPiece and XLM-R fixture
directories (tools/gen_encoder_tokenizers.py): the independent references
the C tokenizers are compared with, id for id.

    (cd tools/npm_tokenizers && npm install)
    /usr/bin/python3 tools/gen_wordpiece_token_ids.py [--dirs bert_uncased,...] [--examples N]

For each of bert_uncased, bert_cased, bert_uncased_keep_accents and xlmr it
runs tools/npm_tokenizers/encode_corpus.mjs (npm @huggingface/transformers'
AutoTokenizer and @huggingface/tokenizers' Tokenizer, which must agree, and
npm tokenizers, the Rust library's Node binding) and writes
test/fixtures/npm_tokens/<dir>.json:

    {"versions": {...}, "corpus": "test/fixtures/tokenizers/corpus.jsonl",
     "lines": N,
     "ids": [[...], ...]        AutoTokenizer's ids (special tokens included),
                                one list a corpus line, in order,
     "rust": {"<index>": [...]} the Rust library's ids where they differ
                                (index: 0-based, into "ids" and corpus.jsonl),
     "python": {"<index>": [...]} this file's Python reference's ids where
                                they differ}
The Rust library is what transformers' fast (Python) tokenizers run, so
rust.get(i, ids[i]) is what Hugging Face's Python stack gives line i.

Python references, written here from transformers' slow tokenizers (no
transformers or tokenizers Python package is needed):
  - SlowBertTokenizer: BertTokenizer (PreTrainedTokenizer.tokenize: special
    tokens split out, lowercase character by character around them;
    BasicTokenizer: clean text (C* categories dropped), CJK padded, NFC,
    lowercase + strip accents, punctuation split; WordpieceTokenizer);
  - XLM-R: the sentencepiece library on sentencepiece.bpe.model with the
    fairseq offset (spm id + 1; spm's <unk> 0 -> 3; <s> 0, </s> 2), special
    tokens split out first as XLMRobertaTokenizer does (<mask> lstrip).
Disagreements between the references are printed with a class and examples
(1-based line numbers; for BERT, the class is the smallest set of the known
differences, VARIANTS below, that, put into the Python reference, makes it
agree).
"""
import argparse
import collections
import itertools
import json
import sys
import os
import re
import subprocess
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
FIX = os.path.join(ROOT, "test", "fixtures", "tokenizers")
CORPUS = os.path.join(FIX, "corpus.jsonl")
OUT = os.path.join(ROOT, "test", "fixtures", "npm_tokens")
sys.path.insert(0, HERE)
import gen_tokenizer_corpus  # noqa: E402  (read_corpus, escape_line)
DIRS = ["bert_uncased", "bert_cased", "bert_uncased_keep_accents", "xlmr"]


# ------------------------------------------------------------------ BERT

# Known ways the other implementations differ from the slow Python one; each
# can be switched on in SlowBertTokenizer to classify a disagreement.
VARIANTS = {
    "no_nfc": "no NFC before splitting (tokenizers and transformers.js do none)",
    "lower_whole_string": "lowercase the whole string (JS toLowerCase: final sigma)",
    "cjk_bmp_only": "CJK padding only in the BMP (transformers.js walks UTF-16 units)",
    "keep_unassigned": "unassigned code points (Cn) kept (transformers.js drops Cc/Cf/Co/Cs only)",
    "strip_then_lower": "strip accents before lowercasing (tokenizers' order)",
    "cjk_from_2b920": "CJK range U+2B820.. starting at U+2B920 (tokenizers' is_chinese_char)",
}


def _is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _is_punctuation(c):
    o = ord(c)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_chinese_char(o):
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2A6DF
            or 0x2A700 <= o <= 0x2B73F or 0x2B740 <= o <= 0x2B81F or 0x2B820 <= o <= 0x2CEAF
            or 0xF900 <= o <= 0xFAFF or 0x2F800 <= o <= 0x2FA1F)


class SlowBertTokenizer:
    def __init__(self, model_dir, variants=()):
        with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        self.vocab = {}
        with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
            for i, line in enumerate(f):
                self.vocab[line.rstrip("\n")] = i
        self.do_lower_case = cfg.get("do_lower_case", True)
        self.strip_accents = cfg.get("strip_accents")
        self.tokenize_chinese_chars = cfg.get("tokenize_chinese_chars", True)
        self.unk, self.cls, self.sep = cfg["unk_token"], cfg["cls_token"], cfg["sep_token"]
        self.specials = [cfg[k] for k in ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")]
        # longest first: the trie of PreTrainedTokenizer matches the longest
        self.special_re = re.compile("(" + "|".join(re.escape(s) for s in sorted(self.specials, key=len,
                                                                                      reverse=True)) + ")")
        self.v = set(variants)

    def _category(self, c):
        return unicodedata.category(c)

    def _is_control(self, c):
        if c in "\t\n\r":
            return False
        cat = self._category(c)
        if "keep_unassigned" in self.v:
            return cat in ("Cc", "Cf", "Co", "Cs")
        return cat.startswith("C")

    def _strip(self, t):
        return "".join(c for c in unicodedata.normalize("NFD", t) if self._category(c) != "Mn")

    def _lower(self, t):
        if "lower_whole_string" in self.v:
            return t.lower()
        return "".join(c.lower() for c in t)

    def basic_tokenize(self, text):
        text = "".join(" " if _is_whitespace(c) else c for c in text
                       if not (ord(c) == 0 or ord(c) == 0xFFFD or self._is_control(c)))
        if self.tokenize_chinese_chars:
            bmp = "cjk_bmp_only" in self.v
            rust = "cjk_from_2b920" in self.v
            text = "".join(" %s " % c if _is_chinese_char(ord(c)) and not (bmp and ord(c) > 0xFFFF)
                           and not (rust and 0x2B820 <= ord(c) < 0x2B920) else c for c in text)
        if "no_nfc" not in self.v:
            text = unicodedata.normalize("NFC", text)
        out = []
        for token in text.split():
            if self.do_lower_case:
                if "strip_then_lower" in self.v and self.strip_accents is not False:
                    token = self._lower(self._strip(token))
                else:
                    token = self._lower(token)
                    if self.strip_accents is not False:
                        token = self._strip(token)
            elif self.strip_accents:
                token = self._strip(token)
            word = []
            for c in token:
                if _is_punctuation(c):
                    if word:
                        out.append("".join(word))
                        word = []
                    out.append(c)
                else:
                    word.append(c)
            if word:
                out.append("".join(word))
        return " ".join(out).split()

    def wordpiece(self, token):
        chars = list(token)
        if len(chars) > 100:
            return [self.unk]
        pieces, start = [], 0
        while start < len(chars):
            end = len(chars)
            cur = None
            while start < end:
                sub = "".join(chars[start:end])
                if start > 0:
                    sub = "##" + sub
                if sub in self.vocab:
                    cur = sub
                    break
                end -= 1
            if cur is None:
                return [self.unk]
            pieces.append(cur)
            start = end
        return pieces

    def tokenize(self, text):
        if self.do_lower_case:
            # PreTrainedTokenizer.tokenize: re.sub("(specials)|(.+?)") lowers
            # one character at a time, leaving the special tokens alone
            text = "".join(p if p in self.specials else self._lower(p) for p in self.special_re.split(text))
        tokens = []
        for chunk in self.special_re.split(text):
            if not chunk:
                continue
            if chunk in self.specials:
                tokens.append(chunk)
            else:
                for w in self.basic_tokenize(chunk):
                    tokens.extend(self.wordpiece(w))
        return tokens

    def encode(self, text):
        return [self.vocab[self.cls]] + [self.vocab[t] for t in self.tokenize(text)] + [self.vocab[self.sep]]




JS_ORDER = ["cjk_bmp_only", "lower_whole_string", "keep_unassigned", "no_nfc", "strip_then_lower", "cjk_from_2b920"]
RUST_ORDER = ["no_nfc", "keep_unassigned", "cjk_from_2b920", "strip_then_lower", "cjk_bmp_only", "lower_whole_string"]


def classify_bert(model_dir, text, target, order):
    """The smallest set of VARIANTS (tried in the given order of
    likelihood) that makes the Python reference give target, or None."""
    for k in range(1, 4):
        for combo in itertools.combinations(order, k):
            if SlowBertTokenizer(model_dir, combo).encode(text) == target:
                return "+".join(combo)
    return None


# ----------------------------------------------------------------- XLM-R

class SlowXlmrTokenizer:
    """XLMRobertaTokenizer: sentencepiece + fairseq offset; special tokens
    (<s> <pad> </s> <unk> <mask>) split out first, <mask> stripping the
    spaces on its left."""

    def __init__(self, model_dir):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "sentencepiece.bpe.model"))
        self.mask_id = self.sp.get_piece_size() + 1
        self.special = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": self.mask_id}
        self.special_re = re.compile("(" + "|".join(re.escape(s) for s in sorted(self.special, key=len,
                                                                                     reverse=True)) + ")")

    def piece(self, i):
        if i in (0, 1, 2, 3, self.mask_id):
            return ["<s>", "<pad>", "</s>", "<unk>"][i] if i != self.mask_id else "<mask>"
        return self.sp.id_to_piece(i - 1)

    def _spm(self, text):
        return [3 if i == 0 else i + 1 for i in self.sp.encode(text)]

    def encode(self, text, split_special=True):
        if not split_special:
            return [0] + self._spm(text) + [2]
        parts = self.special_re.split(text)
        for i, p in enumerate(parts):
            if p == "<mask>" and i > 0:
                parts[i - 1] = parts[i - 1].rstrip()
        ids = []
        for p in parts:
            if not p:
                continue
            ids.extend([self.special[p]] if p in self.special else self._spm(p))
        return [0] + ids + [2]


def classify_xlmr(text, js, rust, py, slow, scores, lone):
    """A class for a line where the references disagree: JS vs Rust, and
    the fast tokenizer (Rust) vs sentencepiece."""
    def why(fast):
        if fast == py:
            return None
        specials = set(slow.special.values())
        # a lone "\u2581" next to the ends or a special token: spm strips the
        # text's ends (and the slow tokenizer's chunks between special tokens)
        at = [k for k, t in enumerate(fast) if t == lone and (fast[k - 1] in specials or fast[k + 1] in specials)]
        for n in range(1, min(len(at), 6) + 1):
            for drop in itertools.combinations(at, n):
                if [t for k, t in enumerate(fast) if k not in drop] == py:
                    return "whitespace at the ends or around special tokens: fast keeps a lone '\u2581', spm strips"
        if slow.encode(text, split_special=False) == fast:
            return "special-token text: fast splits it out, spm alone does not"
        pieces = [slow.piece(t) for t in fast[1:-1]], [slow.piece(t) for t in py[1:-1]]
        if "".join(pieces[0]) == "".join(pieces[1]):
            if abs(sum(scores[t] for t in fast) - sum(scores[t] for t in py)) < 1e-9:
                return "equal-score segmentations (Viterbi ties broken differently)"
            return "same normalized text, different segmentation"
        if any(unicodedata.category(c) in ("Mn", "Me", "Mc") or 0x1100 <= ord(c) <= 0x11FF
               or c in "\uff9e\uff9f" for c in text):
            return ("normalization of combining sequences (marks, Hangul jamo, half-width voiced marks): "
                    "tokenizers' Precompiled goes grapheme by grapheme, spm by longest match")
        return "normalization differs, other"

    parts = []
    if js != rust:
        parts.append("JS vs Rust: transformers.js Precompiled = NFKC + fixed replacements, not the charsmap")
    w = why(rust)
    if w:
        parts.append("Rust vs spm: " + w)
    elif js != rust:
        parts[-1] += " (Rust = spm)"
    return "; ".join(parts)


# ------------------------------------------------------------------ main

def load_corpus():
    return gen_tokenizer_corpus.read_corpus(CORPUS)


def run_node(model_dir):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        resolved = os.path.join(tmp, "corpus.jsonl")
        with open(resolved, "w", encoding="utf-8", newline="\n") as f:
            for s in load_corpus():
                f.write(gen_tokenizer_corpus.escape_line(s) + "\n")
        subprocess.run(["node", os.path.join(HERE, "npm_tokenizers", "encode_corpus.mjs"), model_dir, resolved, out],
                       check=True)
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def show(text, limit=90):
    s = json.dumps(text, ensure_ascii=True)
    return s if len(s) <= limit else s[:limit] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dirs", default=",".join(DIRS))
    ap.add_argument("--examples", type=int, default=3)
    a = ap.parse_args()
    lines = load_corpus()
    os.makedirs(OUT, exist_ok=True)
    for name in a.dirs.split(","):
        model_dir = os.path.join(FIX, name)
        got = run_node(model_dir)
        if got["errors"] or got["disagree"]:
            print("%s: npm errors %s, transformers/tokenizers disagreements %d (first: %s)"
                  % (name, got["errors"][:3], len(got["disagree"]), got["disagree"][:1]))
        js = got["ids"]
        assert len(js) == len(lines)
        rust = {d["line"]: d["ids"] for d in (got["rust"] or [])}
        if name.startswith("bert"):
            ref = SlowBertTokenizer(model_dir)
        else:
            ref = SlowXlmrTokenizer(model_dir)
            with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
                vocab = json.load(f)["model"]["vocab"]
            scores = [s for _, s in vocab]
            lone = [p for p, _ in vocab].index("\u2581")
        py = [ref.encode(t) for t in lines]
        py_diff = {i: py[i] for i in range(len(lines)) if py[i] != js[i]}

        classes = collections.defaultdict(list)
        for i in sorted(set(rust) | set(py_diff)):
            r = rust.get(i, js[i])
            if name.startswith("bert"):
                parts = []
                if js[i] != py[i]:
                    parts.append("JS vs Python: %s" % (classify_bert(model_dir, lines[i], js[i], JS_ORDER) or "unexplained"))
                if r != py[i]:
                    parts.append("Rust vs Python: %s" % (classify_bert(model_dir, lines[i], r, RUST_ORDER) or "unexplained"))
                if r != js[i]:
                    parts.append("JS!=Rust")
                cls = "; ".join(parts)
            else:
                cls = classify_xlmr(lines[i], js[i], r, py[i], ref, scores, lone)
            classes[cls].append(i)

        with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8", newline="\n") as f:
            versions = dict(got["versions"])
            f.write('{"versions":%s,\n"corpus":"test/fixtures/tokenizers/corpus.jsonl","lines":%d,\n'
                    % (json.dumps(versions, sort_keys=True, separators=(",", ":")), len(lines)))
            f.write('"rust":%s,\n' % json.dumps({str(k): v for k, v in sorted(rust.items())}, separators=(",", ":")))
            f.write('"python":%s,\n' % json.dumps({str(k): v for k, v in sorted(py_diff.items())},
                                                  separators=(",", ":")))
            f.write('"ids":[\n' + ",\n".join(json.dumps(x, separators=(",", ":")) for x in js) + "\n]}\n")
        print("%s: %d lines, %s; JS vs Rust %d, JS vs Python %d, Rust vs Python %d; %d bytes"
              % (name, len(lines), got["versions"], len(rust), len(py_diff),
                 sum(1 for i in range(len(lines)) if rust.get(i, js[i]) != py[i]),
                 os.path.getsize(os.path.join(OUT, name + ".json"))))
        for cls, idx in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            print("  %5d  %s" % (len(idx), cls))
            for i in idx[:a.examples]:
                print("         line %d: %s" % (i + 1, show(lines[i])))


if __name__ == "__main__":
    main()
