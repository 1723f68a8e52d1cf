/*
 * translate_document.c
 *		Documents as people write them, through the sentence pipeline
 *		(translate.c): text or markup -> units -> sentences -> translations
 *		-> the document again.
 *
 * A unit is a text to translate with anchors over it: a plain document,
 * or one block of an HTML/XML document (markup.c) with its inline
 * elements.  In a unit:
 *  - verbatim spans (spans.c: URLs, numbers, placeholders, ...) are taken
 *    out of the text, and become point anchors that carry their bytes;
 *  - the text is split into sentences (segment.c), and those longer than
 *    the model translates reliably are cut at clause boundaries;
 *  - a sentence in ALL CAPS or Title Case is lowered for the model and its
 *    translation restored to that style (casing.c);
 *  - all sentences of all units decode together (TranslateSentenceIds);
 *  - if the unit has anchors, each sentence is aligned word by word from
 *    its cross-attention (placement.c) and the anchors go to the target
 *    words aligned to theirs: spans are put back verbatim, tags around
 *    the words they covered.
 */
#include "postgres.h"

#include <limits.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "casing.h"
#include "decode_workspace.h"
#include "markup.h"
#include "model_store.h"
#include "placement.h"
#include "rich_text.h"
#include "segment.h"
#include "spans.h"
#include "tokenizer.h"
#include "translate.h"

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* -------------------------------------------------------- the plan */

/* A unit as parts: its own bytes, or a sentence's translation. */
typedef struct Part
{
	int			job;			/* -1: the bytes u[off..off+len) */
	size_t		off;
	size_t		len;
} Part;

typedef struct DocPlan
{
	Part	   *parts;
	int			nparts;
	int			cap;
} DocPlan;

typedef struct Jobs
{
	const char **s;				/* UTF-8 sentences to translate */
	size_t	   *len;
	int			n;
	int			cap;
	MemoryContext scratch;		/* count_tokens()'s, reset on each call */
	/* casing: NULL, or the scorer's argument; each job's style */
	void	   *casing;
	const char *locale;
	TfCaseStyle current;
	TfCaseStyle *style;
} Jobs;

static void
add_part(DocPlan *p, int job, size_t off, size_t len)
{
	if (job < 0 && len == 0)
		return;
	if (p->nparts == p->cap)
	{
		p->cap = p->cap ? 2 * p->cap : 16;
		p->parts = p->parts ? repalloc_huge(p->parts, sizeof(Part) * p->cap) : palloc(sizeof(Part) * p->cap);
	}
	p->parts[p->nparts].job = job;
	p->parts[p->nparts].off = off;
	p->parts[p->nparts].len = len;
	p->nparts++;
}

static int
add_job(Jobs *j, const char *s, size_t len)
{
	if (j->n == j->cap)
	{
		j->cap = j->cap ? 2 * j->cap : 16;
		j->s = j->s ? repalloc_huge(j->s, sizeof(char *) * j->cap) : palloc(sizeof(char *) * j->cap);
		j->len = j->len ? repalloc_huge(j->len, sizeof(size_t) * j->cap) : palloc(sizeof(size_t) * j->cap);
	}
	j->s[j->n] = s;
	j->len[j->n] = len;
	if (j->casing != NULL)
	{
		if (j->n == 0 || j->style == NULL)
			j->style = palloc(sizeof(TfCaseStyle) * j->cap);
		else
			j->style = repalloc_huge(j->style, sizeof(TfCaseStyle) * j->cap);
		j->style[j->n] = j->current;
	}
	return j->n++;
}

/* Tokens of UTF-8 text, as the source ids count them (EOS not included); INT_MAX if too long. */
static int
count_tokens(Jobs *j, Tokenizer *tok, const char *s, size_t len)
{
	SpmAlloc	a = PgAllocator(j->scratch);
	SpmEncoding enc;
	int			n;

	n = spm_encode(tok->model, s, len, &a, &enc) ? enc.ntokens : INT_MAX;
	MemoryContextReset(j->scratch);
	return n;
}

static bool
is_cut(const char *s, size_t c)
{
	char		p = s[c - 1];

	return is_space(p) || p == '.' || p == ',' || p == ';' || p == ':' || p == '!' || p == '?' || p == ')';
}

/*
 * Words before which a clause or a sentence starts more often than not:
 * conjunctions, and (capitalized) the words that start a sentence, which
 * in a text without periods are where the periods were.
 */
static const char *const clause_words[] = {
	"und", "oder", "aber", "sondern", "denn", "während", "weil", "dass", "als", "wenn", "wobei",
	"and", "or", "but", "while", "because", "when", "which", "who", "whereas", NULL
};
static const char *const sentence_words[] = {
	"Ein", "Eine", "Einer", "Der", "Die", "Das", "Zwei", "Drei", "Vier", "Fünf", "Mehrere", "Viele",
	"Einige", "Ich", "Wir", "Er", "Sie", "Es", "Dieser", "Diese",
	"A", "An", "The", "Two", "Three", "Four", "Five", "Several", "Many", "Some", "I", "We", "He", "She",
	"It", "They", "This", "These", NULL
};

static bool
word_in(const char *s, size_t len, const char *const *list)
{
	for (int i = 0; list[i] != NULL; i++)
		if (strlen(list[i]) == len && memcmp(s, list[i], len) == 0)
			return true;
	return false;
}

/*
 * How good a place to cut u[..c) | u[c..) is, c after whitespace: a line
 * break 5, after ; or : 4, after a comma 3, before a word that starts
 * sentences 2 (not after one: "Ein Mann" is no cut), before a conjunction
 * 1, anywhere else 0.
 */
static int
cut_rank(const char *u, size_t start, size_t c, size_t end)
{
	size_t		b = c,
				w = c;
	bool		newline = false;

	while (b > start && is_space(u[b - 1]))
	{
		newline |= u[b - 1] == '\n';
		b--;
	}
	if (newline)
		return 5;
	if (b > start && (u[b - 1] == ';' || u[b - 1] == ':'))
		return 4;
	if (b > start && u[b - 1] == ',')
		return 3;
	while (w < end && !is_space(u[w]) && w - c < 16)
		w++;
	if (word_in(u + c, w - c, sentence_words))
	{
		size_t		p = b;

		while (p > start && !is_space(u[p - 1]))
			p--;
		if (!word_in(u + p, b - p, sentence_words) && !word_in(u + p, b - p, clause_words))
			return 2;
	}
	if (word_in(u + c, w - c, clause_words))
		return 1;
	return 0;
}

static bool ends_sentence(const char *s, size_t len);

/*
 * Pieces are looked for in a window of the text ahead, so that a sentence
 * of megabytes is cut in time linear in its length, not tokenized whole
 * for every piece.  The window starts at this many bytes per token of the
 * limit (real text has 3 to 6) and doubles until it holds more tokens than
 * fit, so the cut is the one the whole text would give.
 */
#define WINDOW_BYTES_PER_TOKEN 8

/* pos + window, or end if nearer, moved back to a character's start */
static size_t
window_end(const char *u, size_t pos, size_t end, size_t window)
{
	size_t		w;

	if (end - pos <= window)
		return end;
	w = pos + window;
	while (w > pos + 1 && ((unsigned char) u[w] & 0xC0) == 0x80)
		w--;
	return w;
}

/*
 * A sentence u[start..end) (no whitespace at either end) as jobs: itself,
 * or, when it has more tokens than limit, pieces that fit: the last cut
 * point before the limit is found, then the best-ranked cut (cut_rank)
 * in the second half of that piece is taken (at a character if a single
 * word is too long); the whitespace between pieces is kept.
 */
static void
plan_sentence(DocPlan *p, Jobs *jobs, Tokenizer *tok, int limit, int whole_limit, const char *u, size_t start,
			  size_t end)
{
	size_t		pos = start;
	int			most = Max(whole_limit, limit);

	while (pos < end)
	{
		size_t		window = (size_t) most * WINDOW_BYTES_PER_TOKEN;
		size_t		wend = window_end(u, pos, end, window);
		int			ntok = count_tokens(jobs, tok, u + pos, wend - pos);
		size_t		lo,
					hi,
					cut = 0;
		size_t		e;

		/* a window with room to spare is widened until it holds more than fits */
		while (wend < end && ntok <= most)
		{
			CHECK_FOR_INTERRUPTS();
			window *= 2;
			wend = window_end(u, pos, end, window);
			ntok = count_tokens(jobs, tok, u + pos, wend - pos);
		}
		CHECK_FOR_INTERRUPTS();
		if (ntok == 0)
		{
			add_part(p, -1, pos, wend - pos);	/* nothing to translate */
			pos = wend;
			continue;
		}
		/*
		 * A whole sentence, ended by its punctuation, is what a model
		 * translates best: it is cut only past twice the reliable length
		 * (which was measured on runs without final punctuation, and cut
		 * Multi30k's longer test sentences for a loss of 0.17 BLEU).
		 */
		if (wend == end && (ntok <= limit ||
							(pos == start && ntok <= whole_limit && ends_sentence(u + start, end - start))))
		{
			add_part(p, add_job(jobs, u + pos, end - pos), 0, 0);
			return;
		}
		/* the last cut point whose prefix fits (token counts grow with the prefix) */
		lo = pos + 1;
		hi = wend - 1;
		while (lo <= hi)
		{
			size_t		mid = lo + (hi - lo) / 2;
			size_t		c = mid;

			while (c > pos && !is_cut(u, c))
				c--;
			if (c > pos && count_tokens(jobs, tok, u + pos, c - pos) <= limit)
			{
				cut = Max(cut, c);
				lo = mid + 1;
			}
			else
				hi = c > pos ? c - 1 : pos;
			if (hi < lo || hi == pos)
				break;
		}
		if (cut > 0)
		{
			/* the best-ranked word boundary in the piece's second half */
			size_t		half = pos + (cut - pos) / 2;
			int			best = -1;
			size_t		best_c = cut;

			for (size_t c = cut; c > half; c--)
			{
				int			r;

				if (!is_space(u[c - 1]) || is_space(u[c]))
					continue;
				r = cut_rank(u, pos, c, end);
				if (r > best)
				{
					best = r;
					best_c = c;
				}
			}
			if (best > 0 || !is_space(u[cut - 1]))
				cut = best > 0 ? best_c : cut;
		}
		if (cut == 0)
		{
			/* one long word: the longest run of whole characters that fits */
			lo = pos + 1;
			hi = wend - 1;
			while (lo <= hi)
			{
				size_t		c = lo + (hi - lo) / 2;

				while (c > pos && ((unsigned char) u[c] & 0xC0) == 0x80)
					c--;
				if (c > pos && count_tokens(jobs, tok, u + pos, c - pos) <= limit)
				{
					cut = Max(cut, c);
					lo = c + 1;
				}
				else
				{
					if (c <= lo)
						break;
					hi = c - 1;
				}
			}
			if (cut == 0)
			{
				cut = pos + 1;
				while (cut < end && ((unsigned char) u[cut] & 0xC0) == 0x80)
					cut++;
			}
		}
		/* the piece without its trailing whitespace; the whitespace stays as it was */
		e = cut;
		while (e > pos && is_space(u[e - 1]))
			e--;
		if (e > pos)
			add_part(p, add_job(jobs, u + pos, e - pos), 0, 0);
		pos = cut;
		while (pos < end && is_space(u[pos]))
			pos++;
		add_part(p, -1, e, pos - e);
	}
}

/* -------------------------------------------------------- casing */

typedef struct VocabArg
{
	Tokenizer  *tok;
	MemoryContext scratch;
} VocabArg;

/*
 * How usual a spelling of a word is to the model: the fewer pieces it
 * takes the better, then the likelier the pieces (SentencePiece's
 * scores); an unknown piece is the worst.
 */
static double
vocab_score(void *arg, const char *word, size_t len)
{
	VocabArg   *v = arg;
	SpmAlloc	a = PgAllocator(v->scratch);
	SpmEncoding enc;
	double		score = 0;

	if (!spm_encode(v->tok->model, word, len, &a, &enc))
		return -1e12;
	for (int i = 0; i < enc.ntokens; i++)
	{
		int			id = enc.tokens[i].id;

		score -= 1000.0;
		if (id == v->tok->model->unk_id || id < 0 || id >= v->tok->model->npieces)
			score -= 1e6;
		else
			score += v->tok->model->pieces[id].score;
	}
	MemoryContextReset(v->scratch);
	return score;
}

/*
 * A sentence in ALL CAPS or Title Case lowered in place for the model (to
 * the casing its vocabulary knows best; the same bytes long), its style
 * kept for the jobs it becomes.
 */
static void
lower_sentence(Jobs *jobs, char *s, size_t len)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	char	   *lowered;
	char		err[256];

	jobs->current = tf_case_style(s, len);
	if (jobs->current == TF_CASE_MIXED)
		return;
	if (tf_case_lower(jobs->current, s, len, jobs->locale, vocab_score, jobs->casing, &a,
					  &lowered, err, sizeof(err)) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not change the case of the text"),
				 errdetail("%s", err)));
	memcpy(s, lowered, len);
	pfree(lowered);
}

/* The most tokens a punctuated sentence keeps whole: twice the segment limit, within the positions. */
static int
WholeLimit(CachedModel *cm, int limit)
{
	int			positions = cm->model.cfg.max_pos - 1 - (cm->nlangs > 0);

	return Min(positions, 2 * limit);
}

/* the end of the word at u[i..end) */
static size_t
word_end(const char *u, size_t i, size_t end)
{
	while (i < end && !is_space(u[i]))
		i++;
	return i;
}

/*
 * Where the sentence u[start..end) says its beginning again: the start of
 * the first later word at which its first two words recur, as they were
 * written (capital included; two different words), or end.  "Ein Hund rennt Ein Hund rennt ..."
 * is a list without punctuation, and a model trained on sentences
 * translates two of its items as one ("A dog runs."): each item alone
 * keeps every one.  Linear: each word is looked at once.
 */
static size_t
next_repeat(const char *u, size_t start, size_t end)
{
	size_t		a0 = start,
				a1 = word_end(u, a0, end),
				b0,
				b1,
				i;
	unsigned char c = (unsigned char) u[start];

	/* a sentence starts with a capital (ASCII or not: bytes >= 0x80 let through) or a digit */
	if (!((c >= 'A' && c <= 'Z') || c >= 0x80 || (c >= '0' && c <= '9')))
		return end;
	for (b0 = a1; b0 < end && is_space(u[b0]); b0++)
		;
	b1 = word_end(u, b0, end);
	/* (a word said again, "Mann Mann Mann", is no phrase: cut as run-on text) */
	if (b1 == b0 || (b1 - b0 == a1 - a0 && memcmp(u + a0, u + b0, a1 - a0) == 0))
		return end;
	for (i = b1; i < end;)
	{
		size_t		e,
					n0,
					n1;

		while (i < end && is_space(u[i]))
			i++;
		e = word_end(u, i, end);
		if (e - i == a1 - a0 && memcmp(u + i, u + a0, a1 - a0) == 0)
		{
			for (n0 = e; n0 < end && is_space(u[n0]); n0++)
				;
			n1 = word_end(u, n0, end);
			if (n1 - n0 == b1 - b0 && memcmp(u + n0, u + b0, b1 - b0) == 0)
				return i;
		}
		i = e;
	}
	return end;
}

/*
 * A text u[0..len) as parts: its sentences (or, if !split, the whole text)
 * cut further if too long, as jobs; the whitespace kept.
 */
static void
plan_document(CachedModel *cm, Tokenizer *tok, int limit, bool split, const char *u, size_t len,
			  DocPlan *plan, Jobs *jobs)
{
	int			nseg = 1;
	size_t		whole[2] = {0, len};
	size_t	   *b = split ? SentenceBounds(u, len, cm->source_lang, &nseg) : whole;

	for (int i = 0; i < nseg; i++)
	{
		size_t		start = b[i],
					end = b[i + 1];
		size_t		cs = start,
					ce = end;

		while (cs < end && is_space(u[cs]))
			cs++;
		while (ce > cs && is_space(u[ce - 1]))
			ce--;
		add_part(plan, -1, start, cs - start);
		if (ce > cs)
		{
			if (jobs->casing != NULL)
				lower_sentence(jobs, (char *) u + cs, ce - cs);
			/* a phrase said again and again without punctuation: each time a sentence */
			for (size_t ps = cs, pe; ps < ce; ps = pe)
			{
				size_t		ws = next_repeat(u, ps, ce);

				pe = ws;
				while (pe > ps && is_space(u[pe - 1]))
					pe--;
				plan_sentence(plan, jobs, tok, limit, WholeLimit(cm, limit), u, ps, pe);
				add_part(plan, -1, pe, ws - pe);
				pe = ws;
			}
		}
		add_part(plan, -1, ce, end - ce);
	}
}

/* The most tokens a sentence may have: the model's positions, or its reliable length if shorter. */
static int
SegmentLimit(CachedModel *cm)
{
	int			limit = cm->model.cfg.max_pos - 1 - (cm->nlangs > 0);	/* with EOS and a language token */

	if (cm->segment_tokens > 0 && cm->segment_tokens < limit)
		limit = cm->segment_tokens;
	return limit;
}

int
DocumentSentences(CachedModel *cm, text *doc, text ***sentences)
{
	Tokenizer  *tok = GetTokenizer(cm->source_tokenizer);
	DocPlan		plan = {0};
	Jobs		jobs = {0};
	Size		len;
	char	   *u = ToUtf8(doc, &len);

	jobs.scratch = AllocSetContextCreate(CurrentMemoryContext, "token count", ALLOCSET_DEFAULT_SIZES);
	plan_document(cm, tok, SegmentLimit(cm), true, u, len, &plan, &jobs);
	MemoryContextDelete(jobs.scratch);
	*sentences = palloc(sizeof(text *) * (jobs.n + 1));
	for (int j = 0; j < jobs.n; j++)
		(*sentences)[j] = FromUtf8(jobs.s[j], jobs.len[j]);
	return jobs.n;
}

/* -------------------------------------------------------- the options */

typedef enum
{
	FORMAT_TEXT, FORMAT_HTML, FORMAT_XML
} DocFormat;

typedef struct DocOptions
{
	DocFormat	format;
	unsigned	keep;			/* TF_SPAN_* */
	bool		split;
} DocOptions;

static void
GetDocOptions(const CallOptions *o, DocOptions *d)
{
	d->format = FORMAT_TEXT;
	d->keep = TF_SPAN_ALL;
	d->split = true;
	if (o == NULL)
		return;
	if (o->given[OPT_FORMAT])
	{
		char	   *f = TextDatumGetCString(o->value[OPT_FORMAT]);

		if (pg_strcasecmp(f, "text") == 0)
			d->format = FORMAT_TEXT;
		else if (pg_strcasecmp(f, "html") == 0)
			d->format = FORMAT_HTML;
		else if (pg_strcasecmp(f, "xml") == 0)
			d->format = FORMAT_XML;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for option \"format\": \"%s\"", f),
					 errhint("Valid values are \"text\", \"html\" and \"xml\".")));
	}
	if (o->given[OPT_KEEP])
	{
		ArrayType  *arr = DatumGetArrayTypeP(o->value[OPT_KEEP]);
		Datum	   *el;
		bool	   *nulls;
		int			n;

		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &el, &nulls, &n);
		d->keep = 0;
		for (int i = 0; i < n; i++)
		{
			char	   *k;
			unsigned	bit;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("option \"keep\" must not contain nulls")));
			k = TextDatumGetCString(el[i]);
			bit = tf_span_kind_by_name(k, strlen(k));
			if (bit == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value in option \"keep\": \"%s\"", k),
						 errhint("Valid values are url, email, number, placeholder, format, mention, hashtag, code, symbol, list and quote.")));
			d->keep |= bit;
		}
	}
	if (o->given[OPT_SPLIT])
		d->split = DatumGetBool(o->value[OPT_SPLIT]);
}

/* -------------------------------------------------------- units */

typedef struct Unit
{
	int			doc;
	TfUnit		u;				/* its text: spans taken out, sentences in ALL CAPS lowered in place */
	bool		label;			/* a heading, cell, list item or attribute: no period added */
	DocPlan		plan;
	/* the result */
	char	   *out;
	size_t		outlen;
	TfPlaced   *placed;			/* (nmarkup) */
} Unit;

typedef struct Units
{
	Unit	   *u;
	int			n;
	int			cap;
} Units;

static Unit *
new_unit(Units *us, int doc)
{
	Unit	   *u;

	if (us->n == us->cap)
	{
		us->cap = us->cap ? 2 * us->cap : 16;
		us->u = us->u ? repalloc_huge(us->u, sizeof(Unit) * us->cap) : palloc(sizeof(Unit) * us->cap);
	}
	u = &us->u[us->n++];
	memset(u, 0, sizeof(Unit));
	u->doc = doc;
	return u;
}

/*
 * Which characters the source model can encode, for TF_SPAN_SYMBOL: the
 * character alone is encoded, and it is known if that gives tokens, none
 * is the unknown one, and (for a symbol) the normalizer left it as it is.
 * A byte-fallback model knows every character.
 * Remembered for the call: two bits per character of the BMP.
 */
typedef struct KnownChars
{
	Tokenizer  *tok;
	MemoryContext scratch;
	uint8	   *bmp;			/* per code point: 0 not yet, 1 known, 2 unknown */
} KnownChars;

static bool
char_known(void *arg, const char *c, size_t len)
{
	KnownChars *k = (KnownChars *) arg;
	UChar32		cp;
	int32_t		off = 0;
	int			shift;
	SpmAlloc	a;
	SpmEncoding enc;
	bool		known;

	if (k->tok->model == NULL || k->tok->model->byte_fallback)
		return true;
	if (k->bmp == NULL)
	{
		/* first asked: a text of ASCII letters and spaces never is */
		k->scratch = AllocSetContextCreate(CurrentMemoryContext, "character check", ALLOCSET_SMALL_SIZES);
		k->bmp = palloc0(0x10000 / 4);
	}
	U8_NEXT((const uint8_t *) c, off, (int32_t) len, cp);
	if (cp < 0)
		return true;			/* (valid UTF-8 here) */
	shift = (int) (cp & 3) * 2;
	if (cp < 0x10000 && ((k->bmp[cp >> 2] >> shift) & 3) != 0)
		return ((k->bmp[cp >> 2] >> shift) & 3) == 1;
	a = PgAllocator(k->scratch);
	known = spm_encode(k->tok->model, c, len, &a, &enc) && enc.ntokens > 0;
	/* a symbol the normalizer turns into others (™ into TM, ½ into 1⁄2) is lost as well */
	if (known && !u_isalnum(cp))
	{
		const char *nz = enc.normalized;
		size_t		nlen = enc.normalized_len;

		if (nlen >= 3 && memcmp(nz, "\xE2\x96\x81", 3) == 0)
			nz += 3, nlen -= 3;
		known = nlen == len && memcmp(nz, c, len) == 0;
	}
	for (int i = 0; known && i < enc.ntokens; i++)
		known = k->tok->model->pieces[enc.tokens[i].id].type != SPM_UNKNOWN &&
			(!k->tok->has_vocab || TokenModelId(k->tok, &enc.tokens[i]) != k->tok->vocab_unk);
	MemoryContextReset(k->scratch);
	if (cp < 0x10000)
		k->bmp[cp >> 2] |= (known ? 1 : 2) << shift;
	return known;
}

/* A unit of text s[0..len) with markup anchors ma (spans taken out: rich_text.c). */
static void
BuildUnit(Unit *u, const char *s, size_t len, const TfAnchor *ma, int nma, unsigned keep, const TfCharCheck *cc)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);

	if (tf_unit_build_checked(s, len, ma, nma, keep, cc, &a, &u->u) < 0)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
}

/* -------------------------------------------------------- alignment */

static bool
starts_word(const char *p, Size len)
{
	return len >= 3 && (unsigned char) p[0] == 0xE2 && (unsigned char) p[1] == 0x96 && (unsigned char) p[2] == 0x81;
}

/*
 * Word of each piece: a piece that starts with U+2581 starts a word;
 * ids skipped (-1) where skip says.  Then mapped onto nwords words of the
 * text (the same count but for normalization's odd cases: proportionally).
 */
static void
piece_words(Tokenizer *tok, const int *ids, int n, const bool *skip, int nwords, int *word)
{
	int			w = -1;

	for (int i = 0; i < n; i++)
	{
		Size		len;
		const char *p;

		if (skip[i])
		{
			word[i] = -1;
			continue;
		}
		p = PieceOf(tok, ids[i], &len);
		if (w < 0 || starts_word(p, len))
			w++;
		word[i] = w;
	}
	if (w + 1 != nwords)
		for (int i = 0; i < n; i++)
			if (word[i] >= 0)
				word[i] = nwords == 0 ? -1 : (int) (((long long) word[i] * nwords) / (w + 1));
}

/*
 * Align one sentence: in is what was decoded, raw its generated ids; nsw
 * and ntw the words of its source text and of its translation.  One
 * teacher-forced pass gives the encoder-decoder attention of the layer
 * align() uses (the penultimate of 6 or more, else the last).
 */
static void
align_sentence(CachedModel *cm, const char *model, text *in, const CallOptions *o, const int *raw, int nraw,
			   int nsw, int ntw, int *best_src, int *best_tgt)
{
	const TfConfig *c = &cm->model.cfg;
	Tokenizer  *stok = GetTokenizer(cm->source_tokenizer);
	Tokenizer  *ttok = GetTokenizer(cm->target_tokenizer);
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "alignment", ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			n;
	int		   *src = SourceIds(cm, model, in, o, &n);
	int			T = Min(nraw, c->max_pos);
	int			layer = c->dec_layers >= 6 ? c->dec_layers - 2 : c->dec_layers - 1;
	int		   *dec_in;
	float	   *enc_w,
			   *dec_w,
			   *cross_w,
			   *avg,
			   *scratch;
	bool	   *skip;
	int		   *sword,
			   *tword;
	SpmAlloc	a = DecodeWorkspace(cxt);

	for (int i = 0; i < ntw; i++)
		best_src[i] = -1;
	for (int i = 0; i < nsw; i++)
		best_tgt[i] = -1;
	if (T == 0 || nsw == 0 || ntw == 0)
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		return;
	}
	CheckBufferSize((size_t) c->dec_layers * c->dec_heads * (size_t) T * (size_t) Max(n, T) * sizeof(float));
	CheckBufferSize((size_t) ntw * (size_t) nsw * sizeof(float));
	dec_in = palloc(sizeof(int) * T);
	dec_in[0] = c->decoder_start_id;
	for (int t = 1; t < T; t++)
		dec_in[t] = raw[t - 1];
	enc_w = palloc_extended(sizeof(float) * (Size) c->enc_layers * c->enc_heads * n * n + 1, MCXT_ALLOC_HUGE);
	dec_w = palloc_extended(sizeof(float) * (Size) c->dec_layers * c->dec_heads * T * T + 1, MCXT_ALLOC_HUGE);
	cross_w = palloc_extended(sizeof(float) * (Size) c->dec_layers * c->dec_heads * T * n + 1, MCXT_ALLOC_HUGE);
	tf_attention_maps(&cm->model, n, src, T, dec_in, enc_w, dec_w, cross_w, &a);
	ReleaseWorkspace(&a);

	/* the layer's heads averaged */
	avg = palloc0(sizeof(float) * (Size) T * n);
	for (int h = 0; h < c->dec_heads; h++)
	{
		const float *w = cross_w + ((size_t) layer * c->dec_heads + h) * (size_t) T * n;

		for (size_t i = 0; i < (size_t) T * n; i++)
			avg[i] += w[i] / c->dec_heads;
	}

	skip = palloc(sizeof(bool) * (Max(n, T) + 1));
	sword = palloc(sizeof(int) * (n + 1));
	tword = palloc(sizeof(int) * (T + 1));
	for (int i = 0; i < n; i++)
		skip[i] = src[i] == c->eos_id || IsLanguageToken(cm, src[i]);
	piece_words(stok, src, n, skip, nsw, sword);
	for (int t = 0; t < T; t++)
		skip[t] = raw[t] == c->eos_id || IsLanguageToken(cm, raw[t]) ||
			(cm->lang_forced_bos && raw[t] >= 0 && raw[t] <= 3);
	piece_words(ttok, raw, T, skip, ntw, tword);
	scratch = palloc_extended(sizeof(float) * (Size) ntw * nsw + 1, MCXT_ALLOC_HUGE);
	tf_align_words(avg, T, n, tword, ntw, sword, nsw, scratch, best_src, best_tgt);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/* Elements whose text is a label more often than a sentence */
static bool
is_label(const char *container)
{
	static const char *const labels[] = {
		"h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "li", "dt", "dd", "caption", "figcaption",
		"title", "option", "button", "label", "legend", "summary", "a", NULL
	};

	for (int i = 0; container != NULL && labels[i] != NULL; i++)
		if (pg_strcasecmp(container, labels[i]) == 0)
			return true;
	return false;
}

/* Does s[0..len) end with sentence punctuation (closing quotes and brackets aside)? */
static bool
ends_sentence(const char *s, size_t len)
{
	while (len > 0)
	{
		int32_t		k = (int32_t) len;
		UChar32		c;

		U8_PREV((const uint8_t *) s, 0, k, c);
		if (c < 0)
			return false;
		if (u_charType(c) == U_END_PUNCTUATION || u_charType(c) == U_FINAL_PUNCTUATION || c == '"' || c == '\'')
		{
			len = (size_t) k;
			continue;
		}
		return c == '.' || c == '!' || c == '?' || c == ':' || c == ';' || c == 0x2026 ||
			u_hasBinaryProperty(c, UCHAR_S_TERM);
	}
	return false;
}

/* -------------------------------------------------------- documents */

/*
 * Translate n documents together (format, spans to keep and splitting as
 * the call's options say): every sentence of every unit of every document
 * decodes in one batch.  NULL stays NULL; a plain text that is blank
 * comes back as it is.
 */
void
TranslateDocuments(CachedModel *cm, const char *model, int n, text **docs, const CallOptions *o, text **out)
{
	Tokenizer  *tok = GetTokenizer(cm->source_tokenizer);
	int			limit = SegmentLimit(cm);
	KnownChars	known = {tok, NULL, NULL};
	TfCharCheck cc = {char_known, &known};
	DocOptions	dopt;
	Units		us = {0};
	Jobs		jobs = {0};
	TfMarkupDoc **mdocs = palloc0(sizeof(TfMarkupDoc *) * (n + 1));
	int		   *first_unit = palloc0(sizeof(int) * (n + 1));
	bool	   *skip = palloc0(sizeof(bool) * (n + 1));
	char	  **lang = palloc0(sizeof(char *) * (n + 1));
	int		   *job_unit;
	TfCaseStyle *style;
	text	  **in;
	text	  **done;
	int		  **raw = NULL;
	int		   *nraw = NULL;
	bool		any_anchors = false;
	const char *tgt_locale = o && o->given[OPT_TARGET_LANG] ? TextDatumGetCString(o->value[OPT_TARGET_LANG]) :
		cm->target_lang;
	VocabArg	va;
	SpmAlloc	pa = PgAllocator(CurrentMemoryContext);
	char		err[512];
	int64		tokens_in = 0,
				tokens_out = 0;
	TimestampTz started = GetCurrentTimestamp();

	GetDocOptions(o, &dopt);
	/* every cache entry first: loading one may run a user's code */
	(void) GetTokenizer(cm->target_tokenizer);
	jobs.scratch = AllocSetContextCreate(CurrentMemoryContext, "token count", ALLOCSET_DEFAULT_SIZES);

	for (int d = 0; d < n; d++)
	{
		Size		len;
		char	   *u;
		bool		blank = true;

		out[d] = NULL;
		first_unit[d] = us.n;
		if (docs[d] == NULL)
		{
			skip[d] = true;
			continue;
		}
		u = ToUtf8(docs[d], &len);
		for (Size i = 0; i < len && blank; i++)
			blank = is_space(u[i]);
		if (blank)
		{
			out[d] = docs[d];	/* empty or whitespace only: as it is */
			skip[d] = true;
			continue;
		}
		if (dopt.format == FORMAT_TEXT)
		{
			/* a Marian document that starts with >>fra<<: every sentence goes into that language */
			int			plen = TextLanguagePrefix(cm, u, (int) Min(len, 64));

			if (plen > 0)
			{
				/* the token and the whitespace after it, as the tokenizer would drop them */
				lang[d] = pnstrdup(u, plen);
				while ((Size) plen < len && is_space(u[plen]))
					plen++;
				u += plen;
				len -= plen;
			}
			BuildUnit(new_unit(&us, d), u, len, NULL, 0, dopt.keep, (dopt.keep & TF_SPAN_SYMBOL) ? &cc : NULL);
		}
		else
		{
			const TfMarkupBlock *blocks;
			int			nblocks;

			int			rc;

			/* (stopped for a pending cancel, which is served here; anything else pending, again) */
			while ((rc = tf_markup_parse(u, len, dopt.format == FORMAT_HTML ? TF_MARKUP_HTML : TF_MARKUP_XML,
										 &pa, &mdocs[d], err, sizeof(err))) == TF_MARKUP_INTERRUPTED)
				CHECK_FOR_INTERRUPTS();
			if (rc < 0)
			{
				/* HTML fails only past a limit (or out of memory); XML on any error */
				bool		limit = rc == TF_MARKUP_LIMIT;

				ereport(ERROR,
						(errcode(limit ? ERRCODE_PROGRAM_LIMIT_EXCEEDED :
								 dopt.format == FORMAT_HTML ? ERRCODE_OUT_OF_MEMORY :
								 tf_markup_is_document(u, len, TF_MARKUP_XML) ? ERRCODE_INVALID_XML_DOCUMENT :
								 ERRCODE_INVALID_XML_CONTENT),
						 errmsg("could not parse the input as %s", dopt.format == FORMAT_XML ? "XML" : "HTML"),
						 errdetail("libxml2 reports: %s.", err),
						 limit ? errhint("Elements may nest %d deep and have %d attributes; a document may have %d nodes.",
										 TF_MARKUP_MAX_DEPTH, TF_MARKUP_MAX_ATTRS, TF_MARKUP_MAX_NODES) : 0));
			}
			tf_markup_blocks(mdocs[d], &blocks, &nblocks);
			for (int b = 0; b < nblocks; b++)
			{
				Unit	   *un = new_unit(&us, d);

				CHECK_FOR_INTERRUPTS();
				BuildUnit(un, blocks[b].text, blocks[b].len, blocks[b].anchors, blocks[b].nanchors, dopt.keep, (dopt.keep & TF_SPAN_SYMBOL) ? &cc : NULL);
				un->label = blocks[b].attr != NULL || is_label(blocks[b].container);
			}
		}
		for (int i = first_unit[d]; i < us.n; i++)
			any_anchors |= us.u[i].u.nanchors > 0;
	}
	first_unit[n] = us.n;

	/* sentences (in ALL CAPS or Title Case lowered); each remembers its unit */
	va.tok = tok;
	va.scratch = AllocSetContextCreate(CurrentMemoryContext, "casing", ALLOCSET_DEFAULT_SIZES);
	jobs.casing = &va;
	jobs.locale = cm->source_lang;
	job_unit = palloc(sizeof(int) * 16);
	for (int i = 0; i < us.n; i++)
	{
		int			before = jobs.n;

		plan_document(cm, tok, limit, dopt.split, us.u[i].u.text, us.u[i].u.len, &us.u[i].plan, &jobs);
		job_unit = repalloc_huge(job_unit, sizeof(int) * (jobs.n + 1));
		for (int j = before; j < jobs.n; j++)
			job_unit[j] = i;
	}

	style = jobs.style;

	/* all sentences of all documents decode together */
	in = palloc(sizeof(text *) * (jobs.n + 1));
	done = palloc(sizeof(text *) * (jobs.n + 1));
	for (int j = 0; j < jobs.n; j++)
	{
		const char *l = lang[us.u[job_unit[j]].doc];

		if (l != NULL)
		{
			char	   *s = psprintf("%s %.*s", l, (int) jobs.len[j], jobs.s[j]);

			in[j] = FromUtf8(s, strlen(s));
		}
		else
			in[j] = FromUtf8(jobs.s[j], jobs.len[j]);
	}
	MemoryContextDelete(jobs.scratch);
	if (any_anchors)
	{
		raw = palloc0(sizeof(int *) * (jobs.n + 1));
		nraw = palloc0(sizeof(int) * (jobs.n + 1));
	}
	TranslateSentenceIds(cm, model, jobs.n, in, o, done, raw, nraw);
	tokens_in = last_tokens_in;
	tokens_out = last_tokens_out;

	/* each unit's translation, its anchors placed */
	for (int i = 0; i < us.n; i++)
	{
		Unit	   *u = &us.u[i];
		StringInfoData t;
		size_t	   *tstart = palloc(sizeof(size_t) * (u->plan.nparts + 1));
		size_t	   *tend = palloc(sizeof(size_t) * (u->plan.nparts + 1));

		initStringInfo(&t);
		for (int p = 0; p < u->plan.nparts; p++)
		{
			Part	   *pt = &u->plan.parts[p];

			tstart[p] = t.len;
			if (pt->job < 0)
				appendBinaryStringInfo(&t, u->u.text + pt->off, pt->len);
			else
			{
				Size		l;
				char	   *s = ToUtf8(done[pt->job], &l);

				if (style[pt->job] != TF_CASE_MIXED)
				{
					char	   *r;
					size_t		rl;

					if (tf_case_restore(style[pt->job], s, l, tgt_locale, NULL, 0, &pa, &r, &rl, NULL,
										err, sizeof(err)) < 0)
						ereport(ERROR,
								(errcode(ERRCODE_INTERNAL_ERROR),
								 errmsg("could not change the case of the translation"),
								 errdetail("%s", err)));
					s = r;
					l = rl;
				}
				/*
				 * A heading, cell or attribute without a final period gets
				 * none: models trained on sentences add one.
				 */
				if (u->label && l > 1 && s[l - 1] == '.' && s[l - 2] != '.' &&
					!ends_sentence(jobs.s[pt->job], jobs.len[pt->job]))
					l--;
				appendBinaryStringInfo(&t, s, l);
			}
			tend[p] = t.len;
		}
		if (u->u.nanchors == 0)
		{
			u->out = t.data;
			u->outlen = t.len;
			u->placed = NULL;
			continue;
		}
		{
			TfWord	   *sw,
					   *tw;
			int			nsw = tf_text_words(u->u.text, u->u.len, &pa, &sw);
			int			ntw = tf_text_words(t.data, t.len, &pa, &tw);
			int		   *al_src = palloc(sizeof(int) * (ntw + 1));
			int		   *al_tgt = palloc(sizeof(int) * (nsw + 1));

			for (int k = 0; k < ntw; k++)
				al_src[k] = -1;
			for (int k = 0; k < nsw; k++)
				al_tgt[k] = -1;
			for (int p = 0; p < u->plan.nparts; p++)
			{
				Part	   *pt = &u->plan.parts[p];
				size_t		so = pt->job < 0 ? pt->off : (size_t) (jobs.s[pt->job] - u->u.text);
				size_t		sl = pt->job < 0 ? pt->len : jobs.len[pt->job];
				int			sa = tf_word_at(sw, nsw, so),
							sb = tf_word_at(sw, nsw, so + sl);
				int			ta = tf_word_at(tw, ntw, tstart[p]),
							tb = tf_word_at(tw, ntw, tend[p]);

				CHECK_FOR_INTERRUPTS();
				if (pt->job < 0)
				{
					/* bytes as they were: word for word */
					for (int k = 0; k < tb - ta && k < sb - sa; k++)
					{
						al_src[ta + k] = sa + k;
						al_tgt[sa + k] = ta + k;
					}
					continue;
				}
				align_sentence(cm, model, in[pt->job], o, raw[pt->job], nraw[pt->job], sb - sa, tb - ta,
							   al_src + ta, al_tgt + sa);
				for (int k = ta; k < tb; k++)
					if (al_src[k] >= 0)
						al_src[k] += sa;
				for (int k = sa; k < sb; k++)
					if (al_tgt[k] >= 0)
						al_tgt[k] += ta;
			}
			u->placed = palloc0(sizeof(TfPlaced) * (u->u.nmarkup + 1));
			if (tf_unit_place(&u->u, t.data, t.len, al_src, al_tgt, &pa, &u->out, &u->outlen, u->placed, NULL) < 0)
				ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		}
	}

	for (int d = 0; d < n; d++)
	{
		if (skip[d])
			continue;
		if (dopt.format == FORMAT_TEXT)
			out[d] = FromUtf8(us.u[first_unit[d]].out, us.u[first_unit[d]].outlen);
		else
		{
			int			nb = first_unit[d + 1] - first_unit[d];
			TfRendered *r = palloc(sizeof(TfRendered) * (nb + 1));
			char	   *res;
			size_t		reslen;

			for (int b = 0; b < nb; b++)
			{
				Unit	   *u = &us.u[first_unit[d] + b];

				r[b].text = u->out;
				r[b].len = u->outlen;
				r[b].placed = u->placed;
			}
			if (tf_markup_render(mdocs[d], r, &pa, &res, &reslen, err, sizeof(err)) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("could not write the translated document"),
						 errdetail("%s", err)));
			out[d] = FromUtf8(res, reslen);
		}
	}
	{
		long		secs;
		int			usecs;

		TimestampDifference(started, GetCurrentTimestamp(), &secs, &usecs);
		RecordModelCall(model, jobs.n, tokens_in, tokens_out, secs * 1000.0 + usecs / 1000.0);
	}
}
