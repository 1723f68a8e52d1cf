#!/usr/bin/python3
"""The sentences the WordPiece and XLM-R tokenizer fixtures are compared on,
id for id: test/fixtures/tokenizers/corpus.jsonl, one JSON string a line.

    apt-get install icu-devtools   # uconv, for the transliterations
    /usr/bin/python3 tools/gen_tokenizer_corpus.py [--out PATH]

Deterministic (one seeded random.Random; Python 3.11's unicodedata, Unicode
14; ICU 72's uconv; Debian 12's glibc locale sources). Sources, all offline:
  - Multi30k German and English, val + test_2016_flickr + test_2017_flickr,
    verbatim and in this order, first (6,028 lines);
  - Multi30k train sentences upper-cased, title-cased, in NFD (combining
    marks), in full-width forms, and transliterated by ICU (uconv -x
    Latin-Cyrillic, -Greek, -Arabic, -Hebrew, -Devanagari, -Thai, -Hangul,
    -Katakana, -Hiragana, ...);
  - words from glibc's locale sources (/usr/share/i18n/locales: month and
    day names, language and country names in their own scripts);
  - text decoded from random piece sequences of the opus-mt-zh-en source
    (Chinese) and opus-mt-en-mg target (Malagasy) SentencePiece models;
  - made-up lines: emoji (ZWJ sequences, skin tones, flags, keycaps),
    combining marks, control and format characters, tabs, NBSP and the other
    Unicode spaces, ZWJ/ZWNJ, words of 99..300 characters (100 is WordPiece's
    max_input_chars_per_word), empty and whitespace-only lines, punctuation
    runs, numbers in many scripts, letters with special case mappings,
    special-token look-alikes ([MASK], <mask>), CJK block boundaries, and
    characters picked at random by Unicode category.
The Multi30k sentences are not copied into the repository (the data stays
in ../shared/data): their lines are references, {"multi30k": "val.de.gz",
"line": 1} (1-based), which read_corpus() and the tests resolve.
JSON: ensure_ascii off, but C0/C1 controls, format, line/paragraph
separators, private-use and unassigned code points and noncharacters are
written as \\uXXXX escapes, so that each line stays one line for any reader.
Prints the number of lines per source and per script.
"""
import argparse
import collections
import glob
import gzip
import json
import math
import os
import re
import subprocess
import unicodedata

import random

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SHARED = os.path.join(ROOT, "..", "shared", "data")
M30K = os.path.join(SHARED, "multi30k")
SPM = os.path.join(SHARED, "spm")
LOCALES = "/usr/share/i18n/locales"
OUT = os.path.join(ROOT, "test", "fixtures", "tokenizers", "corpus.jsonl")
SEED = 20240611

UCD32 = unicodedata.ucd_3_2_0


def m30k(name):
    with gzip.open(os.path.join(M30K, name), "rt", encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def uconv(transform, lines):
    assert all("\n" not in s for s in lines)
    out = subprocess.run(["uconv", "-x", transform], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, encoding="utf-8", check=True).stdout
    res = out.split("\n")[:len(lines)]
    assert len(res) == len(lines), transform
    return res


# --- glibc locale words ----------------------------------------------------
LOCALE_KEYS = {"mon", "abmon", "day", "abday", "alt_mon", "ab_alt_mon", "lang_name",
               "country_name", "yesstr", "nostr", "am_pm", "name_mr", "name_mrs",
               "name_miss", "name_ms"}


def locale_words(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    text = re.sub(r"/\n", " ", text)  # continuation lines (escape_char /)
    words = []
    for line in text.split("\n"):
        parts = line.split(None, 1)
        if len(parts) < 2 or parts[0] not in LOCALE_KEYS:
            continue
        for s in re.findall(r'"((?:[^"/]|/.)*)"', parts[1]):
            s = re.sub(r"<U([0-9A-Fa-f]{4,6})>", lambda m: chr(int(m.group(1), 16)), s)
            s = re.sub(r"/(.)", r"\1", s).strip()
            if s and "%" not in s:
                words.append(s)
    # keep the order, drop repeats
    return list(dict.fromkeys(words))


NO_SPACE = ("th_", "lo_", "km_", "my_", "ja_", "zh_", "yue_", "lzh_", "cmn_", "bo_", "dz_", "shn_", "mnw_")
PUNCT_BY_SCRIPT = {"ar": "،؟.!", "fa": "،؟.", "ur": "،؟۔", "ps": "،؟", "ckb": "،؟", "hi": "।?,", "mr": "।,",
                   "ne": "।", "ja": "。、！？", "zh": "。，！？、", "yue": "。，", "cmn": "。，", "el": ".,;·",
                   "hy": "։,՞", "am": "።፣", "ti": "።፣", "my": "။၊", "bo": "།", "th": " ", "km": "។"}


def locale_lines(rng, per_locale=4):
    out = []
    for path in sorted(glob.glob(os.path.join(LOCALES, "*_*"))):
        name = os.path.basename(path)
        if name.startswith(("translit_", "iso14651", "i18n", "cns11643")):
            continue
        words = locale_words(path)
        if len(words) < 4:
            continue
        lang = name.split("_")[0]
        punct = PUNCT_BY_SCRIPT.get(lang, ",.!?;:")
        sep = "" if name.startswith(NO_SPACE) else " "
        for _ in range(per_locale):
            k = rng.randint(3, 9)
            ws = [rng.choice(words) for _ in range(k)]
            if rng.random() < 0.3:
                ws.insert(rng.randrange(len(ws) + 1), str(rng.randint(1, 2999)))
            s = ""
            for i, w in enumerate(ws):
                s += w
                if i + 1 < len(ws):
                    s += (rng.choice(punct) if rng.random() < 0.15 else "") + sep
            if rng.random() < 0.7:
                s += rng.choice(punct).strip() or "."
            out.append(s)
    return out


# --- SentencePiece-decoded text -------------------------------------------
def spm_lines(rng, model, n, lo, hi, extra_punct=""):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=model)
    ids = [i for i in range(sp.get_piece_size())
           if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i) or sp.is_byte(i))]
    # sample pieces by their unigram probability, flattened (sqrt) for variety
    weights = [math.exp(sp.get_score(i) / 2) for i in ids]
    cum, t = [], 0.0
    for w in weights:
        t += w
        cum.append(t)
    import bisect
    out = []
    for _ in range(n):
        k = rng.randint(lo, hi)
        pieces = [ids[min(bisect.bisect(cum, rng.random() * t), len(ids) - 1)] for _ in range(k)]
        s = sp.decode(pieces)
        if extra_punct and rng.random() < 0.8:
            chars = list(s)
            for _ in range(rng.randint(1, 3)):
                chars.insert(rng.randrange(len(chars) + 1), rng.choice(extra_punct))
            s = "".join(chars)
        out.append(s)
    return out


# --- Unicode by category ---------------------------------------------------
def chars_by_category():
    cats = collections.defaultdict(list)
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        cat = unicodedata.category(c)
        # characters that Unicode 3.2 already had, in the same category: every
        # Unicode table (Rust's, V8's ICU, Python's) agrees on them
        if cat != "Cn" and UCD32.category(c) == cat:
            cats[cat].append(c)
    return cats


EMOJI_SINGLE = [chr(c) for c in list(range(0x1F600, 0x1F64F)) + list(range(0x1F300, 0x1F320))
                + list(range(0x1F680, 0x1F6A0)) + [0x2764, 0x2600, 0x2601, 0x263A, 0x2705, 0x2B50, 0x1F44D,
                                                   0x1F4A9, 0x1F914, 0x1F973, 0x1F97A, 0x1FAE0, 0x1FAF6]]
EMOJI_SEQ = [
    "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466",  # family
    "\U0001F469\U0001F3FD\u200D\U0001F4BB", "\U0001F44D\U0001F3FB", "\U0001F44B\U0001F3FF",
    "\U0001F3F3\uFE0F\u200D\U0001F308", "\u2764\uFE0F", "\u263A\uFE0F", "\u2764\uFE0E",
    "\U0001F1E9\U0001F1EA", "\U0001F1EC\U0001F1E7", "\U0001F1EF\U0001F1F5", "\U0001F1FA\U0001F1F8",
    "1\uFE0F\u20E3", "#\uFE0F\u20E3", "*\u20E3", "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
    "\U0001F9D1\u200D\U0001F91D\u200D\U0001F9D1", "\U0001F441\uFE0F\u200D\U0001F5E8\uFE0F",
]
SPACES = ["\t", "\u00A0", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007",
          "\u2008", "\u2009", "\u200A", "\u202F", "\u205F", "\u3000", "\u1680", "\u2028", "\u2029", "\u0085",
          "\x0b", "\x0c", "\r", "\n", "\r\n", "  ", "   ", "\t\t", " \t ", "\u180E"]
CONTROLS = [chr(c) for c in list(range(0x01, 0x09)) + [0x0E, 0x0F, 0x10, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F, 0x7F]
            + list(range(0x80, 0xA0))] + \
    ["\x00", "\uFEFF", "\u00AD", "\u200B", "\u200E", "\u200F", "\u202A", "\u202B", "\u202C", "\u202D", "\u202E",
     "\u2060", "\u2061", "\u2066", "\u2067", "\u2068", "\u2069", "\u061C", "\u180E", "\uFFF9", "\uFFFB",
     "\uFFFD", "\uE000", "\uE123", "\uF8FF", "\U000F0000", "\U0010FFFD", "\u0378", "\u0888", "\uFDD0",
     "\uFFFE", "\uFFFF", "\U0001FFFF", "\U000E0001", "\U000E0041", "\u034F", "\uFE00", "\uFE0F",
     "\U000E0100", "\U0001D173", "\u0600", "\u06DD", "\u070F", "\U000110BD"]
SPECIAL_CASE = [
    "İstanbul", "DİYARBAKIR", "ıI iİ", "Iğdır ılık", "ΟΔΥΣΣΕΥΣ", "ΣΟΦΟΣ ΣΟΦΟΣ.", "Σ", "ΑΣ ΣΑ ΣΣ", "ὈΔΥΣΣΕΎΣ",
    "STRAẞE", "Straße", "ǅemal ǈubljana ǋegoš", "ǄEMAL", "ﬁnal ﬂow ﬀ ﬃ ﬄ ﬅ ﬆ", "ﬓﬔﬕﬖﬗ", "Ω Ω K Å ℃ ℉",
    "ᾼ ᾈ ᾯ ῼ ΐ ΰ ǰ ẖ ẘ ẙ ẚ ŉ", "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ", "ꭰꮳꮃ", "𐐀𐐁𐐂 𐐨𐐩𐐪", "𞤀𞤁𞤂 𞤢𞤣𞤤", "ᲘᲛᲔᲠᲔᲗᲘ იმერეთი",
    "ՄԵԾԱՏԱՌ և Եվ", "ÅNGSTRÖM ÆØÅ æøå", "ĲSSEL ĳssel", "ŸVES ÿves", "Ǆ ǅ ǆ Ǉ ǈ ǉ Ǌ ǋ ǌ Ǳ ǲ ǳ",
    "ℌ ℑ ℜ ℭ 𝔄𝔅 𝐀𝐁𝐂 𝒜𝒞 𝕬", "ⅠⅡⅢⅣ ⅰⅱⅲⅳ", "ⒶⒷⒸ ⓐⓑⓒ", "ǰ̌ J̌", "ſ ẛ ẞ ß", "µ μ Μ", "ΆΈΉΊΌΎΏ άέήίόύώ",
    "ÀÁÂÃÄÅ ÇÈÉÊË ÌÍÎÏ ÐÑ ÒÓÔÕÖØ ÙÚÛÜ ÝÞ", "ĀĂĄĆĈĊČĎĐĒĔĖĘĚ", "ȺȾ ⱥⱦ", "ǱSKA ǲSKA", "ΣΑΣ. ΣΑΣ, ΣΑΣ-ΣΑΣ",
    "ﬀ ﬁ ﬂ", "ǈ", "ᾈᾉᾊ ᾀᾁᾂ", "Ⓜ︎", "ＡＢＣ ａｂｃ", "Ꭰ", "ꙊꙋꙌ", "ⰀⰁ ⰰⰱ", "ƏƎə", "Ɡɡ Ɪɪ",
]


def fullwidth(s):
    return "".join("\u3000" if c == " " else chr(ord(c) + 0xFEE0) if 0x21 <= ord(c) <= 0x7E else c for c in s)


def long_words(rng, words):
    out = []
    alpha = "abcdefghijklmnopqrstuvwxyzäöüß"
    for n in (98, 99, 100, 101, 102, 120, 150, 200, 300):
        w = "".join(rng.choice(alpha) for _ in range(n))
        out.append(w)
        out.append("Ein " + w + " steht hier.")
        out.append(w.upper())
    for n in (50, 99, 100, 101):  # astral letters: 2 UTF-16 units each
        out.append("x " + "".join(chr(rng.randrange(0x10428, 0x1044F)) for _ in range(n)) + " y")
        out.append("".join(chr(rng.randrange(0x1D41A, 0x1D433)) for _ in range(n)))
    for n in (99, 100, 101):  # the count after normalization matters
        base = "".join(rng.choice("aeiou") for _ in range(n - 1))
        out.append("é" + base)                       # NFC, 1 char
        out.append("e\u0301" + base)                 # NFD: 2 chars, 1 after stripping accents
        out.append("Ä" + base.upper())
        out.append("ﬁ" + base)                        # NFKC: 2 chars
        out.append(base + "\u200B" + "z")            # zero-width space removed by clean_text
        out.append(base + "\u00AD" + "z")            # soft hyphen (Cf)
    for _ in range(12):
        w = "".join(rng.choice(words).lower() for _ in range(rng.randint(12, 25)))
        out.append(w.capitalize() + " ist ein langes Wort.")
    out.append("https://example.org/" + "/".join("segment%d" % i for i in range(30)) + "?q=" + "a" * 120)
    out.append("x" * 1000)
    out.append("汉" * 150)                            # CJK: split into single characters
    out.append("ア" * 120)                            # kana: not split
    out.append("한" * 101)
    out.append("😀" * 101)
    out.append("1234567890" * 12)
    out.append("-".join(["ab"] * 80))
    return out


def numbers(rng):
    out = []
    digit_sets = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "০১২৩৪৫৬৭৮৯", "๐๑๒๓๔๕๖๗๘๙",
                  "０１２３４５６７８９", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", "〇一二三四五六七八九", "၀၁၂၃၄၅၆၇၈၉"]
    fmts = ["{a}", "{a}.{b}", "{a},{b}", "{a} {b}", "{a}-{b}-{c}", "+{a} ({b}) {c}", "{a}%", "${a}.{b}",
            "€{a},{b}", "{a}:{b}", "{a}/{b}/{c}", "#{a}", "{a}e-{b}", "-{a}", "{a}.{b}.{c}.{c}", "{a}k", "v{a}.{b}"]
    for i in range(150):
        ds = digit_sets[i % len(digit_sets)]

        def num(lo, hi):
            return "".join(ds[int(d)] for d in str(rng.randint(lo, hi)))
        f = rng.choice(fmts)
        s = f.format(a=num(0, 10 ** rng.randint(1, 9)), b=num(0, 999), c=num(0, 99))
        if rng.random() < 0.5:
            s = rng.choice(["Es kostet ", "Total: ", "Am ", "Call ", "Nummer "]) + s + rng.choice(["", ".", " Euro", "!"])
        out.append(s)
    out += ["½ ¼ ¾ ⅓ ⅞", "x² + y³ = z¹⁰", "H₂O CO₂", "Ⅻ Ⅳ ⅻ", "① ② ⑩ ⑳ ㉑", "⒈ ⒉ ⒛", "𝟙𝟚𝟛", "3.14159265358979",
            "1,000,000.00", "1.000.000,00", "1 000 000", "1\u202F000\u202F000", "10⁻³", "٣٫١٤", "1e10", "0x1F600",
            "2024-06-11T12:34:56Z", "12h30", "4×4", "3÷4", "±5", "−7", "∞"]
    return out


def punctuation_runs(rng, cats):
    out = ["!!!", "???", "?!?!", "...", "…", "……", "--", "---", "—", "–", "«»", "„“", "“”", "‘’", "()", "[]", "{}",
           "¿¡", "!!!???...", ".,;:!?", "@#$%^&*", "<>=+~|`^", "\\/", "''\"\"", "·•‣", "※§¶†‡", "〈〉《》「」『』【】",
           "、。・！？", "٪؟،؛", "।॥", "¡Hola!", "¿Qué?", "Wait... what?!", "Hmm—really?", "(a)[b]{c}<d>",
           "e.g.", "i.e.,", "U.S.A.", "don't", "l'homme", "rock'n'roll", "it's 5 o'clock", "«Ja», sagte er.",
           "„Nein“, sagte sie.", "\"Quoted\" 'text'", "a-b-c", "a_b_c", "a/b/c", "a.b.c", "snake_case_name",
           "CamelCaseWord", "user@example.com", "#hashtag @mention", "C++ C# F#", ":-) :-( ;-) :D", "<3 </3",
           "=^.^=", "¯\\_(ツ)_/¯", "(╯°□°)╯︵ ┻━┻", "→ ← ↑ ↓ ⇒", "★☆♥♦♣♠", "© ® ™ ℗", "° ′ ″", "‰ ‱",
           "¡¡¡", "¿¿¿", "''''", "````", "~~~~", "____", "====", "****", "####", "$$$$", "^^^^"]
    puncts = cats["Po"] + cats["Pd"] + cats["Ps"] + cats["Pe"] + cats["Pi"] + cats["Pf"] + cats["Pc"]
    symbols = cats["Sm"] + cats["Sc"] + cats["Sk"] + cats["So"]
    for _ in range(60):
        out.append("".join(rng.choice(puncts) for _ in range(rng.randint(2, 12))))
    for _ in range(30):
        out.append(" ".join("".join(rng.choice(symbols) for _ in range(rng.randint(1, 4)))
                            for _ in range(rng.randint(1, 6))))
    return out


def random_category_lines(rng, cats, n):
    weights = {"Lu": 3, "Ll": 3, "Lo": 6, "Lm": 1, "Lt": 1, "Mn": 2, "Mc": 1, "Me": 1, "Nd": 2, "Nl": 1,
               "No": 1, "Pc": 1, "Pd": 1, "Ps": 1, "Pe": 1, "Pi": 1, "Pf": 1, "Po": 2, "Sm": 1, "Sc": 1, "Sk": 1,
               "So": 2, "Zs": 1, "Cc": 1, "Cf": 1, "Co": 1}
    names = sorted(weights)
    wlist = [weights[k] for k in names]
    out = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(1, 7)):
            cat = rng.choices(names, wlist)[0]
            pool = cats[cat]
            words.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 6))))
        out.append(" ".join(words))
    return out


CJK_BOUNDARIES = [0x33FF, 0x3400, 0x4DBF, 0x4DC0, 0x4DFF, 0x4E00, 0x9FA5, 0x9FBB, 0x9FCC, 0x9FFC, 0x9FFF, 0xA000,
                  0xF8FF, 0xF900, 0xFA2D, 0xFA70, 0xFAD9, 0xFAFF, 0xFB00, 0x20000, 0x2A6D6, 0x2A6DF, 0x2A6E0,
                  0x2A700, 0x2B734, 0x2B740, 0x2B81D, 0x2B820, 0x2CEA1, 0x2CEAF, 0x2CEB0, 0x2EBE0, 0x2F800,
                  0x2FA1D, 0x2FA1F, 0x30000, 0x3000, 0x3001, 0x3005, 0x3007, 0x3041, 0x30A1, 0x30FC, 0xAC00, 0xD7A3,
                  0x1100, 0x3131, 0xFF61, 0xFF66, 0xFFA0, 0x2E80, 0x2F00, 0x31C0, 0x3190, 0x3220, 0x3280, 0x32FF,
                  0x3300, 0xFE30, 0xFE45]


def escape_line(s):
    j = json.dumps(s, ensure_ascii=False)

    def esc(c):
        o = ord(c)
        if o > 0xFFFF:
            o -= 0x10000
            return "\\u%04x\\u%04x" % (0xD800 + (o >> 10), 0xDC00 + (o & 0x3FF))
        return "\\u%04x" % o
    return "".join(esc(c) if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs")
                   or (ord(c) & 0xFFFE) == 0xFFFE or 0xFDD0 <= ord(c) <= 0xFDEF else c for c in j)


SCRIPT_NAMES = ["LATIN", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "DEVANAGARI", "BENGALI", "TAMIL", "THAI",
                "HIRAGANA", "KATAKANA", "HANGUL", "ARMENIAN", "GEORGIAN", "ETHIOPIC", "SYRIAC", "LAO", "KHMER",
                "MYANMAR", "TIBETAN", "GUJARATI", "GURMUKHI", "KANNADA", "TELUGU", "MALAYALAM", "ORIYA", "SINHALA",
                "THAANA", "MONGOLIAN", "CHEROKEE", "DESERET", "ADLAM", "TIFINAGH", "OL CHIKI", "MEETEI"]


def scripts_of(s):
    found = set()
    for c in s:
        cat = unicodedata.category(c)
        if cat.startswith("L") or cat.startswith("M"):
            name = unicodedata.name(c, "")
            if name.startswith("CJK") and ("IDEOGRAPH" in name):
                found.add("CJK ideographs")
                continue
            if name.startswith("HALFWIDTH KATAKANA"):
                found.add("KATAKANA")
                continue
            for sc in SCRIPT_NAMES:
                if name.startswith(sc + " ") or name.startswith("FULLWIDTH " + sc):
                    found.add(sc)
                    break
            else:
                if cat.startswith("M"):
                    found.add("combining marks")
                else:
                    found.add("other letters")
        elif cat == "So" and ord(c) >= 0x1F000 or c in "\u2764\u263A\u2600\u2601\u2705\u2B50":
            found.add("emoji")
        elif cat in ("Cc", "Cf", "Co", "Cn"):
            found.add("control/format/private/unassigned")
        elif cat == "Zs" and c != " " or c in "\t\u2028\u2029\x0b\x0c\x85":
            found.add("tab/other spaces")
        if 0xFF01 <= ord(c) <= 0xFF5E or c == "\u3000":
            found.add("full-width forms")
        if c.isdigit():
            found.add("digits")
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    rng = random.Random(SEED)
    cats = chars_by_category()
    sections = []

    def add(name, lines):
        sections.append((name, list(lines)))

    base = []
    refs = []
    for split in ("val", "test_2016_flickr", "test_2017_flickr"):
        for lang in ("de", "en"):
            name = "%s.%s.gz" % (split, lang)
            got = m30k(name)
            base += got
            refs += [{"multi30k": name, "line": k + 1} for k in range(len(got))]
    add("multi30k val/test (de, en)", base)

    train = m30k("train.en.gz") + m30k("train.de.gz")
    pick = rng.sample(range(len(train)), 4200)
    it = iter(train[i] for i in pick)

    def take(n):
        return [next(it) for _ in range(n)]
    add("upper case", [s.upper() for s in take(250)])
    add("title / swapped case", [s.title() for s in take(60)] + [s.swapcase() for s in take(60)])
    de_train = [s for s in m30k("train.de.gz") if any(c in s for c in "äöüÄÖÜß")]
    add("NFD (combining marks)", [unicodedata.normalize("NFD", s) for s in rng.sample(de_train, 150)])
    zalgo = []
    marks = [c for c in cats["Mn"] if 0x300 <= ord(c) <= 0x36F] + ["\u20DD", "\u20E3", "\u0489"]
    for s in take(50):
        zalgo.append("".join(c + "".join(rng.choice(marks) for _ in range(rng.randint(0, 4)))
                             if c.isalpha() and rng.random() < 0.4 else c for c in s))
    zalgo += [" \u0301 leading mark", "\u0301", "\u0301\u0302\u0303", "a\u0301\u0301\u0301", "\u0308A",
              "ﾞﾟ", "\u3099\u309A", "か\u3099", "ᄀ\u1161\u11A8", "\u0915\u094D\u0937", "ا\u0651\u064E"]
    add("combining marks (stacked)", zalgo)
    add("full-width", [fullwidth(s) for s in take(100)] +
        uconv("Fullwidth-Halfwidth", uconv("Latin-Katakana", take(30))))
    for tr, n in [("Latin-Cyrillic", 200), ("Latin-Greek", 200), ("Latin-Arabic", 150), ("Latin-Hebrew", 150),
                  ("Latin-Devanagari", 150), ("Latin-Thai", 120), ("Latin-Hangul", 150), ("Latin-Katakana", 120),
                  ("Latin-Hiragana", 100), ("Latin-Armenian", 60), ("Latin-Georgian", 60), ("Latin-Bengali", 60),
                  ("Latin-Tamil", 60), ("Latin-Ethiopic", 40), ("Latin-Syriac", 40), ("Latin-Thaana", 30),
                  ("Latin-Gujarati", 30), ("Latin-Malayalam", 30), ("Latin-Jamo", 20), ("Latin-Bopomofo", 20),
                  ("Latin-CanadianAboriginal", 20)]:
        add("ICU " + tr, uconv(tr, take(n)))
    add("glibc locale words", locale_lines(rng))
    zh = spm_lines(rng, os.path.join(SPM, "opus-mt-zh-en", "source.spm"), 450, 3, 20, "。，！？、“”《》：；（）")
    zh += [z + " " + e for z, e in zip(spm_lines(rng, os.path.join(SPM, "opus-mt-zh-en", "source.spm"), 50, 2, 8),
                                         take(50))]
    add("Chinese (opus-mt-zh-en spm)", zh)
    add("Malagasy (opus-mt-en-mg spm)", spm_lines(rng, os.path.join(SPM, "opus-mt-en-mg", "target.spm"), 200, 3, 25))

    emoji = []
    for s in take(200):
        ws = s.split(" ")
        for _ in range(rng.randint(1, 3)):
            e = rng.choice(EMOJI_SEQ) if rng.random() < 0.5 else rng.choice(EMOJI_SINGLE)
            if rng.random() < 0.3:
                e = e * rng.randint(2, 4)
            pos = rng.randrange(len(ws) + 1)
            if rng.random() < 0.5 or pos == 0:
                ws.insert(pos, e)
            else:
                ws[pos - 1] += e
        emoji.append(" ".join(ws))
    emoji += EMOJI_SEQ + ["".join(EMOJI_SEQ)]
    add("emoji", emoji)

    ctl = []
    for s in take(180):
        chars = list(s)
        for _ in range(rng.randint(1, 4)):
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(CONTROLS))
        ctl.append("".join(chars))
    ctl += ["a" + c + "b" for c in CONTROLS]
    add("control / format / private-use / unassigned", ctl)

    sp = []
    for s in take(180):
        ws = s.split(" ")
        out = ws[0]
        for w in ws[1:]:
            out += (rng.choice(SPACES) if rng.random() < 0.4 else " ") + w
        if rng.random() < 0.3:
            out = rng.choice(SPACES) + out
        if rng.random() < 0.3:
            out = out + rng.choice(SPACES)
        sp.append(out)
    sp += ["a" + c + "b" for c in SPACES]
    add("tabs / Unicode spaces", sp)

    zw = ["می\u200Cخواهم", "نمی\u200Cدانم", "क्\u200Dष", "क्\u200Cष", "a\u200Db", "a\u200Cb", "\u200D", "\u200C",
          "\U0001F468\u200D", "\u200D\U0001F468", "ශ්\u200Dරී", "ര്\u200D", "Mann\u200Ddorf", "ab\u200B\u200Bcd"]
    for s in take(40):
        ws = s.split(" ")
        i = rng.randrange(len(ws))
        w = ws[i]
        j = rng.randrange(1, len(w)) if len(w) > 1 else 0
        ws[i] = w[:j] + rng.choice("\u200D\u200C\u200B\u2060") + w[j:]
        zw.append(" ".join(ws))
    add("ZWJ / ZWNJ", zw)

    add("long words", long_words(rng, [w for s in take(100) for w in s.split() if w.isalpha()]))
    add("empty / whitespace-only", ["", " ", "  ", "\t", "\n", "\r\n", " \t \n ", "\u00A0", "\u3000", "\u2003 \u2003",
                                    "\u200B", "\uFEFF", "\x00", "\x00\x00", "\u2028", "\x0b\x0c", "\u0085", "\u180E",
                                    "\u00AD", "\x7f", "\uFFFD", "\u200D", " " * 50])
    add("punctuation runs", punctuation_runs(rng, cats))
    add("numbers", numbers(rng))
    add("special case mappings", SPECIAL_CASE + [s.lower() for s in SPECIAL_CASE] + [s.upper() for s in SPECIAL_CASE])
    add("special-token look-alikes", [
        "[CLS] a dog [SEP]", "Ein [MASK] sitzt.", "a [mask] b", "[UNK]", "[PAD] [PAD]", "x[MASK]y", "[ MASK ]",
        "[MASK][MASK]", "<s> a </s>", "a <mask> b", "a<mask>b", "<unk> <pad>", "<S>", "<mask>", "[SEP]", "[CLS]",
        "[unused0]", "##ing", "## ing", "##", "▁", "▁▁a", "a▁b", "\u2581 a"])
    add("CJK boundaries", ["a" + chr(c) + "b " + chr(c) + chr(c) + " x" + chr(c) for c in CJK_BOUNDARIES])
    add("random by Unicode category", random_category_lines(rng, cats, 350))
    mixed = []
    for _ in range(150):
        parts = [rng.choice(sections[rng.randrange(1, len(sections))][1]) for _ in range(rng.randint(2, 3))]
        mixed.append(" ".join(p for p in parts))
    add("mixed", mixed)

    lines = [s for _, ss in sections for s in ss]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        for k, s in enumerate(lines):
            f.write((json.dumps(refs[k]) if k < len(refs) else escape_line(s)) + "\n")
    print("%s: %d lines, %d bytes" % (a.out, len(lines), os.path.getsize(a.out)))
    for name, ss in sections:
        print("  %5d  %s" % (len(ss), name))
    counts = collections.Counter()
    for s in lines:
        counts.update(scripts_of(s))
    print("lines containing:")
    for k, v in counts.most_common():
        print("  %5d  %s" % (v, k))


def read_corpus(path=OUT):
    """The corpus's lines as text, Multi30k references resolved from ../shared/data."""
    files = {}
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            v = json.loads(line)
            if isinstance(v, dict):
                if v["multi30k"] not in files:
                    files[v["multi30k"]] = m30k(v["multi30k"])
                v = files[v["multi30k"]][v["line"] - 1]
            out.append(v)
    return out


if __name__ == "__main__":
    main()
