#!/usr/bin/python3
"""Small random-weight sentence-embedding models and what tools/bert_torch.py
(the Python port of Hugging Face's BertModel / XLMRobertaModel, their slow
tokenizers and sentence-transformers' Pooling / Normalize) computes with
them: test/fixtures/encoders/<name>/ each a model directory plus
expected.json.

    /usr/bin/python3 tools/gen_encoder_fixtures.py [--out test/fixtures/encoders]

Fixtures (hidden 32, 2 layers, 4 heads, intermediate 64, max_seq_length 32):
  bert_tiny      model_type bert, gelu, type_vocab_size 2, 64 positions;
                 model.safetensors without prefix, plus pooler.dense (as
                 BertModel files have it); uncased WordPiece vocab.txt
                 (do_lower_case true); CLS pooling, no Normalize.
  bert_tiny_max  model_type bert, relu; pytorch_model.bin (torch.save of a
                 state dict named "bert.*" plus "cls.predictions.bias", as
                 BertForMaskedLM files have); cased vocab.txt
                 (do_lower_case false); max pooling + Normalize.
  xlmr_tiny      model_type xlm-roberta, gelu, 66 positions (64 + 2), pad 1,
                 type_vocab_size 1; a 1,000-piece unigram SentencePiece
                 model trained here on Multi30k, all its characters (XLM-R's layout: <unk> 0,
                 <s> 1, </s> 2; nmt_nfkc); mean pooling + Normalize.
The vocab.txt files come from tools/build_wordpiece_vocab.py over Multi30k's
training text.  Weights are random (seeded): N(0, 0.3) for matrices and
embeddings (padding rows too), N(0, 0.1) biases, LayerNorm weights
1 + N(0, 0.1) and biases N(0, 0.1), so that a swapped or missing piece
shows.

expected.json:
  {"generator", "model_type", "hidden_size", "max_seq_length",
   "pooling": ["cls"|"max"|"mean"|...], "normalize": bool,
   "sentence_embedding_dimension", "batch_max_abs_diff",
   "cases": [{"text", "tokens", "input_ids",
              "last_hidden_state": [[hidden_size floats] per token],
              "sentence_embedding": [floats]}, ...]}
Each text is embedded alone and all of them as one right-padded batch; the
two agree within 1e-5 (batch_max_abs_diff is the largest difference seen)
and the values recorded are those of the text alone, rounded to 7
significant digits.  tokens/input_ids include the special tokens and are
what sentence-transformers feeds the model: text stripped, tokenized,
truncated to max_seq_length.
"""
import argparse
import gzip
import io
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_torch as bt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = "/work/shared/data/multi30k"
TRAIN = [os.path.join(DATA, "train.de.gz"), os.path.join(DATA, "train.en.gz")]

TEXTS = [
    "Ein Mann fährt mit dem Fahrrad durch die Stadt.",
    "A man rides his bicycle through the city.",
    "Zwei Hunde spielen im Schnee.",
    "Two dogs are playing in the snow.",
    "Café crème, naïve Ökonomie und Straßenbahn: Übermäßig GROẞ!",
    "",
    "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen, während ein kleines Mädchen "
    "mit einem roten Luftballon neben ihrem Vater steht und den Tauben auf dem Platz zuschaut.",
    "EIN MANN MIT EINEM ORANGEFARBENEN HUT",
    "Hallo,Welt!(Test)-Fall #3: 12:30 Uhr.",
    "  leading   and\tinner whitespace\n ",
    "Tokyo 東京 ist groß; the dog 🐕 runs.",
    "Ein Mädchen in einem Karateanzug bricht ein Brett mit einem Tritt.",
]

SIGNIFICANT = 7


def round_sig(x):
    return float("%.*g" % (SIGNIFICANT, x))


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias") or "LayerNorm" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return g


def build_vocab(path, cased):
    tool = os.path.join(HERE, "build_wordpiece_vocab.py")
    cmd = [sys.executable, tool, path, "--size", "1000", "--cased" if cased else "--lowercase"] + TRAIN
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def bert_tokenizer_files(directory, do_lower_case, max_len):
    specials = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                "cls_token": "[CLS]", "mask_token": "[MASK]"}
    tc = dict({"tokenizer_class": "BertTokenizer", "do_lower_case": do_lower_case,
               "do_basic_tokenize": True, "never_split": None, "strip_accents": None,
               "tokenize_chinese_chars": True, "model_max_length": max_len}, **specials)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "special_tokens_map.json"), "w") as f:
        json.dump(specials, f, indent=2)
        f.write("\n")


def xlmr_tokenizer_files(directory, max_len):
    specials = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
                "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(dict({"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": max_len},
                       **specials), f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "special_tokens_map.json"), "w") as f:
        json.dump(specials, f, indent=2)
        f.write("\n")


def train_spm(path, vocab_size=1000):
    """A unigram model in XLM-R's id layout, trained on Multi30k's training
    text (both sides), single-threaded, the input in file order."""
    import sentencepiece as spm
    lines = []
    for p in TRAIN:
        with gzip.open(p, "rt", encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, model_type="unigram",
        vocab_size=vocab_size, character_coverage=1.0, normalization_rule_name="nmt_nfkc",
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, input_sentence_size=0,
        shuffle_input_sentence=False, minloglevel=2)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def make_bert_tiny(d):
    build_vocab(os.path.join(d, "vocab.txt"), cased=False)
    bert_tokenizer_files(d, True, 32)
    vocab = bt.load_vocab(os.path.join(d, "vocab.txt"))
    cfg = bt.bert_config(len(vocab), 32, 2, 4, 64, 64, act="gelu", type_vocab_size=2,
                         pad_token_id=vocab["[PAD]"])
    model = bt.SentenceEncoder(cfg, bt.Pooling(32, "cls"), normalize=False, max_seq_length=32,
                               add_pooling_layer=True)
    randomize(model, 101)
    pooler = {"pooler.dense." + k: v.detach().clone()
              for k, v in model.transformer.pooler.dense.state_dict().items()}
    model.transformer.pooler = None
    bt.save_encoder(model, d, extra_tensors=pooler)
    return model


def make_bert_tiny_max(d):
    build_vocab(os.path.join(d, "vocab.txt"), cased=True)
    bert_tokenizer_files(d, False, 32)
    vocab = bt.load_vocab(os.path.join(d, "vocab.txt"))
    cfg = bt.bert_config(len(vocab), 32, 2, 4, 64, 64, act="relu", type_vocab_size=2,
                         pad_token_id=vocab["[PAD]"])
    cfg["architectures"] = ["BertForMaskedLM"]
    model = bt.SentenceEncoder(cfg, bt.Pooling(32, "max"), normalize=True, max_seq_length=32)
    g = randomize(model, 202)
    head = {"cls.predictions.bias": 0.1 * torch.randn(len(vocab), generator=g)}
    bt.save_encoder(model, d, prefix="bert.", extra_tensors=head, pytorch_bin=True)
    return model


def make_xlmr_tiny(d):
    spm_file = os.path.join(d, "sentencepiece.bpe.model")
    train_spm(spm_file)
    xlmr_tokenizer_files(d, 32)
    tok = bt.XLMRobertaTokenizer(spm_file)
    cfg = bt.xlmr_config(tok.vocab_size, 32, 2, 4, 64, 66, act="gelu", layer_norm_eps=1e-5)
    model = bt.SentenceEncoder(cfg, bt.Pooling(32, "mean"), normalize=True, max_seq_length=32)
    randomize(model, 303)
    bt.save_encoder(model, d)
    return model


FIXTURES = {"bert_tiny": make_bert_tiny, "bert_tiny_max": make_bert_tiny_max,
            "xlmr_tiny": make_xlmr_tiny}


def compute(model):
    """Cases for TEXTS; each alone and all as one batch."""
    ids = bt.tokenize_texts(model, TEXTS)
    hidden_b, sent_b = bt.embed(model, ids)
    cases, worst = [], 0.0
    for i, (text, x) in enumerate(zip(TEXTS, ids)):
        h, s = bt.embed(model, [x])
        worst = max(worst, (h[0] - hidden_b[i, :len(x)]).abs().max().item(),
                    (s[0] - sent_b[i]).abs().max().item())
        cases.append({
            "text": text,
            "tokens": model.tokenizer.convert_ids_to_tokens(x),
            "input_ids": x,
            "last_hidden_state": [[round_sig(v) for v in row] for row in h[0].tolist()],
            "sentence_embedding": [round_sig(v) for v in s[0].tolist()],
        })
    if worst > 1e-5:
        raise SystemExit("batch and single disagree by %g" % worst)
    return cases, worst


def dump_expected(expected):
    """JSON, one line per key, case field and hidden-state row."""
    j = lambda v: json.dumps(v, ensure_ascii=False)
    out = ["{"]
    for k, v in expected.items():
        if k != "cases":
            out.append(" %s: %s," % (j(k), j(v)))
    out.append(' "cases": [')
    for n, c in enumerate(expected["cases"]):
        out.append("  {")
        for k in ("text", "tokens", "input_ids"):
            out.append("   %s: %s," % (j(k), j(c[k])))
        out.append('   "last_hidden_state": [')
        rows = c["last_hidden_state"]
        out += ["    %s%s" % (j(r), "," if i + 1 < len(rows) else "") for i, r in enumerate(rows)]
        out.append("   ],")
        out.append('   "sentence_embedding": %s' % j(c["sentence_embedding"]))
        out.append("  }" + ("," if n + 1 < len(expected["cases"]) else ""))
    out.append(" ]")
    out.append("}")
    return "\n".join(out) + "\n"


def check(directory, expected):
    """Load the directory back and recompute: the same ids, values within
    the rounding."""
    model = bt.load_encoder(directory)
    for case in expected["cases"]:
        ids = bt.tokenize_texts(model, [case["text"]])[0]
        assert ids == case["input_ids"], (case["text"], ids, case["input_ids"])
        h, s = bt.embed(model, [ids])
        for got, want in ((h[0], case["last_hidden_state"]), (s[0], case["sentence_embedding"])):
            want = torch.tensor(want)
            err = ((got - want).abs() / want.abs().clamp(min=1e-3)).max().item()
            assert err < 1e-5, (directory, case["text"], err)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "test", "fixtures", "encoders"))
    ap.add_argument("--only", nargs="*", choices=sorted(FIXTURES))
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name in a.only or sorted(FIXTURES):
        d = os.path.join(a.out, name)
        if os.path.isdir(d):
            for root, dirs, files in os.walk(d, topdown=False):
                for f in files:
                    os.remove(os.path.join(root, f))
                for sub in dirs:
                    os.rmdir(os.path.join(root, sub))
        os.makedirs(d, exist_ok=True)
        FIXTURES[name](d)
        model = bt.load_encoder(d)  # what the files say, not what was built
        assert model.max_seq_length == 32
        cases, worst = compute(model)
        modes = {v: k for k, v in bt.POOLING_MODES.items()}
        expected = {
            "generator": "tools/gen_encoder_fixtures.py",
            "model_type": model.cfg["model_type"],
            "hidden_size": model.cfg["hidden_size"],
            "max_seq_length": model.max_seq_length,
            "pooling": [modes[k] for k in model.pooling.modes()],
            "normalize": model.normalize is not None,
            "sentence_embedding_dimension": len(cases[0]["sentence_embedding"]),
            "batch_max_abs_diff": float("%.3g" % worst),
            "cases": cases,
        }
        path = os.path.join(d, "expected.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump_expected(expected))
        with open(path, encoding="utf-8") as f:
            check(d, json.load(f))
        size = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(d) for x in fs)
        print("%s: %d cases, batch max diff %.2g, %d KB, lengths %s"
              % (name, len(cases), worst, size // 1024, [len(c["input_ids"]) for c in cases]))


if __name__ == "__main__":
    main()
