/*
 * libFuzzer harness for the SVG pictures' label escaping (xml_text.c):
 * random bytes as a label must come out as XML 1.0 character data.  The
 * oracle is XML's own grammar, not the escaping rules: no markup character
 * outside an entity, every entity one of the five, and, when the label is
 * valid UTF-8 (as the server's text always is), every character an XML
 * Char (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
 * [#x10000-#x10FFFF]).  make fuzz-svg-label.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xml_text.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next code point of UTF-8 at s[*i..n), or -1 if it is not well-formed. */
static long
next_utf8(const unsigned char *s, size_t n, size_t *i)
{
	unsigned char c = s[*i];
	int			len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
	long		cp;

	if (len == 0 || *i + len > n)
		return -1;
	cp = len == 1 ? c : c & (0x7F >> len);
	for (int k = 1; k < len; k++)
	{
		if ((s[*i + k] & 0xC0) != 0x80)
			return -1;
		cp = (cp << 6) | (s[*i + k] & 0x3F);
	}
	/* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		(cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return -1;
	*i += len;
	return cp;
}

static int
valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;)
		if (next_utf8(s, n, &i) < 0)
			return 0;
	return 1;
}

static int
xml_char(long c)
{
	return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
		(c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const entities[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
	char	   *out = malloc(TF_XML_ESCAPED_MAX(size));
	size_t		n = tf_xml_escape(out, (const char *) data, size);
	const unsigned char *o = (const unsigned char *) out;

	if (n >= TF_XML_ESCAPED_MAX(size) || out[n] != '\0' || strlen(out) != n)
		abort();
	for (size_t i = 0; i < n; i++)
	{
		if (o[i] == '<' || o[i] == '>' || o[i] == '"' || o[i] == '\'' ||
			(o[i] < 0x20 && o[i] != '\t' && o[i] != '\n' && o[i] != '\r'))
			abort();
		if (o[i] == '&')
		{
			int			known = 0;

			for (size_t e = 0; e < sizeof(entities) / sizeof(entities[0]); e++)
				if (strncmp(out + i, entities[e], strlen(entities[e])) == 0)
					known = 1;
			if (!known)
				abort();
		}
	}
	if (valid_utf8(data, size))
	{
		size_t		i = 0;

		while (i < n)
		{
			long		c = next_utf8(o, n, &i);

			if (c < 0 || !xml_char(c))
				abort();
		}
	}
	free(out);
	return 0;
}
