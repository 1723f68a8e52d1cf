/*
 * xml_text.c
 *		Text as XML character data.  No postgres.h.
 */
#include "xml_text.h"

#include <string.h>

#define REPLACEMENT "\xEF\xBF\xBD"		/* U+FFFD */

size_t
tf_xml_escape(char *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		o = 0;

	for (size_t i = 0; i < len; i++)
	{
		const char *rep = NULL;

		switch (p[i])
		{
			case '&':
				rep = "&amp;";
				break;
			case '<':
				rep = "&lt;";
				break;
			case '>':
				rep = "&gt;";
				break;
			case '"':
				rep = "&quot;";
				break;
			case '\'':
				rep = "&#39;";
				break;
			default:
				if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
					rep = REPLACEMENT;
				/* U+FFFE and U+FFFF (EF BF BE, EF BF BF): noncharacters XML forbids */
				else if (p[i] == 0xEF && i + 2 < len && p[i + 1] == 0xBF && (p[i + 2] & 0xFE) == 0xBE)
				{
					rep = REPLACEMENT;
					i += 2;
				}
		}
		if (rep)
		{
			size_t		n = strlen(rep);

			memcpy(out + o, rep, n);
			o += n;
		}
		else
			out[o++] = (char) p[i];
	}
	out[o] = '\0';
	return o;
}
