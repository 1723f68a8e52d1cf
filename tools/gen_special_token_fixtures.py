#!/usr/bin/python3
"""Special tokens written in the text (issue 38): what each family's
reference tokenizer and model make of them, for test/pgtap/33_special_tokens.sql.

For texts that hold every special token of the families (<s> </s> <pad>
<unk> <mask>, NLLB's deu_Latn, M2M100's __de__, BERT's [CLS] [SEP] [PAD]
[MASK] [UNK], glued to words, between spaces, doubled, cut short):

- the checkpoint fixtures (test/fixtures/checkpoints: nllb_tiny,
  m2m100_tiny, marian_multi, marian_sepvocab): the source ids of the slow
  tokenizers as tools/nllb_tokenizer.py ports them (PreTrainedTokenizer's
  split on added tokens, then the model's tokenizer), checked against npm
  @huggingface/tokenizers on the fixtures' tokenizer.json (NLLB, M2M100);
  and the encoder's output on those ids from tools/m2m100_torch.py and
  tools/marian_torch.py (M2M100's positions are counted from the ids:
  a <pad> takes padding_idx and is not counted);
- the encoder fixture xlmr_tiny (test/fixtures/encoders): the ids of
  XLMRobertaTokenizer (tools/bert_torch.py, the SentencePiece library),
  last_hidden_state and the sentence embedding (positions from the ids:
  create_position_ids_from_input_ids);
- the BERT tokenizers of test/fixtures/tokenizers: the ids of npm
  @huggingface/tokenizers, checked against BertTokenizer's port.

    (cd tools/npm_tokenizers && npm install)
    /usr/bin/python3 tools/gen_special_token_fixtures.py

Writes test/fixtures/special_tokens.json.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
import bert_torch as bt  # noqa: E402
import gen_checkpoint_fixtures as gcf  # noqa: E402
import m2m100_torch as m2m  # noqa: E402
import nllb_tokenizer as nt  # noqa: E402

FX = os.path.join(ROOT, "test", "fixtures")

COMMON = [
    "Ein Hund <pad> rennt.", "Ein Hund<pad>rennt.", "a </s> b", "<s>Ein Hund</s>", "x <unk> y",
    "<mask> Hund", "Ein <mask>", "Ein <mask> Hund", "a  <pad>  b", "<pad><pad> Hund", "<pa d> </s",
    "<unk><s></s><pad><mask>", "Zwei Hunde <pad><pad><pad> spielen im Schnee.", "Ein Hund.",
]
FAMILY = {
    "nllb_tiny": ["deu_Latn Ein Hund eng_Latn", "Ich spreche deu_Latndeu_Latn.", "fra_Latn<pad>ita_Latn"],
    "m2m100_tiny": ["__de__ Hund __en__", "Ein __fr__<pad>Hund", "__de_ Hund"],
    "marian_multi": [">>fra<< Ein Hund <pad>", "Hund >>fra<< Katze </s>"],
    "marian_sepvocab": ["Ein Hund </s> <unk>"],
    "xlmr_tiny": ["Ein Mann <pad> fährt <pad> Fahrrad.", "<mask>Ein<mask> Mann"],
    "bert": ["[CLS] a [SEP] b [PAD] [MASK] [UNK]", "Ein[MASK]Hund", "[cls] [Sep] [MASK", "Zwei [PAD] Hunde."],
}
CHECKPOINTS = {"nllb_tiny": "deu_Latn", "m2m100_tiny": "de", "marian_multi": None, "marian_sepvocab": None}
BERTS = ["bert_cased", "bert_uncased"]


def sig6(x):
    return float("%.6g" % x)


def npm_plain_ids(directory, texts):
    """npm @huggingface/tokenizers' Tokenizer(tokenizer.json).encode(text).ids (tools/npm_tokenizers/plain_ids.mjs)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    try:
        out = subprocess.run(["node", os.path.join(TOOLS, "npm_tokenizers", "plain_ids.mjs"), directory, f.name],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return json.loads(out)


def checkpoint_cases(name, src_lang):
    d = os.path.join(FX, "checkpoints", name)
    tok = nt.from_pretrained(d, **({"src_lang": src_lang} if src_lang else {}))
    texts = COMMON + FAMILY[name]
    if name == "marian_multi":
        # a multi-target Marian model needs its target: ">>fra<<" starts each text, as MarianTokenizer's users write it
        texts = [t if t.startswith(">>") else ">>fra<< " + t for t in texts]
    ids = [tok.encode(t) for t in texts]
    npm_agrees = None
    if os.path.exists(os.path.join(d, "tokenizer.json")):
        npm = npm_plain_ids(d, texts)
        bad = [(t, a, b) for t, a, b in zip(texts, ids, npm) if a != b]
        if bad:
            raise SystemExit("%s: the port and npm disagree: %r" % (name, bad))
        npm_agrees = True
    model = m2m.load_m2m100(d) if name.startswith(("nllb", "m2m100")) else gcf.load_marian_checkpoint(d)
    cases = []
    for t, x in zip(texts, ids):
        with torch.inference_mode():
            # the tokenizer's attention mask: 1 everywhere, a <pad> of the text included
            enc = model.encode(torch.tensor([x]), torch.ones(1, len(x), dtype=torch.long))[0][0]
        cases.append({"text": t, "src_lang": src_lang, "ids": x, "tokens": tok.convert_ids_to_tokens(x),
                      "encoder_output": [sig6(v) for v in enc.flatten().tolist()]})
    return {"cases": cases, "npm_agrees": npm_agrees}


def xlmr_cases():
    model = bt.load_encoder(os.path.join(FX, "encoders", "xlmr_tiny"))
    texts = COMMON + FAMILY["xlmr_tiny"]
    cases = []
    for t in texts:
        x = model.tokenizer.encode(t, max_length=model.max_seq_length)
        h, s = bt.embed(model, [x])
        cases.append({"text": t, "ids": x, "tokens": model.tokenizer.convert_ids_to_tokens(x),
                      "last_hidden_state": [sig6(v) for v in h[0].flatten().tolist()],
                      "sentence_embedding": [sig6(v) for v in s[0].tolist()]})
    return {"cases": cases}


def bert_cases(name):
    d = os.path.join(FX, "tokenizers", name)
    tok = bt.load_tokenizer(d)
    texts = COMMON + FAMILY["bert"]
    npm = npm_plain_ids(d, texts)
    ported = [tok.encode(t) for t in texts]
    bad = [(t, a, b) for t, a, b in zip(texts, ported, npm) if a != b]
    if bad:
        raise SystemExit("%s: BertTokenizer's port and npm disagree: %r" % (name, bad))
    return {"cases": [{"text": t, "ids": x} for t, x in zip(texts, npm)]}


def main():
    torch.set_num_threads(1)
    out = {"generator": "tools/gen_special_token_fixtures.py", "models": {}, "tokenizers": {}}
    for name, lang in CHECKPOINTS.items():
        out["models"][name] = checkpoint_cases(name, lang)
    out["models"]["xlmr_tiny"] = xlmr_cases()
    for name in BERTS:
        out["tokenizers"][name] = bert_cases(name)
    with open(os.path.join(FX, "special_tokens.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for name, m in list(out["models"].items()) + list(out["tokenizers"].items()):
        print(name, len(m["cases"]), "cases;", [len(c["ids"]) for c in m["cases"]])


if __name__ == "__main__":
    main()
