/*
 * document_plan.c
 *		A document's text as a plan (document_plan.h): its sentences, cut
 *		at clause boundaries when longer than the model translates
 *		reliably, a phrase said again and again split at each saying,
 *		ALL CAPS and Title Case lowered for the model; the whitespace kept
 *		as parts between them.
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "casing.h"
#include "document_plan.h"
#include "model_store.h"
#include "segment.h"
#include "tokenizer.h"
#include "translate.h"

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

	return doc_is_space(p) || p == '.' || p == ',' || p == ';' || p == ':' || p == '!' || p == '?' || p == ')';
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

	while (b > start && doc_is_space(u[b - 1]))
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
	while (w < end && !doc_is_space(u[w]) && w - c < 16)
		w++;
	if (word_in(u + c, w - c, sentence_words))
	{
		size_t		p = b;

		while (p > start && !doc_is_space(u[p - 1]))
			p--;
		if (!word_in(u + p, b - p, sentence_words) && !word_in(u + p, b - p, clause_words))
			return 2;
	}
	if (word_in(u + c, w - c, clause_words))
		return 1;
	return 0;
}


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
							(pos == start && ntok <= whole_limit && EndsSentence(u + start, end - start))))
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

				if (!doc_is_space(u[c - 1]) || doc_is_space(u[c]))
					continue;
				r = cut_rank(u, pos, c, end);
				if (r > best)
				{
					best = r;
					best_c = c;
				}
			}
			if (best > 0 || !doc_is_space(u[cut - 1]))
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
		while (e > pos && doc_is_space(u[e - 1]))
			e--;
		if (e > pos)
			add_part(p, add_job(jobs, u + pos, e - pos), 0, 0);
		pos = cut;
		while (pos < end && doc_is_space(u[pos]))
			pos++;
		add_part(p, -1, e, pos - e);
	}
}

/* -------------------------------------------------------- casing */


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
	while (i < end && !doc_is_space(u[i]))
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
	for (b0 = a1; b0 < end && doc_is_space(u[b0]); b0++)
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

		while (i < end && doc_is_space(u[i]))
			i++;
		e = word_end(u, i, end);
		if (e - i == a1 - a0 && memcmp(u + i, u + a0, a1 - a0) == 0)
		{
			for (n0 = e; n0 < end && doc_is_space(u[n0]); n0++)
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
void
PlanDocument(CachedModel *cm, Tokenizer *tok, int limit, bool split, const char *u, size_t len,
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

		while (cs < end && doc_is_space(u[cs]))
			cs++;
		while (ce > cs && doc_is_space(u[ce - 1]))
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
				while (pe > ps && doc_is_space(u[pe - 1]))
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
int
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
	PlanDocument(cm, tok, SegmentLimit(cm), true, u, len, &plan, &jobs);
	MemoryContextDelete(jobs.scratch);
	*sentences = palloc(sizeof(text *) * (jobs.n + 1));
	for (int j = 0; j < jobs.n; j++)
		(*sentences)[j] = FromUtf8(jobs.s[j], jobs.len[j]);
	return jobs.n;
}

/* Does s[0..len) end with sentence punctuation (closing quotes and brackets aside)? */
bool
EndsSentence(const char *s, size_t len)
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
