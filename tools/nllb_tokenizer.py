"""Hugging Face's slow NLLB, M2M100 and Marian tokenizers, and the NLLB tokenizer.json.

Ports, rule by rule, of transformers 4.57 (the last release with the slow,
sentencepiece-backed NllbTokenizer; 5.0 keeps only a tokenizers-backed one):

- PreTrainedTokenizer's shared rules (tokenization_utils.py,
  tokenization_utils_base.py): added tokens and their ids (_add_tokens),
  splitting on added tokens before the model sees the text (tokenize(), the
  Trie), special tokens (all_special_tokens, all_special_ids),
  convert_ids_to_tokens, _decode (skip_special_tokens, the "legacy added
  tokens" joined with spaces, clean_up_tokenization), and from_pretrained()'s
  reading of tokenizer_config.json (added_tokens_decoder; else, the legacy
  path, special_tokens_map.json and tokenizer.json's added_tokens);
- NllbTokenizer (models/nllb/tokenization_nllb.py): sentencepiece pieces
  with fairseq's offset (<s> 0, <pad> 1, </s> 2, <unk> 3, spm id + 1 for the
  rest, spm's <unk> (id 0) -> 3), the language codes and <mask> as added
  tokens after the spm vocabulary; legacy_behaviour False:
  [src_lang] + tokens + [</s>]; True: tokens + [</s>, src_lang];
- M2M100Tokenizer (models/m2m_100/tokenization_m2m_100.py): spm pieces
  through vocab.json (<unk> outside it), "__xx__" language tokens at
  len(vocab.json) + their index in the language_codes list, then the model
  has num_madeup_words more rows; [__src__] + tokens + [</s>];
- MarianTokenizer (models/marian/tokenization_marian.py): pieces through
  vocab.json, a leading ">>xx<<" language code split off first,
  separate_vocabs (target_vocab.json for the target side), tokens + [</s>];
- the NLLB tokenizer.json: convert_slow_tokenizer.NllbConverter over
  SpmConverter (BPE from the spm pieces and merges, precompiled-charsmap
  normalizer, Metaspace) with NllbTokenizerFast's post-processor and
  added tokens, as NllbTokenizerFast.save_pretrained() writes it.  An
  M2M100 tokenizer.json (transformers has no fast M2M100 tokenizer and no
  converter) built the same way with vocab.json's ids, for JavaScript
  tokenizers that need one.

The spm model file is read with a small protobuf wire-format reader
(read_spm_model), as SpmConverter reads it with sentencepiece_model_pb2:
Debian's python3 has no google.protobuf.

Run with Debian's interpreter (/usr/bin/python3).
"""
import base64
import json
import os
import struct

import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"

# models/nllb/tokenization_nllb.py FAIRSEQ_LANGUAGE_CODES: the 202 codes of
# NLLB-200, in the order that gives their ids (256001 + index in the real model)
NLLB_LANGUAGE_CODES = """ace_Arab ace_Latn acm_Arab acq_Arab aeb_Arab afr_Latn ajp_Arab aka_Latn amh_Ethi
apc_Arab arb_Arab ars_Arab ary_Arab arz_Arab asm_Beng ast_Latn awa_Deva ayr_Latn azb_Arab azj_Latn bak_Cyrl
bam_Latn ban_Latn bel_Cyrl bem_Latn ben_Beng bho_Deva bjn_Arab bjn_Latn bod_Tibt bos_Latn bug_Latn bul_Cyrl
cat_Latn ceb_Latn ces_Latn cjk_Latn ckb_Arab crh_Latn cym_Latn dan_Latn deu_Latn dik_Latn dyu_Latn dzo_Tibt
ell_Grek eng_Latn epo_Latn est_Latn eus_Latn ewe_Latn fao_Latn pes_Arab fij_Latn fin_Latn fon_Latn fra_Latn
fur_Latn fuv_Latn gla_Latn gle_Latn glg_Latn grn_Latn guj_Gujr hat_Latn hau_Latn heb_Hebr hin_Deva hne_Deva
hrv_Latn hun_Latn hye_Armn ibo_Latn ilo_Latn ind_Latn isl_Latn ita_Latn jav_Latn jpn_Jpan kab_Latn kac_Latn
kam_Latn kan_Knda kas_Arab kas_Deva kat_Geor knc_Arab knc_Latn kaz_Cyrl kbp_Latn kea_Latn khm_Khmr kik_Latn
kin_Latn kir_Cyrl kmb_Latn kon_Latn kor_Hang kmr_Latn lao_Laoo lvs_Latn lij_Latn lim_Latn lin_Latn lit_Latn
lmo_Latn ltg_Latn ltz_Latn lua_Latn lug_Latn luo_Latn lus_Latn mag_Deva mai_Deva mal_Mlym mar_Deva min_Latn
mkd_Cyrl plt_Latn mlt_Latn mni_Beng khk_Cyrl mos_Latn mri_Latn zsm_Latn mya_Mymr nld_Latn nno_Latn nob_Latn
npi_Deva nso_Latn nus_Latn nya_Latn oci_Latn gaz_Latn ory_Orya pag_Latn pan_Guru pap_Latn pol_Latn por_Latn
prs_Arab pbt_Arab quy_Latn ron_Latn run_Latn rus_Cyrl sag_Latn san_Deva sat_Beng scn_Latn shn_Mymr sin_Sinh
slk_Latn slv_Latn smo_Latn sna_Latn snd_Arab som_Latn sot_Latn spa_Latn als_Latn srd_Latn srp_Cyrl ssw_Latn
sun_Latn swe_Latn swh_Latn szl_Latn tam_Taml tat_Cyrl tel_Telu tgk_Cyrl tgl_Latn tha_Thai tir_Ethi taq_Latn
taq_Tfng tpi_Latn tsn_Latn tso_Latn tuk_Latn tum_Latn tur_Latn twi_Latn tzm_Tfng uig_Arab ukr_Cyrl umb_Latn
urd_Arab uzn_Latn vec_Latn vie_Latn war_Latn wol_Latn xho_Latn ydd_Hebr yor_Latn yue_Hant zho_Hans zho_Hant
zul_Latn""".split()

# models/m2m_100/tokenization_m2m_100.py FAIRSEQ_LANGUAGE_CODES
M2M100_LANGUAGE_CODES = {
    "m2m100": """af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha
he hi hr ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or
pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu""".split(),
    "wmt21": ["en", "ha", "is", "ja", "cs", "ru", "zh", "de"],
}

SPECIAL_TOKENS_ATTRIBUTES = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                             "cls_token", "mask_token", "additional_special_tokens"]


# ------------------------------------------------------- sentencepiece model

def _varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def _fields(buf):
    """(field number, wire type, value, the field's raw bytes) of a protobuf
    message, in order.  Also the reader of tools/train_sentence_encoder.py
    and bench/embed.py."""
    i = 0
    while i < len(buf):
        start = i
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported protobuf wire type %d" % wt)
        yield num, wt, v, buf[start:i]


def read_spm_model(path):
    """The parts of sentencepiece_model.proto's ModelProto the converters
    read: pieces (piece, score, type: 1 normal, 2 unknown, 3 control,
    4 user-defined, 5 unused, 6 byte), trainer_spec's model_type (1 unigram,
    2 bpe), unk_id, unk_piece and byte_fallback, normalizer_spec's name and
    precompiled_charsmap."""
    with open(path, "rb") as f:
        buf = f.read()
    out = {"pieces": [], "model_type": 1, "unk_id": 0, "unk_piece": "<unk>", "byte_fallback": False,
           "normalizer_name": None, "precompiled_charsmap": b""}
    for num, _, v, _ in _fields(buf):
        if num == 1:
            piece, score, typ = "", 0.0, 1
            for n2, _, v2, _ in _fields(v):
                if n2 == 1:
                    piece = bytes(v2).decode("utf-8")
                elif n2 == 2:
                    score = struct.unpack("<f", v2)[0]
                elif n2 == 3:
                    typ = v2
            out["pieces"].append((piece, score, typ))
        elif num == 2:
            for n2, _, v2, _ in _fields(v):
                if n2 == 3:
                    out["model_type"] = v2
                elif n2 == 35:
                    out["byte_fallback"] = bool(v2)
                elif n2 == 40:
                    out["unk_id"] = v2
                elif n2 == 45:
                    out["unk_piece"] = bytes(v2).decode("utf-8")
        elif num == 3:
            for n2, _, v2, _ in _fields(v):
                if n2 == 1:
                    out["normalizer_name"] = bytes(v2).decode("utf-8")
                elif n2 == 2:
                    out["precompiled_charsmap"] = bytes(v2)
    return out


# ------------------------------------------------------ PreTrainedTokenizer

class AddedToken:
    """tokenizers.AddedToken: content and its matching flags."""

    def __init__(self, content, single_word=False, lstrip=False, rstrip=False, normalized=True, special=False):
        self.content, self.single_word, self.lstrip, self.rstrip = content, single_word, lstrip, rstrip
        self.normalized, self.special = normalized, special

    def __str__(self):
        return self.content

    def __repr__(self):
        return "AddedToken(%r)" % self.content

    def to_dict(self):
        return {"content": self.content, "lstrip": self.lstrip, "normalized": self.normalized,
                "rstrip": self.rstrip, "single_word": self.single_word, "special": self.special}


def _as_added(value):
    return AddedToken(**value) if isinstance(value, dict) else value


def split_on_tokens(text, tokens):
    """tokenization_utils.Trie.split: text cut around every occurrence of the
    added tokens, the earliest first and, of those starting there, the
    longest (the Trie's lookahead); the pieces in order, tokens included."""
    if not tokens:
        return [text] if text else []
    by_first = {}
    for t in tokens:
        if t:
            by_first.setdefault(t[0], []).append(t)
    for v in by_first.values():
        v.sort(key=len, reverse=True)
    out, start, i = [], 0, 0
    while i < len(text):
        match = next((t for t in by_first.get(text[i], ()) if text.startswith(t, i)), None)
        if match is None:
            i += 1
            continue
        if i > start:
            out.append(text[start:i])
        out.append(match)
        i = start = i + len(match)
    if start < len(text):
        out.append(text[start:])
    return out


class SlowTokenizer:
    """The rules of PreTrainedTokenizer (and PreTrainedTokenizerBase) that
    the three tokenizers use.  Subclasses set up their vocabulary, then call
    _init_special(**kwargs) as their super().__init__() does."""

    clean_up_tokenization_spaces = False

    def _init_special(self, added_tokens_decoder=None, clean_up_tokenization_spaces=False, **special):
        # PreTrainedTokenizer.__init__: the class's own added tokens, then the
        # saved ones (from_pretrained's added_tokens_decoder) over them
        if not hasattr(self, "_added_tokens_decoder"):
            self._added_tokens_decoder = {}
        self._added_tokens_decoder.update({int(k): _as_added(v) for k, v in (added_tokens_decoder or {}).items()})
        self._added_tokens_encoder = {t.content: i for i, t in self._added_tokens_decoder.items()}
        self.clean_up_tokenization_spaces = clean_up_tokenization_spaces
        # PreTrainedTokenizerBase.__init__: the special tokens map
        self._special = {k: None for k in SPECIAL_TOKENS_ATTRIBUTES}
        self._special["additional_special_tokens"] = []
        for k, v in special.items():
            if k in SPECIAL_TOKENS_ATTRIBUTES and v is not None:
                self._special[k] = [_as_added(t) for t in v] if k == "additional_special_tokens" else _as_added(v)
        # then the special tokens not yet added are added, in
        # SPECIAL_TOKENS_ATTRIBUTES' order, after the vocabulary
        self._add_tokens([t for t in self.all_special_tokens_extended if str(t) not in self._added_tokens_encoder],
                         special_tokens=True)

    def _add_tokens(self, new_tokens, special_tokens=False):
        """PreTrainedTokenizer._add_tokens: a token already in get_vocab()
        keeps its id, a new one takes len(get_vocab()) + the number added so
        far; a str becomes AddedToken(normalized=not special, special)."""
        current_vocab = dict(self.get_vocab())
        new_idx = len(current_vocab)
        added = 0
        for token in new_tokens:
            if str(token) == "":
                continue
            if isinstance(token, str):
                if token in self._added_tokens_encoder:
                    continue
                is_special = token in self.all_special_tokens or special_tokens
                token = AddedToken(token, normalized=not is_special, special=is_special)
            elif special_tokens:
                token.special = True
            if token.content not in current_vocab:
                index = new_idx + added
                current_vocab[token.content] = index
                added += 1
            else:
                index = current_vocab[token.content]
            if token.special and token.content not in self.all_special_tokens:
                self._special["additional_special_tokens"].append(token)
            self._added_tokens_decoder[index] = token
            self._added_tokens_encoder[token.content] = index
        return added

    # special tokens (PreTrainedTokenizerBase)
    @property
    def all_special_tokens_extended(self):
        out, seen = [], set()
        for k in SPECIAL_TOKENS_ATTRIBUTES:
            v = self._special[k]
            if not v:
                continue
            for t in (v if isinstance(v, list) else [v]):
                if str(t) not in seen:
                    seen.add(str(t))
                    out.append(t)
        return out

    @property
    def all_special_tokens(self):
        return [str(t) for t in self.all_special_tokens_extended]

    @property
    def all_special_ids(self):
        return self.convert_tokens_to_ids(self.all_special_tokens)

    @property
    def additional_special_tokens(self):
        return [str(t) for t in self._special["additional_special_tokens"]]

    def _special_id(self, name):
        v = self._special[name]
        return None if v is None else self.convert_tokens_to_ids(str(v))

    eos_token_id = property(lambda self: self._special_id("eos_token"))
    pad_token_id = property(lambda self: self._special_id("pad_token"))
    unk_token_id = property(lambda self: self._special_id("unk_token"))
    bos_token_id = property(lambda self: self._special_id("bos_token"))
    unk_token = property(lambda self: str(self._special["unk_token"]))

    @property
    def added_tokens_encoder(self):
        return {t.content: i for i, t in sorted(self._added_tokens_decoder.items())}

    @property
    def added_tokens_decoder(self):
        return dict(sorted(self._added_tokens_decoder.items()))

    def __len__(self):
        return len(self.get_vocab())

    # encoding
    def tokenize(self, text):
        """PreTrainedTokenizer.tokenize: split on the added tokens (the Trie),
        an added token's lstrip / rstrip eating the whitespace beside it
        (single_word not handled: no token here has it), the model's
        _tokenize() on the rest."""
        tokens = split_on_tokens(text, list(self._added_tokens_encoder))
        for i, tok in enumerate(tokens):
            if tok in self._added_tokens_encoder:
                ext = self._added_tokens_decoder[self._added_tokens_encoder[tok]]
                if ext.rstrip and i + 1 < len(tokens) and tokens[i + 1]:
                    tokens[i + 1] = tokens[i + 1].lstrip()
                if ext.lstrip and i > 0 and tokens[i - 1]:
                    tokens[i - 1] = tokens[i - 1].rstrip()
        out = []
        for tok in tokens:
            if not tok:
                continue
            if tok in self._added_tokens_encoder:
                out.append(tok)
            else:
                out.extend(self._tokenize(tok))
        return out

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._convert_token_to_id_with_added_voc(tokens)
        return [self._convert_token_to_id_with_added_voc(t) for t in tokens]

    def _convert_token_to_id_with_added_voc(self, token):
        if token in self._added_tokens_encoder:
            return self._added_tokens_encoder[token]
        return self._convert_token_to_id(token)

    def encode(self, text, add_special_tokens=True):
        """__call__(text)["input_ids"]: tokenize, ids, the special tokens."""
        ids = self.convert_tokens_to_ids(self.tokenize(text))
        return self.build_inputs_with_special_tokens(ids) if add_special_tokens else ids

    # decoding
    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        if isinstance(ids, int):
            if ids in self._added_tokens_decoder:
                return self._added_tokens_decoder[ids].content
            return self._convert_id_to_token(ids)
        special = set(self.all_special_ids) if skip_special_tokens else set()
        out = []
        for i in ids:
            i = int(i)
            if i in special:
                continue
            out.append(self._added_tokens_decoder[i].content if i in self._added_tokens_decoder
                       else self._convert_id_to_token(i))
        return out

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=None,
               spaces_between_special_tokens=True):
        """PreTrainedTokenizer._decode: tokens (special ones dropped with
        skip_special_tokens); added tokens that are not special, and the
        additional special tokens at or past vocab_size, stand apart, the runs
        between them through convert_tokens_to_string; the parts joined by a
        space; then clean_up_tokenization if asked (the config's by default)."""
        tokens = self.convert_ids_to_tokens(ids, skip_special_tokens=skip_special_tokens)
        specials = set(self.all_special_tokens)
        legacy_added = (set(self._added_tokens_encoder) - specials) | {
            t for t in self.additional_special_tokens if self.convert_tokens_to_ids(t) >= self.vocab_size}
        sub_texts, current = [], []
        for tok in tokens:
            if skip_special_tokens and tok in specials:
                continue
            if tok in legacy_added:
                if current:
                    s = self.convert_tokens_to_string(current)
                    if len(s) > 0:
                        sub_texts.append(s)
                    current = []
                sub_texts.append(tok)
            else:
                current.append(tok)
        if current:
            sub_texts.append(self.convert_tokens_to_string(current))
        text = (" " if spaces_between_special_tokens else "").join(sub_texts)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        return clean_up_tokenization(text) if clean_up_tokenization_spaces else text


def clean_up_tokenization(s):
    """PreTrainedTokenizerBase.clean_up_tokenization."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        s = s.replace(a, b)
    return s


# ------------------------------------------------------------------- NLLB

class NllbTokenizer(SlowTokenizer):
    """tokenization_nllb.NllbTokenizer (slow, transformers <= 4.57)."""

    def __init__(self, vocab_file, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
                 unk_token="<unk>", pad_token="<pad>", mask_token="<mask>", src_lang=None, tgt_lang=None,
                 additional_special_tokens=None, legacy_behaviour=False, added_tokens_decoder=None,
                 clean_up_tokenization_spaces=False, **_ignored):
        if additional_special_tokens is None:
            additional_special_tokens = list(NLLB_LANGUAGE_CODES)
        specials = {}
        for name, tok in (("bos_token", bos_token), ("pad_token", pad_token), ("eos_token", eos_token),
                          ("unk_token", unk_token)):
            specials[name] = AddedToken(tok, normalized=False, special=True) if isinstance(tok, str) else _as_added(tok)
        # <mask> behaves like a word: it takes the space before it
        mask_token = AddedToken(mask_token, normalized=True, lstrip=True, special=True) \
            if isinstance(mask_token, str) else _as_added(mask_token)
        self.legacy_behaviour = legacy_behaviour
        self.vocab_file = vocab_file
        self.sp_model = spm.SentencePieceProcessor(model_file=vocab_file)
        # fairseq's first four ids, in place of spm's <unk> <s> </s>
        self._added_tokens_decoder = {0: specials["bos_token"], 1: specials["pad_token"],
                                      2: specials["eos_token"], 3: specials["unk_token"]}
        self.fairseq_offset = 1
        self.sp_model_size = len(self.sp_model)
        self._init_special(added_tokens_decoder=added_tokens_decoder,
                           clean_up_tokenization_spaces=clean_up_tokenization_spaces,
                           bos_token=specials["bos_token"], eos_token=specials["eos_token"],
                           unk_token=specials["unk_token"], sep_token=sep_token, cls_token=cls_token,
                           pad_token=specials["pad_token"], mask_token=mask_token,
                           additional_special_tokens=additional_special_tokens)
        self._src_lang = src_lang if src_lang is not None else "eng_Latn"
        self.tgt_lang = tgt_lang
        self.set_src_lang_special_tokens(self._src_lang)

    @property
    def vocab_size(self):
        return len(self.sp_model) + self.fairseq_offset

    @property
    def src_lang(self):
        return self._src_lang

    @src_lang.setter
    def src_lang(self, lang):
        self._src_lang = lang
        self.set_src_lang_special_tokens(lang)

    def get_vocab(self):
        vocab = {self.convert_ids_to_tokens(i): i for i in range(self.vocab_size)}
        vocab.update(self.added_tokens_encoder)
        return vocab

    def _tokenize(self, text):
        return self.sp_model.encode(text, out_type=str)

    def _convert_token_to_id(self, token):
        spm_id = self.sp_model.PieceToId(token)
        return spm_id + self.fairseq_offset if spm_id else self.unk_token_id

    def _convert_id_to_token(self, index):
        return self.sp_model.IdToPiece(index - self.fairseq_offset)

    def convert_tokens_to_string(self, tokens):
        return "".join(tokens).replace(SPIECE_UNDERLINE, " ").strip()

    def set_src_lang_special_tokens(self, src_lang):
        """legacy_behaviour: no prefix, suffix [eos, src_lang]; otherwise
        prefix [src_lang], suffix [eos]."""
        self.cur_lang_code = self.convert_tokens_to_ids(src_lang)
        if self.legacy_behaviour:
            self.prefix_tokens, self.suffix_tokens = [], [self.eos_token_id, self.cur_lang_code]
        else:
            self.prefix_tokens, self.suffix_tokens = [self.cur_lang_code], [self.eos_token_id]

    set_tgt_lang_special_tokens = set_src_lang_special_tokens

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        return self.prefix_tokens + token_ids_0 + (token_ids_1 or []) + self.suffix_tokens

    def lang_id(self, lang):
        """_build_translation_inputs' forced_bos_token_id for tgt_lang."""
        return self.convert_tokens_to_ids(lang)


# ----------------------------------------------------------------- M2M100

class M2M100Tokenizer(SlowTokenizer):
    """tokenization_m2m_100.M2M100Tokenizer."""

    def __init__(self, vocab_file, spm_file, src_lang=None, tgt_lang=None, bos_token="<s>", eos_token="</s>",
                 sep_token="</s>", pad_token="<pad>", unk_token="<unk>", language_codes="m2m100",
                 num_madeup_words=8, additional_special_tokens=None, added_tokens_decoder=None,
                 clean_up_tokenization_spaces=False, **_ignored):
        self.language_codes = language_codes
        codes = M2M100_LANGUAGE_CODES[language_codes]
        self.lang_code_to_token = {c: "__%s__" % c for c in codes}
        # Hugging Face's loop meant to add the missing language tokens to
        # additional_special_tokens never adds one: its condition
        # `lang_code not in str(token) not in self.added_tokens_encoder` is a
        # chained comparison whose first part (the code is always inside its
        # token) is False.  The tokens are special only if the config lists them.
        additional_special_tokens = list(additional_special_tokens or [])
        with open(vocab_file, encoding="utf-8") as f:
            self.encoder = json.load(f)
        self.decoder = {v: k for k, v in self.encoder.items()}
        self.spm_file = spm_file
        self.sp_model = spm.SentencePieceProcessor(model_file=spm_file)
        self.encoder_size = len(self.encoder)
        self.lang_token_to_id = {self.lang_code_to_token[c]: self.encoder_size + i for i, c in enumerate(codes)}
        self.lang_code_to_id = {c: self.encoder_size + i for i, c in enumerate(codes)}
        self.id_to_lang_token = {v: k for k, v in self.lang_token_to_id.items()}
        self._src_lang = src_lang if src_lang is not None else "en"
        self.tgt_lang = tgt_lang
        self.num_madeup_words = num_madeup_words
        self._init_special(added_tokens_decoder=added_tokens_decoder,
                           clean_up_tokenization_spaces=clean_up_tokenization_spaces,
                           bos_token=bos_token, eos_token=eos_token, sep_token=sep_token, unk_token=unk_token,
                           pad_token=pad_token, additional_special_tokens=additional_special_tokens)
        self.set_src_lang_special_tokens(self._src_lang)

    @property
    def vocab_size(self):
        return len(self.encoder)

    @property
    def src_lang(self):
        return self._src_lang

    @src_lang.setter
    def src_lang(self, lang):
        self._src_lang = lang
        self.set_src_lang_special_tokens(lang)

    def get_vocab(self):
        vocab = {self.convert_ids_to_tokens(i): i for i in range(self.vocab_size)}
        vocab.update(self.added_tokens_encoder)
        return vocab

    def _tokenize(self, text):
        return self.sp_model.encode(text, out_type=str)

    def _convert_token_to_id(self, token):
        if token in self.lang_token_to_id:
            return self.lang_token_to_id[token]
        return self.encoder.get(token, self.encoder[self.unk_token])

    def _convert_id_to_token(self, index):
        if index in self.id_to_lang_token:
            return self.id_to_lang_token[index]
        return self.decoder.get(index, self.unk_token)

    def convert_tokens_to_string(self, tokens):
        """spm-decoded runs, special tokens kept as they are, stripped."""
        current, out = [], ""
        specials = set(self.all_special_tokens)
        for tok in tokens:
            if tok in specials:
                out += self.sp_model.decode(current) + tok
                current = []
            else:
                current.append(tok)
        out += self.sp_model.decode(current)
        return out.strip()

    def set_src_lang_special_tokens(self, src_lang):
        """prefix [__src_lang__], suffix [eos]."""
        self.cur_lang_id = self.lang_token_to_id[self.lang_code_to_token[src_lang]]
        self.prefix_tokens, self.suffix_tokens = [self.cur_lang_id], [self.eos_token_id]

    set_tgt_lang_special_tokens = set_src_lang_special_tokens

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        return self.prefix_tokens + token_ids_0 + (token_ids_1 or []) + self.suffix_tokens

    def get_lang_id(self, lang):
        return self.lang_token_to_id[self.lang_code_to_token[lang]]

    lang_id = get_lang_id


# ----------------------------------------------------------------- Marian

class MarianTokenizer(SlowTokenizer):
    """tokenization_marian.MarianTokenizer (4.57: the language code is split
    off by text.startswith(">>") and text.find("<<"); before transformers 4.53
    by the regex ">>.+<<", greedy, so up to the last "<<" of the text)."""

    def __init__(self, source_spm, target_spm, vocab, target_vocab_file=None, source_lang=None, target_lang=None,
                 unk_token="<unk>", eos_token="</s>", pad_token="<pad>", separate_vocabs=False,
                 added_tokens_decoder=None, clean_up_tokenization_spaces=False, **_ignored):
        self.separate_vocabs = separate_vocabs
        with open(vocab, encoding="utf-8") as f:
            self.encoder = json.load(f)
        if str(unk_token) not in self.encoder:
            raise KeyError("<unk> token must be in the vocab")
        if separate_vocabs:
            with open(target_vocab_file, encoding="utf-8") as f:
                self.target_encoder = json.load(f)
            self.decoder = {v: k for k, v in self.target_encoder.items()}
            self.supported_language_codes = []
        else:
            self.decoder = {v: k for k, v in self.encoder.items()}
            self.supported_language_codes = [k for k in self.encoder if k.startswith(">>") and k.endswith("<<")]
        self.source_lang, self.target_lang = source_lang, target_lang
        self.spm_source = spm.SentencePieceProcessor(model_file=source_spm)
        self.spm_target = spm.SentencePieceProcessor(model_file=target_spm)
        self.current_spm, self.current_encoder = self.spm_source, self.encoder
        self._decode_use_source_tokenizer = False
        self._init_special(added_tokens_decoder=added_tokens_decoder,
                           clean_up_tokenization_spaces=clean_up_tokenization_spaces,
                           unk_token=unk_token, eos_token=eos_token, pad_token=pad_token)

    @property
    def vocab_size(self):
        return len(self.encoder)

    def get_vocab(self):
        return dict(self.encoder, **self.added_tokens_encoder)

    def _convert_token_to_id(self, token):
        return self.current_encoder.get(token, self.current_encoder[self.unk_token])

    @staticmethod
    def remove_language_code(text):
        """A leading ">>xx<<" (up to the first "<<") as a token of its own."""
        code = []
        if text.startswith(">>"):
            end = text.find("<<")
            if end != -1:
                code.append(text[:end + 2])
                text = text[end + 2:]
        return code, text

    def _tokenize(self, text):
        code, text = self.remove_language_code(text)
        return code + self.current_spm.encode(text, out_type=str)

    def _convert_id_to_token(self, index):
        return self.decoder.get(index, self.unk_token)

    def convert_tokens_to_string(self, tokens):
        """The target spm's decode_pieces of the runs between special tokens."""
        sp = self.spm_source if self._decode_use_source_tokenizer else self.spm_target
        current, out = [], ""
        specials = set(self.all_special_tokens)
        for tok in tokens:
            if tok in specials:
                out += sp.decode_pieces(current) + tok + " "
                current = []
            else:
                current.append(tok)
        out += sp.decode_pieces(current)
        return out.replace(SPIECE_UNDERLINE, " ").strip()

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        return token_ids_0 + (token_ids_1 or []) + [self.eos_token_id]


# ------------------------------------------------------- from_pretrained()

def from_pretrained(directory, **kwargs):
    """PreTrainedTokenizerBase.from_pretrained() on a local directory for the
    three slow classes: tokenizer_config.json's keys, the files, then
    kwargs; added tokens from its added_tokens_decoder or, if it has none
    (the legacy path), special_tokens_map.json's tokens and tokenizer.json's
    added_tokens."""
    def path(name):
        p = os.path.join(directory, name)
        return p if os.path.exists(p) else None

    cfg = {}
    if path("tokenizer_config.json"):
        with open(path("tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
    cls_name = kwargs.pop("tokenizer_class", None) or cfg.get("tokenizer_class") or "MarianTokenizer"
    cls = {"NllbTokenizer": NllbTokenizer, "NllbTokenizerFast": NllbTokenizer,
           "M2M100Tokenizer": M2M100Tokenizer, "MarianTokenizer": MarianTokenizer}[cls_name]
    init = {k: v for k, v in cfg.items() if k != "tokenizer_class"}
    init.update(kwargs)
    files = {NllbTokenizer: {"vocab_file": "sentencepiece.bpe.model"},
             M2M100Tokenizer: {"vocab_file": "vocab.json", "spm_file": "sentencepiece.bpe.model"},
             MarianTokenizer: {"source_spm": "source.spm", "target_spm": "target.spm", "vocab": "vocab.json",
                               "target_vocab_file": "target_vocab.json"}}[cls]
    for arg, name in files.items():
        if arg not in init and path(name):
            init[arg] = path(name)
    added = {}
    if "added_tokens_decoder" in init:
        added = {int(k): _as_added(v) for k, v in init["added_tokens_decoder"].items()}
    else:
        if path("special_tokens_map.json"):
            with open(path("special_tokens_map.json"), encoding="utf-8") as f:
                stm = json.load(f)
            for key, value in stm.items():
                if key in kwargs and kwargs[key]:
                    continue
                if isinstance(value, dict):
                    value = AddedToken(**dict(value, special=True))
                elif key == "additional_special_tokens" and isinstance(value, list):
                    extra = list(init.pop("additional_special_tokens", None) or [])
                    for tok in value:
                        tok = AddedToken(**dict(tok, special=True)) if isinstance(tok, dict) else tok
                        if str(tok) not in [str(t) for t in extra]:
                            extra.append(tok)
                    value = extra
                init[key] = value
        if path("tokenizer.json"):
            with open(path("tokenizer.json"), encoding="utf-8") as f:
                for t in json.load(f)["added_tokens"]:
                    t = dict(t)
                    idx = t.pop("id")
                    added[idx] = AddedToken(**t)
    init["added_tokens_decoder"] = added
    # special token attributes take the AddedToken of the same content
    by_content = {t.content: t for t in added.values()}
    for key in SPECIAL_TOKENS_ATTRIBUTES[:-1]:
        if init.get(key) is not None:
            init[key] = by_content.get(str(_as_added(init[key])), _as_added(init[key]))
    return cls(**init)


# ------------------------------------------------------------ tokenizer.json

def generate_merges(vocab, vocab_scores):
    """convert_slow_tokenizer.generate_merges with vocab_scores given: for
    each piece (in vocab_scores' order) every split into two pieces of
    vocab, sorted by the two pieces' vocab ids; then all sorted by the
    piece's score, then the left and right lengths, descending."""
    scores = dict(vocab_scores)
    merges = []
    for merge, score in scores.items():
        local = [(merge[:i], merge[i:], score) for i in range(1, len(merge))
                 if merge[:i] in vocab and merge[i:] in vocab]
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda v: (v[2], len(v[0]), len(v[1])), reverse=True)
    return [[a, b] for a, b, _ in merges]


def _template(prefix, suffix, ids):
    """processors.TemplateProcessing(single=prefix + ["$A"] + suffix,
    pair=prefix + ["$A", "$B"] + suffix, special_tokens=...) serialized."""
    def special(t):
        return {"SpecialToken": {"id": t, "type_id": 0}}

    def seq(s):
        return {"Sequence": {"id": s, "type_id": 0}}
    single = [special(t) for t in prefix] + [seq("A")] + [special(t) for t in suffix]
    pair = [special(t) for t in prefix] + [seq("A"), seq("B")] + [special(t) for t in suffix]
    tokens = {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in zip(prefix + suffix, ids)}
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": dict(sorted(tokens.items()))}


def _spm_tokenizer_json(proto, bpe_vocab, merges, added_tokens, post_processor):
    """SpmConverter.converted() for a BPE model (model_type 2), serialized as
    tokenizers writes tokenizer.json."""
    if proto["model_type"] != 2:
        raise ValueError("not a BPE sentencepiece model")
    normalizers = [{"type": "Strip", "strip_left": False, "strip_right": True},
                   {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": SPIECE_UNDERLINE}]
    if proto["precompiled_charsmap"]:
        normalizers.insert(0, {"type": "Precompiled", "precompiled_charsmap":
                               base64.b64encode(proto["precompiled_charsmap"]).decode("ascii")})
    metaspace = {"replacement": SPIECE_UNDERLINE, "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [dict(id=i, **{k: t.to_dict()[k] for k in ("content", "single_word", "lstrip", "rstrip",
                                                                     "normalized", "special")})
                         for i, t in sorted(added_tokens.items())],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": dict(type="Metaspace", **metaspace),
        "post_processor": post_processor,
        "decoder": dict(type="Metaspace", **metaspace),
        "model": {"type": "BPE", "dropout": None, "unk_token": proto["unk_piece"], "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False, "ignore_merges": False,
                  "vocab": bpe_vocab, "merges": merges},
    }


def nllb_tokenizer_json(tok):
    """The tokenizer.json NllbTokenizerFast.from_pretrained(slow files,
    src_lang=...).save_pretrained() writes: convert_slow_tokenizer.NllbConverter
    (BPE vocab <s> <pad> </s> <unk> then spm pieces 3.. at spm id + 1, unk
    id 3; merges by SentencePieceExtractor + generate_merges over spm's ids
    and the pieces' scores; fuse_unk; normalizer Precompiled(charsmap),
    Strip(right), Replace(" {2,}" -> "\u2581"); Metaspace(prepend_scheme
    "always") pre-tokenizer and decoder; spm's control pieces as added
    tokens), then the fast tokenizer's added tokens (those of
    added_tokens_decoder: specials, language codes, <mask>) and
    set_src_lang_special_tokens()'s TemplateProcessing post-processor."""
    proto = read_spm_model(tok.vocab_file)
    pieces = proto["pieces"]
    vocab_scores = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + \
        [(p, s) for p, s, _ in pieces[3:]]
    bpe_vocab = {w: i for i, (w, _) in enumerate(vocab_scores)}
    sp_vocab = {p: i for i, (p, _, _) in enumerate(pieces)}
    merges = generate_merges(sp_vocab, vocab_scores)
    added = {}
    for i, (p, _, typ) in enumerate(pieces):       # SpmConverter: control / user-defined pieces
        if typ in (3, 4):
            added[bpe_vocab[p]] = AddedToken(p, normalized=False, special=typ == 3)
    for i, t in tok.added_tokens_decoder.items():
        added[i] = t
    prefix = tok.convert_ids_to_tokens(tok.prefix_tokens)
    suffix = tok.convert_ids_to_tokens(tok.suffix_tokens)
    post = _template(prefix, suffix, tok.prefix_tokens + tok.suffix_tokens)
    return _spm_tokenizer_json(proto, bpe_vocab, merges, added, post)


def m2m100_tokenizer_json(tok):
    """A tokenizer.json for an M2M100 directory (ours: transformers has no fast
    M2M100 tokenizer): NllbConverter's construction with vocab.json's ids for
    the BPE vocabulary (every spm piece must be in vocab.json, as a BPE
    model needs its merges' results), <unk> for characters outside it, the
    language tokens as added tokens at their ids, [__src__] $A </s>."""
    proto = read_spm_model(tok.spm_file)
    pieces = proto["pieces"]
    missing = [p for p, _, typ in pieces if typ == 1 and p not in tok.encoder]
    if missing:
        raise ValueError("spm pieces missing from vocab.json: %s" % missing[:5])
    sp_vocab = {p: i for i, (p, _, _) in enumerate(pieces)}
    vocab_scores = [(p, s) for p, s, typ in pieces if typ == 1]
    merges = generate_merges(sp_vocab, vocab_scores)
    added = {tok.encoder[str(tok._special[k])]: AddedToken(str(tok._special[k]), normalized=False, special=True)
             for k in ("bos_token", "pad_token", "eos_token", "unk_token")}
    for i, t in tok.added_tokens_decoder.items():
        added[i] = t
    prefix = tok.convert_ids_to_tokens(tok.prefix_tokens)
    suffix = tok.convert_ids_to_tokens(tok.suffix_tokens)
    post = _template(prefix, suffix, tok.prefix_tokens + tok.suffix_tokens)
    proto = dict(proto, unk_piece=str(tok._special["unk_token"]))
    return _spm_tokenizer_json(proto, dict(tok.encoder), merges, added, post)
