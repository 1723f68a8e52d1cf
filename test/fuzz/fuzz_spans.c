/*
 * libFuzzer harness for the verbatim spans of a text (src/core/spans*.c)
 * outside the server: the first byte is the mask of kinds, the rest the
 * text (ill-formed UTF-8 is skipped: the server gives valid text).  The
 * spans must be sorted, non-empty, non-overlapping, in bounds, at
 * character boundaries, each of one kind in the mask and looking like
 * one (a mention starts with @, a symbol holds a character the model
 * does not know or is an entity ...), the same as with every kind asked
 * for and filtered by the mask; abort() otherwise.  The model knows a
 * character by a hash of its bytes.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/utf8.h>

#include "spans.h"
#include "fuzz_arena.h"

/* the server's interrupt hook (spm_model.c defines it there): none here */
void		(*spm_interrupt_hook) (void) = NULL;

/* a model that knows a character by a hash of its bytes: a third unknown */
static bool
known(void *arg, const char *c, size_t len)
{
	(void) arg;
	return ((uint8_t) c[0] + (uint8_t) c[len - 1] + len) % 3 != 0;
}

static const TfCharCheck check = {known, NULL};

/* does s[start..end) hold a character the model does not know? */
static int
has_unknown(const char *s, size_t start, size_t end)
{
	for (int32_t i = (int32_t) start; i < (int32_t) end;)
	{
		int32_t		b = i;
		UChar32		c;

		U8_NEXT((const uint8_t *) s, i, (int32_t) end, c);
		if (c >= 0 && !known(NULL, s + b, (size_t) (i - b)))
			return 1;
	}
	return 0;
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* does s[0..i) end with a quotation mark (a list marker may follow one: "„- Ein Hund") */
static bool
after_quote(const char *s, size_t i)
{
	static const char *const quotes[] = {"\xe2\x80\x9e", "\xe2\x80\x9c", "\xe2\x80\x9d", "\xc2\xab", "\xc2\xbb",
	"\xe2\x80\xb9", "\xe2\x80\xba", "\xe2\x80\x9a", "\xe2\x80\x98", "\""};

	for (size_t q = 0; q < sizeof(quotes) / sizeof(quotes[0]); q++)
	{
		size_t		n = strlen(quotes[q]);

		if (i >= n && memcmp(s + i - n, quotes[q], n) == 0)
			return true;
	}
	return false;
}

static int
valid_utf8(const uint8_t *s, size_t len)
{
	for (int32_t i = 0; i < (int32_t) len;)
	{
		UChar32		c;

		U8_NEXT(s, i, (int32_t) len, c);
		if (c < 0)
			return 0;
	}
	return 1;
}

static int
has_digit(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] >= '0' && s[i] <= '9')
			return 1;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	const char *s = (const char *) data + 1;
	size_t		len = size ? size - 1 : 0;
	unsigned	mask;
	TfSpan	   *sp,
			   *all;
	int			n,
				nall,
				k = 0;

	if (size == 0 || size > (1 << 20) || !valid_utf8(data + 1, len))
		return 0;
	/* (the top two bits also ask for symbols and list markers) */
	mask = data[0] | ((unsigned) (data[0] >> 6) << 8);
	n = tf_find_spans_checked(s, len, mask, &check, &a, &sp);
	nall = tf_find_spans_checked(s, len, TF_SPAN_ALL, &check, &a, &all);
	if (n < 0 || nall < n || (n == 0) != (sp == NULL))
		abort();
	for (int i = 0; i < n; i++)
	{
		const TfSpan *p = &sp[i];

		if (p->start >= p->end || p->end > len || (i > 0 && p->start < sp[i - 1].end) ||
			(p->kind & mask) == 0 || tf_span_kind_name(p->kind) == NULL ||
			(p->start < len && ((uint8_t) s[p->start] & 0xC0) == 0x80) ||
			(p->end < len && ((uint8_t) s[p->end] & 0xC0) == 0x80))
			abort();
		/* what each kind starts or ends with, or holds */
		if ((p->kind == TF_SPAN_CODE && (s[p->start] != '`' || s[p->end - 1] != '`')) ||
			(p->kind == TF_SPAN_MENTION && s[p->start] != '@') ||
			(p->kind == TF_SPAN_HASHTAG && s[p->start] != '#') ||
			(p->kind == TF_SPAN_EMAIL && memchr(s + p->start, '@', p->end - p->start) == NULL) ||
			(p->kind == TF_SPAN_PLACEHOLDER && !memchr("{$%", s[p->start], 3)) ||
			(p->kind == TF_SPAN_NUMBER && !has_digit(s + p->start, p->end - p->start)) ||
			(p->kind == TF_SPAN_SYMBOL && !(s[p->start] == '&' && s[p->end - 1] == ';') &&
			 !has_unknown(s, p->start, p->end)) ||
			(p->kind == TF_SPAN_LIST && p->start > 0 && s[p->start - 1] != '\n' && s[p->start - 1] != ' ' &&
			 s[p->start - 1] != '\t' && s[p->start - 1] != '\r' && !after_quote(s, p->start)))
			abort();
		/* the mask filters, it does not change what is found */
		while (k < nall && !(all[k].kind & mask))
			k++;
		if (k == nall || all[k].start != p->start || all[k].end != p->end || all[k].kind != p->kind)
			abort();
		k++;
	}
	while (k < nall && !(all[k].kind & mask))
		k++;
	if (k != nall)
		abort();
	arena_free(&arena);
	return 0;
}
