"""Corpus BLEU with sacreBLEU's defaults: 13a tokenization, 4-grams,
brevity penalty, 'exp' smoothing of zero counts.  Written from the metric's
definition (Papineni et al. 2002; mteval-v13a tokenization as sacreBLEU
documents it) so that no extra package is needed; tools/evaluate.py
cross-checks it against NLTK.
"""
import math
import re
from collections import Counter

_13A = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # punctuation
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),              # . , unless after a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),              # . , unless before a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),                    # - after a digit
]


def tokenize_13a(line):
    if line == "":
        return ""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (line.replace("&quot;", '"').replace("&amp;", "&")
                .replace("&lt;", "<").replace("&gt;", ">"))
    line = " %s " % line
    for regex, repl in _13A:
        line = regex.sub(repl, line)
    return " ".join(line.split())


def ngrams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def corpus_stats(hyps, refs):
    """Matches and totals per n-gram order, hypothesis and reference lengths."""
    match, total = [0] * 4, [0] * 4
    hyp_len = ref_len = 0
    for h, r in zip(hyps, refs):
        ht, rt = tokenize_13a(h).split(), tokenize_13a(r).split()
        hyp_len += len(ht)
        ref_len += len(rt)
        for n in range(1, 5):
            hc, rc = ngrams(ht, n), ngrams(rt, n)
            match[n - 1] += sum(min(c, rc[g]) for g, c in hc.items())
            total[n - 1] += max(len(ht) - n + 1, 0)
    return match, total, hyp_len, ref_len


def corpus_bleu(hyps, refs_list):
    """hyps: list of strings; refs_list: [refs] (one reference set)."""
    refs = refs_list[0]
    match, total, c, r = corpus_stats(hyps, refs)
    if c == 0:
        return 0.0
    log_p, k = 0.0, 1
    for m, t in zip(match, total):
        if t == 0:
            return 0.0
        if m == 0:
            k *= 2
            log_p += math.log(100.0 / (k * t))
        else:
            log_p += math.log(100.0 * m / t)
    bp = 1.0 if c >= r else math.exp(1 - r / c)
    return bp * math.exp(log_p / 4)


def corpus_chrf(hyps, refs, order=6, beta=2.0):
    """chrF (Popovic 2015) as sacreBLEU 2 computes its default chrF2, written
    from the definition: character n-grams (n = 1..order) of each line with
    whitespace removed, counts summed over the corpus; per order, precision
    and recall of the clipped matches and their F-beta; the mean F over the
    orders that both sides have (an order either side lacks adds a
    negligible 1e-16, as sacreBLEU's epsilon)."""
    eps = 1e-16
    stats = [[0, 0, 0] for _ in range(order)]
    for h, r in zip(hyps, refs):
        hc, rc = "".join(h.split()), "".join(r.split())
        for n in range(1, order + 1):
            hg, rg = ngrams(list(hc), n), ngrams(list(rc), n)
            stats[n - 1][0] += max(len(hc) - n + 1, 0)
            stats[n - 1][1] += max(len(rc) - n + 1, 0)
            stats[n - 1][2] += sum(min(c, rg[g]) for g, c in hg.items())
    score, effective = 0.0, 0
    b2 = beta * beta
    for n_hyp, n_ref, m in stats:
        p = m / n_hyp if n_hyp > 0 else eps
        r = m / n_ref if n_ref > 0 else eps
        d = b2 * p + r
        score += (1 + b2) * p * r / d if d > 0 else eps
        effective += 1 if n_hyp > 0 and n_ref > 0 else 0
    return 0.0 if effective == 0 else 100 * score / effective
