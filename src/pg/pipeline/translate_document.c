/*
 * translate_document.c
 *		Documents as people write them, through the sentence pipeline
 *		(translate.c): text or markup -> units -> sentences -> translations
 *		-> the document again.
 *
 * A unit is a text to translate with anchors over it: a plain document,
 * or one block of an HTML/XML document (markup_*.c) with its inline
 * elements.  In a unit:
 *  - verbatim spans (spans.c: URLs, numbers, placeholders, ...) are taken
 *    out of the text, and become point anchors that carry their bytes;
 *  - the text is split into sentences (segment.c), and those longer than
 *    the model translates reliably are cut at clause boundaries; a
 *    sentence in ALL CAPS or Title Case is lowered for the model
 *    (document_plan.c), its translation restored to that style (casing.c);
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
#include "document_plan.h"
#include "markup.h"
#include "model_store.h"
#include "placement.h"
#include "rich_text.h"
#include "segment.h"
#include "spans.h"
#include "tokenizer.h"
#include "translate.h"

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
			blank = doc_is_space(u[i]);
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
				while ((Size) plen < len && doc_is_space(u[plen]))
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
						 limit ? errhint("Elements may nest %d deep and have %d attributes; a tag, comment or processing instruction may be %d bytes long; a document may have %d nodes.",
										 TF_MARKUP_MAX_DEPTH, TF_MARKUP_MAX_ATTRS, TF_MARKUP_MAX_TOKEN, TF_MARKUP_MAX_NODES) : 0));
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

		PlanDocument(cm, tok, limit, dopt.split, us.u[i].u.text, us.u[i].u.len, &us.u[i].plan, &jobs);
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
					!EndsSentence(jobs.s[pt->job], jobs.len[pt->job]))
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
