#!/usr/bin/python3
"""The tokenizer directories under test/fixtures/tokenizers/, in the layout
published Hugging Face models have (what transformers' save_pretrained
writes, tokenizer.json as transformers' converters build it):

  bert_uncased/               vocab.txt (12,000: [PAD], [unused0..9], [UNK],
                              [CLS], [SEP], [MASK], ...), do_lower_case true,
                              strip_accents null (lowercase strips accents)
  bert_cased/                 vocab.txt (14,000, no [unusedN]), do_lower_case
                              false, strip_accents null (no stripping)
  bert_uncased_keep_accents/  vocab.txt (13,000, [unused0..4]), do_lower_case
                              true, strip_accents false (as multilingual
                              models have it)
      each with tokenizer_config.json (BertTokenizer), special_tokens_map.json
      and tokenizer.json as BertConverter writes it (BertNormalizer,
      BertPreTokenizer, WordPiece, TemplateProcessing "[CLS] $A [SEP]",
      WordPiece decoder);
  xlmr/                       sentencepiece.bpe.model: a unigram model of
                              8,000 pieces trained here with the sentencepiece
                              library (seeded, one thread, nmt_nfkc,
                              character_coverage 0.9995), tokenizer_config.json
                              (XLMRobertaTokenizer), special_tokens_map.json
                              and tokenizer.json as XLMRobertaConverter writes
                              it (fairseq order: <s> 0, <pad> 1, </s> 2,
                              <unk> 3, the spm pieces from spm id 3 on at
                              spm id + 1, <mask> last; normalizer
                              Precompiled + Replace(" {2,}", " "), Metaspace
                              pre-tokenizer, prepend_scheme "always").

Vocabularies and the spm model are learned from the corpus
(test/fixtures/tokenizers/corpus.jsonl, tools/gen_tokenizer_corpus.py) and
Multi30k train (German and English), by tools/build_wordpiece_vocab.py for
the WordPiece vocabularies.

    /usr/bin/python3 tools/gen_tokenizer_corpus.py      # corpus.jsonl first
    /usr/bin/python3 tools/gen_encoder_tokenizers.py
"""
import base64
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_wordpiece_vocab  # noqa: E402
from nllb_tokenizer import read_spm_model  # noqa: E402

ROOT = os.path.join(HERE, "..")
OUT = os.path.join(ROOT, "test", "fixtures", "tokenizers")
CORPUS = os.path.join(OUT, "corpus.jsonl")
M30K = os.path.join(ROOT, "..", "shared", "data", "multi30k")
TRAIN = [os.path.join(M30K, "train.de.gz"), os.path.join(M30K, "train.en.gz")]
SEED = 20240611

BERT_DIRS = {
    # name: (size, unused, do_lower_case, strip_accents)
    "bert_uncased": (12000, 10, True, None),
    "bert_cased": (14000, 0, False, None),
    "bert_uncased_keep_accents": (13000, 5, True, False),
}
BERT_SPECIALS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                 "mask_token": "[MASK]"}


def added(id_, content, lstrip=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": False,
            "normalized": False, "special": True}


def decoder_entry(a):
    return {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}


def template(single, pair, specials):
    def seq(items):
        out = []
        for it in items:
            if it.startswith("$"):
                out.append({"Sequence": {"id": it[1], "type_id": int(it.split(":")[1]) if ":" in it else 0}})
            else:
                tok, _, t = it.partition(":")
                out.append({"SpecialToken": {"id": tok, "type_id": int(t or 0)}})
        return out
    return {"type": "TemplateProcessing", "single": seq(single.split()), "pair": seq(pair.split()),
            "special_tokens": {tok: {"id": tok, "ids": [i], "tokens": [tok]} for tok, i in sorted(specials.items())}}


def write_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


def bert_dir(name, size, unused, lower, strip_accents):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    vocab = build_wordpiece_vocab.build([CORPUS] + TRAIN, size, lower,
                                        lower if strip_accents is None else strip_accents,
                                        unused=unused, min_char_count=3)
    with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(v + "\n" for v in vocab))
    ids = {v: i for i, v in enumerate(vocab)}
    specials = [added(ids[t], t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": specials,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": strip_accents, "lowercase": lower},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": template("[CLS]:0 $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                                   {"[CLS]": ids["[CLS]"], "[SEP]": ids["[SEP]"]}),
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }
    write_json(os.path.join(d, "tokenizer.json"), tok)
    cfg = {"added_tokens_decoder": {str(a["id"]): decoder_entry(a) for a in specials},
           "clean_up_tokenization_spaces": True,
           "cls_token": "[CLS]",
           "do_basic_tokenize": True,
           "do_lower_case": lower,
           "mask_token": "[MASK]",
           "model_max_length": 512,
           "never_split": None,
           "pad_token": "[PAD]",
           "sep_token": "[SEP]",
           "strip_accents": strip_accents,
           "tokenize_chinese_chars": True,
           "tokenizer_class": "BertTokenizer",
           "unk_token": "[UNK]"}
    write_json(os.path.join(d, "tokenizer_config.json"), cfg)
    write_json(os.path.join(d, "special_tokens_map.json"), dict(sorted(BERT_SPECIALS.items())))
    return d


def spm_training_text(path):
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for p in [CORPUS] + TRAIN:
            for line in build_wordpiece_vocab.read_lines(p):
                line = " ".join(line.replace("\r", " ").replace("\n", " ").split(" "))
                if line.strip():
                    f.write(line + "\n")
                    n += 1
    return n


def xlmr_dir(vocab_size=8000):
    import sentencepiece as spm
    d = os.path.join(OUT, "xlmr")
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        txt = os.path.join(tmp, "train.txt")
        spm_training_text(txt)
        spm.set_random_generator_seed(SEED)
        cwd = os.getcwd()
        os.chdir(tmp)  # the model records its input and prefix: keep them the same every run
        try:
            spm.SentencePieceTrainer.train(
                input="train.txt", model_prefix="m", model_type="unigram", vocab_size=vocab_size,
                character_coverage=0.9995, normalization_rule_name="nmt_nfkc", num_threads=1,
                input_sentence_size=0, shuffle_input_sentence=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                minloglevel=2)
        finally:
            os.chdir(cwd)
        shutil.copyfile(os.path.join(tmp, "m.model"), os.path.join(d, "sentencepiece.bpe.model"))
    m = read_spm_model(os.path.join(d, "sentencepiece.bpe.model"))
    pieces = m["pieces"]
    assert [p[0] for p in pieces[:3]] == ["<unk>", "<s>", "</s>"], pieces[:3]
    vocab = [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0]] + \
        [[p, s] for p, s, _ in pieces[3:]] + [["<mask>", 0.0]]
    mask_id = len(vocab) - 1
    specials = [added(0, "<s>"), added(1, "<pad>"), added(2, "</s>"), added(3, "<unk>"),
                added(mask_id, "<mask>", lstrip=True)]
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": specials,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled",
             "precompiled_charsmap": base64.b64encode(m["precompiled_charsmap"]).decode("ascii")},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": meta,
        "post_processor": template("<s>:0 $A:0 </s>:0", "<s>:0 $A:0 </s>:0 </s>:0 $B:0 </s>:0",
                                   {"<s>": 0, "</s>": 2}),
        "decoder": dict(meta),
        "model": {"type": "Unigram", "unk_id": 3, "vocab": vocab, "byte_fallback": False},
    }
    write_json(os.path.join(d, "tokenizer.json"), tok)
    cfg = {"added_tokens_decoder": {str(a["id"]): decoder_entry(a) for a in specials},
           "bos_token": "<s>",
           "clean_up_tokenization_spaces": True,
           "cls_token": "<s>",
           "eos_token": "</s>",
           "mask_token": "<mask>",
           "model_max_length": 512,
           "pad_token": "<pad>",
           "sep_token": "</s>",
           "tokenizer_class": "XLMRobertaTokenizer",
           "unk_token": "<unk>"}
    write_json(os.path.join(d, "tokenizer_config.json"), cfg)
    write_json(os.path.join(d, "special_tokens_map.json"), {
        "bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
        "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False,
                       "single_word": False},
        "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"})
    return d


def main():
    for name, args in BERT_DIRS.items():
        d = bert_dir(name, *args)
        print(name, {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))})
    d = xlmr_dir()
    print("xlmr", {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))})


if __name__ == "__main__":
    main()
