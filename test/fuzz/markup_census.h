/*
 * markup_census.h
 *		For the markup fuzzers (fuzz_markup.c, fuzz_rich_text.c): the
 *		elements of a document as libxml2 parses it, and the inputs the
 *		server can hand over (valid UTF-8 without NULs).
 */
#ifndef MARKUP_CENSUS_H
#define MARKUP_CENSUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "markup.h"

static void
silent(void *ctx, xmlErrorPtr e)
{
	(void) ctx;
	(void) e;
}

static bool
contains(const char *s, size_t len, const char *w)
{
	size_t		k = strlen(w);

	/* without regard to case: HTML's element names have none (<tf-Census> is tf-census) */
	for (size_t i = 0; i + k <= len; i++)
		if (strncasecmp(s + i, w, k) == 0)
			return true;
	return false;
}

/*
 * The element names of s, as libxml2 parses it the way markup_parse.c does:
 * count and hash sums.  HTML: p, html, head and body apart (sum[3]),
 * which libxml2 implies around text met directly in html or head, or
 * before any element of a document (a translation's text may end up
 * there, outside the element that held it).
 */
static void
census(const char *s, size_t len, int fmt, uint64_t sum[4])
{
	bool		document = tf_markup_is_document(s, len, fmt);
	char	   *w = malloc(len + 64);
	size_t		n = 0;
	char		wrap[32] = "tf-census";

	/* a wrapper the text does not close */
	for (int k = 0; contains(s, len, wrap); k++)
		snprintf(wrap, sizeof(wrap), "tf-census-%d", k);
	xmlDocPtr	doc;
	xmlNodePtr	x;

	sum[0] = sum[1] = sum[2] = sum[3] = 0;
	if (!document)
		n = sprintf(w, "<%s>", wrap);
	memcpy(w + n, s, len);
	n += len;
	if (!document)
		n += sprintf(w + n, "</%s>", wrap);
	xmlSetStructuredErrorFunc(NULL, silent);
	if (fmt == TF_MARKUP_HTML)
		doc = htmlReadMemory(w, (int) n, NULL, "UTF-8",
							 HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
							 HTML_PARSE_NONET | HTML_PARSE_NODEFDTD |
							 (document ? 0 : HTML_PARSE_NOIMPLIED));
	else
		doc = xmlReadMemory(w, (int) n, NULL, "UTF-8",
							XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	free(w);
	if (doc == NULL)
		return;
	for (x = doc->children; x;)
	{
		if (x->type == XML_ELEMENT_NODE)
		{
			uint64_t	h = 1469598103934665603ULL;
			const char *full = (const char *) x->name;
			const char *name = full;
			bool		letter;

			/*
			 * A name that does not start with a letter (libxml2's HTML
			 * parser reads "<p:0u2>" as "0u2") is text when written and
			 * read again: HTML elements with such names are not counted.
			 * (Names with colons are not compared at all: see
			 * colon_names.)
			 */
			letter = ((full[0] | 0x20) >= 'a' && (full[0] | 0x20) <= 'z');
			for (const char *c = name; *c; c++)
				h = (h ^ (uint8_t) *c) * 1099511628211ULL;
			if (strcmp(full, wrap) == 0 || (fmt == TF_MARKUP_HTML && !letter))
				;
			else if (fmt == TF_MARKUP_HTML && (strcmp(name, "p") == 0 || strcmp(name, "html") == 0 ||
											   strcmp(name, "head") == 0 || strcmp(name, "body") == 0))
				sum[3]++;
			else
			{
				sum[0]++;
				sum[1] += h;
				sum[2] += h * h;
			}
			if (x->children)
			{
				x = x->children;
				continue;
			}
		}
		while (x && x->next == NULL)
			x = x->parent && x->parent->type == XML_ELEMENT_NODE ? x->parent : NULL;
		if (x)
			x = x->next;
	}
	xmlFreeDoc(doc);
}

/*
 * Does s have a tag name with a colon?  libxml2's HTML parser reads those
 * its own way, and not the same way twice ("s:x:b" is "x:b", which
 * written and read again is "b", or text): such HTML is not compared.
 */
static bool
colon_names(const char *s, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++)
		if (s[i] == '<')
		{
			size_t		j = i + 1 + (s[i + 1] == '/');

			while (j < len && (((s[j] | 0x20) >= 'a' && (s[j] | 0x20) <= 'z') || (s[j] >= '0' && s[j] <= '9') ||
							   s[j] == '_' || s[j] == '.' || s[j] == '-'))
				j++;
			if (j < len && s[j] == ':')
				return true;
		}
	return false;
}

/* the server hands over valid UTF-8 without NULs (libxml2 would switch to Latin-1 mid-way) */
static bool
valid_utf8(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;)
	{
		uint32_t	c = s[i];
		int			k = c < 0x80 ? 0 : c >= 0xC2 && c < 0xE0 ? 1 : c >= 0xE0 && c < 0xF0 ? 2 :
			c >= 0xF0 && c < 0xF5 ? 3 : -1;

		if (c == 0 || k < 0 || i + k >= n + (k == 0))
			return false;
		c &= k ? 0x3F >> k : 0x7F;
		for (int j = 1; j <= k; j++)
		{
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			c = (c << 6) | (s[i + j] & 0x3F);
		}
		if ((k == 2 && (c < 0x800 || (c >= 0xD800 && c < 0xE000))) || (k == 3 && (c < 0x10000 || c > 0x10FFFF)))
			return false;
		i += k + 1;
	}
	return true;
}

#endif
