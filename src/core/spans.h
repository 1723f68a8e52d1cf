/*
 * spans.h
 *		The spans of a text a translation must keep verbatim: URLs, e-mail
 *		addresses, numbers and dates, placeholders, format directives,
 *		mentions, hashtags, code in backticks.  The caller takes each span
 *		out of the sentence, translates, and puts the span back unchanged.
 *		Part of the core: no postgres.h.
 */
#ifndef SPANS_H
#define SPANS_H

#include <stdbool.h>
#include <stddef.h>

#include "spm.h"				/* SpmAlloc */

enum
{
	/*
	 * http://, https://, ftp://, ftps:// (any case) and www.host.tld, to
	 * the next whitespace, control, < > " ` or Unicode quotation mark (the
	 * German „...“).  Trailing . , ; : ! ? ' " … are left out, and so are
	 * a trailing ) or ] that close no ( or [ in the URL.
	 */
	TF_SPAN_URL = 1 << 0,
	/* local@domain.tld: letters (any script), digits, . _ + - before the @,
	 * two or more labels after it, the last of two or more letters */
	TF_SPAN_EMAIL = 1 << 1,

	/*
	 * ASCII digits (other scripts' digits are letters here, as in "A4"):
	 * digit groups joined by one of . , : / - (15, 3,5, 1.000.000,
	 * 15.03.2024, 10:30, 3/4, 2024-03-15, 1990-2000); after a leading +
	 * also by single spaces (+49 30 123456).  A sign (+ - U+2212) or a
	 * currency sign just before, a % ‰ or currency sign just after are
	 * part of it (-4, $5.99, €5, 5€, 20%), and so is a % or ‰ after one
	 * space (20 %, as German writes it); "€ 5" is "5".  "#4711" is a number
	 * with its "#" (not a hashtag: no letter).  Not a number:
	 * digits glued to a word, before or after, directly or by - . / (A4,
	 * B12, COVID-19, 3D, mp3, 1.5e3, 19-jährige, 15kg): the model copies
	 * those words.  Ordinals keep their period: a number of one or two
	 * digits (or a day.month like 15.03) followed by ".", spaces or tabs
	 * and a lower-case letter, a month name (März, Oct, Jan. ...) or, after
	 * der/die/das/den/dem/des/am/im/zum/zur/vom/beim/jede(n|m|r|s), any
	 * word: "am 15. März" is "15.", "der 2. Platz" is "2.", but "Ich habe
	 * 20. Dann" and "Nr. 5." at the end are "20" and "Nr. 5".  A label that
	 * says "number" (Nr. nr. No. Nº №: a whole word, then at most one space)
	 * goes with the number after it: "Nr. #12".
	 */
	TF_SPAN_NUMBER = 1 << 2,

	/* {name} {0} {} {0:.2f} {name!r}; {{ name }} {{{name}}} (no braces or
	 * line ends inside, at most 64 bytes); the same after a $ (${var},
	 * ${var:-x}, ${{ x }}); %(name)s */
	TF_SPAN_PLACEHOLDER = 1 << 3,

	/*
	 * printf directives (%s %d %5.2f %-10s %1$s %lld %@, not followed by a
	 * letter or digit: "50 %ige" is none; %% is a literal, never a span);
	 * $1..$99 not followed by a letter, digit or decimals (so "$5" is a
	 * parameter, "$5.99" and "$100" numbers); the escapes \n \t \r ("\\"
	 * is a literal backslash, never a span).
	 */
	TF_SPAN_FORMAT = 1 << 4,
	/* @name after no letter, digit, _, @, # or &; letters (any script),
	 * digits, _ and one letter at least; not followed by @ (an e-mail) */
	TF_SPAN_MENTION = 1 << 5,
	/* #name, as a mention (so "#123" is none: "123" is a number) */
	TF_SPAN_HASHTAG = 1 << 6,

	/*
	 * A run of 1 to 32 backticks not after a letter or digit, to the next
	 * run of as many not before one, the backticks included: `ls -l`,
	 * ``a ` b``, ```block```.  Runs of one or two close on the same line.
	 */
	TF_SPAN_CODE = 1 << 7,

	/*
	 * What the model could only lose: a run of characters that its
	 * vocabulary cannot encode (they would be <unk>, or normalized away),
	 * such as emoji (with their joiners, variation selectors and skin
	 * tones), symbols and scripts it never saw; a word with such a letter
	 * in it is kept whole.  And, as written, text that looks like an
	 * entity: &lt; &amp; &#60; &#x3C; (in markup the parser has decoded
	 * them: a "&lt;" left in a block's text was written "&amp;lt;").
	 * Needs a TfCharCheck; without one, only the entities.
	 */
	TF_SPAN_SYMBOL = 1 << 8,

	/*
	 * A list marker at the start of a line (after spaces only) and before
	 * a space: - * + • · ‣ ◦ ▪ – —; and, when two lines or more of the text
	 * start so (a numbered list, not one "3. Liga"), 1 to 3 digits or one
	 * letter with . or ): "1. ", "12) ", "a) ".
	 */
	TF_SPAN_LIST = 1 << 9,

	/*
	 * A quotation mark: „ “ ” « » ‹ › ‚ and ", and ‘ where no letter
	 * stands on both sides (’ is an apostrophe).  A model trained on
	 * other quotes drops them, with the text they enclose kept: carried,
	 * each goes after the target word aligned to the source word before it.
	 */
	TF_SPAN_QUOTE = 1 << 10,
	TF_SPAN_ALL = 0x7FF
};

/* Whether the model can encode one character, its UTF-8 bytes c[0..len). */
typedef struct TfCharCheck
{
	bool		(*known) (void *arg, const char *c, size_t len);
	void	   *arg;
} TfCharCheck;

/* s[start..end) */
typedef struct TfSpan
{
	size_t		start,
				end;
	int			kind;			/* one TF_SPAN_* bit */
} TfSpan;

/*
 * The spans of s (len bytes of UTF-8, ill-formed bytes read as symbols) of
 * the kinds in mask: sorted, non-empty, non-overlapping, at character
 * boundaries.  Every kind is looked for whatever the mask, and nothing is
 * a span inside another, so a URL's digits are never numbers and an
 * e-mail is never also a mention, even when the mask asks for numbers or
 * mentions alone.  Brackets that hold only numbers, runs the model does
 * not know, spaces and units ("(± 2 m)", "[5 €]") are one span with them:
 * a symbol if one of them is, else a number.
 * *spans is allocated from a (NULL when there are none).
 * Returns the count, -1 when out of memory.  Linear time in len.
 */
int			tf_find_spans(const char *s, size_t len, unsigned mask,
						  const SpmAlloc *a, TfSpan **spans);

/* The same, characters checked with cc (NULL: every character is known). */
int			tf_find_spans_checked(const char *s, size_t len, unsigned mask, const TfCharCheck *cc,
								  const SpmAlloc *a, TfSpan **spans);

/* "url", "email", "number", "placeholder", "format", "mention", "hashtag",
 * "code", "symbol", "list" (len bytes, exact case) to its bit; 0 when unknown */
unsigned	tf_span_kind_by_name(const char *name, size_t len);

/* the name of one kind's bit; NULL when kind is not exactly one known bit */
const char *tf_span_kind_name(int kind);

#endif							/* SPANS_H */
