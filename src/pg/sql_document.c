/*
 * sql_document.c
 *		Documents: sentences() (ICU's sentence rules), translating a text
 *		of any length sentence by sentence, and the languages of a model.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "ext_tables.h"
#include "segment.h"
#include "input_limit.h"
#include "tokenizer.h"
#include "translate.h"

#define MAX_LOCALE 100

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* A locale name of letters, digits and _-@=; only, or "" for the root rules. */
static void
CheckLocale(const char *locale)
{
	if (strlen(locale) > MAX_LOCALE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("locale name is too long"),
				 errdetail("Locale names have at most %d bytes.", MAX_LOCALE)));
	for (const char *c = locale; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			  *c == '_' || *c == '-' || *c == '@' || *c == '=' || *c == ';'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid locale name \"%s\"", locale),
					 errhint("Use a language tag such as de, en_US or pt-BR.")));
}

/* Sentence boundaries of UTF-8 text: nseg + 1 byte offsets. */
static size_t *
SentenceBounds(const char *s, size_t len, const char *locale, int *nseg)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	size_t	   *bounds;
	char		err[256];

	*nseg = tf_sentence_bounds(s, len, locale, &a, &bounds, err, sizeof(err));
	if (*nseg < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not split the text into sentences"),
				 errdetail("ICU reports: %s.", err)));
	return bounds;
}

PG_FUNCTION_INFO_V1(sentences);
Datum
sentences(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *locale = "";
	char	   *s;
	Size		len;
	size_t	   *b;
	int			n;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (PG_ARGISNULL(0))
		return (Datum) 0;
	if (!PG_ARGISNULL(1))
	{
		locale = text_to_cstring(PG_GETARG_TEXT_PP(1));
		CheckLocale(locale);
	}
	s = ToUtf8(InputTextArg(fcinfo, 0), &len);
	b = SentenceBounds(s, len, locale, &n);
	for (int i = 0; i < n; i++)
	{
		Datum		value = PointerGetDatum(FromUtf8(s + b[i], b[i + 1] - b[i]));
		bool		null = false;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &null);
	}
	return (Datum) 0;
}

/* ---------------------------------------------------------- documents */

/* A document as parts: its own bytes, or a sentence's translation. */
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
} Jobs;

static void
add_part(DocPlan *p, int job, size_t off, size_t len)
{
	if (job < 0 && len == 0)
		return;
	if (p->nparts == p->cap)
	{
		p->cap = p->cap ? 2 * p->cap : 16;
		p->parts = p->parts ? repalloc(p->parts, sizeof(Part) * p->cap) : palloc(sizeof(Part) * p->cap);
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
		j->s = j->s ? repalloc(j->s, sizeof(char *) * j->cap) : palloc(sizeof(char *) * j->cap);
		j->len = j->len ? repalloc(j->len, sizeof(size_t) * j->cap) : palloc(sizeof(size_t) * j->cap);
	}
	j->s[j->n] = s;
	j->len[j->n] = len;
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
 * A sentence u[start..end) (no whitespace at either end) as jobs: itself,
 * or, when it has more tokens than the model's positions take, pieces cut
 * at the last whitespace or punctuation before the limit (at a character
 * if a single word is too long), the whitespace between them kept.
 */
static void
plan_sentence(DocPlan *p, Jobs *jobs, Tokenizer *tok, int limit, const char *u, size_t start, size_t end)
{
	size_t		pos = start;

	while (pos < end)
	{
		int			ntok = count_tokens(jobs, tok, u + pos, end - pos);
		size_t		lo,
					hi,
					cut = 0;
		size_t		e;

		CHECK_FOR_INTERRUPTS();
		if (ntok == 0)
		{
			add_part(p, -1, pos, end - pos);	/* nothing to translate */
			return;
		}
		if (ntok <= limit)
		{
			add_part(p, add_job(jobs, u + pos, end - pos), 0, 0);
			return;
		}
		/* the last cut point whose prefix fits (token counts grow with the prefix) */
		lo = pos + 1;
		hi = end - 1;
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
		if (cut == 0)
		{
			/* one long word: the longest run of whole characters that fits */
			lo = pos + 1;
			hi = end - 1;
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

/* A document u[0..len) as parts: its sentences (cut further if too long) as jobs, the whitespace kept. */
static void
plan_document(CachedModel *cm, Tokenizer *tok, int limit, const char *u, size_t len, DocPlan *plan, Jobs *jobs)
{
	int			nseg;
	size_t	   *b = SentenceBounds(u, len, cm->source_lang, &nseg);

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
			plan_sentence(plan, jobs, tok, limit, u, cs, ce);
		add_part(plan, -1, ce, end - ce);
	}
}

int
DocumentSentences(CachedModel *cm, text *doc, text ***sentences)
{
	Tokenizer  *tok = GetTokenizer(cm->source_tokenizer);
	int			limit = cm->model.cfg.max_pos - 1;	/* with EOS */
	DocPlan		plan = {0};
	Jobs		jobs = {0};
	Size		len;
	char	   *u = ToUtf8(doc, &len);

	jobs.scratch = AllocSetContextCreate(CurrentMemoryContext, "token count", ALLOCSET_DEFAULT_SIZES);
	plan_document(cm, tok, limit, u, len, &plan, &jobs);
	MemoryContextDelete(jobs.scratch);
	*sentences = palloc(sizeof(text *) * (jobs.n + 1));
	for (int j = 0; j < jobs.n; j++)
		(*sentences)[j] = FromUtf8(jobs.s[j], jobs.len[j]);
	return jobs.n;
}

void
TranslateDocuments(CachedModel *cm, const char *model, int n, text **docs, const CallOptions *o, text **out)
{
	Tokenizer  *tok = GetTokenizer(cm->source_tokenizer);
	int			limit = cm->model.cfg.max_pos - 1;	/* with EOS */
	DocPlan	   *plans = palloc0(sizeof(DocPlan) * (n + 1));
	char	  **utf8 = palloc0(sizeof(char *) * (n + 1));
	Jobs		jobs = {0};
	text	  **in;
	text	  **done;

	/* every cache entry first: loading one may run a user's code */
	(void) GetTokenizer(cm->target_tokenizer);
	jobs.scratch = AllocSetContextCreate(CurrentMemoryContext, "token count", ALLOCSET_DEFAULT_SIZES);

	for (int d = 0; d < n; d++)
	{
		Size		len;
		char	   *u;
		bool		blank = true;

		out[d] = NULL;
		if (docs[d] == NULL)
			continue;
		u = utf8[d] = ToUtf8(docs[d], &len);
		for (Size i = 0; i < len && blank; i++)
			blank = is_space(u[i]);
		if (blank)
		{
			out[d] = docs[d];	/* empty or whitespace only: as it is */
			utf8[d] = NULL;
			continue;
		}
		plan_document(cm, tok, limit, u, len, &plans[d], &jobs);
	}

	MemoryContextDelete(jobs.scratch);

	/* all sentences of all documents decode together */
	in = palloc(sizeof(text *) * (jobs.n + 1));
	done = palloc(sizeof(text *) * (jobs.n + 1));
	for (int j = 0; j < jobs.n; j++)
		in[j] = FromUtf8(jobs.s[j], jobs.len[j]);
	TranslateSentences(cm, model, jobs.n, in, o, done);

	for (int d = 0; d < n; d++)
	{
		StringInfoData buf;

		if (utf8[d] == NULL)
			continue;
		initStringInfo(&buf);
		for (int i = 0; i < plans[d].nparts; i++)
		{
			Part	   *pt = &plans[d].parts[i];

			if (pt->job < 0)
				appendBinaryStringInfo(&buf, utf8[d] + pt->off, pt->len);
			else
			{
				Size		l;
				char	   *t = ToUtf8(done[pt->job], &l);

				appendBinaryStringInfo(&buf, t, l);
			}
		}
		out[d] = FromUtf8(buf.data, buf.len);
	}
}

/* ------------------------------------------------------------ languages */

PG_FUNCTION_INFO_V1(set_model_languages);
Datum
set_model_languages(PG_FUNCTION_ARGS)
{
	char	   *model;
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	char		nulls[3] = {' ', PG_ARGISNULL(1) ? 'n' : ' ', PG_ARGISNULL(2) ? 'n' : ' '};
	int			level;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model must not be null")));
	model = text_to_cstring(PG_GETARG_TEXT_PP(0));
	for (int i = 1; i <= 2; i++)
		if (!PG_ARGISNULL(i))
			CheckLocale(text_to_cstring(PG_GETARG_TEXT_PP(i)));
	RequireExtensionVersion020();
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	LockObjectName(EXT_LOCK_MODEL, model);
	level = ExtSpiConnect();
	if (SPI_execute_with_args(psprintf("UPDATE %s SET source_lang = $2, target_lang = $3 WHERE name = $1",
									   ExtensionTableName("transformer_models")),
							  3, types, args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not set the languages of model \"%s\"", model);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model)));
	ExtSpiFinish(level);
	PG_RETURN_VOID();
}
