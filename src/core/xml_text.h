/*
 * xml_text.h
 *		Text as XML character data, for the SVG pictures' labels and titles.
 *		Part of the core: no postgres.h.
 */
#ifndef XML_TEXT_H
#define XML_TEXT_H

#include <stddef.h>

/* Output bytes tf_xml_escape needs at most for len input bytes, its NUL included. */
#define TF_XML_ESCAPED_MAX(len) ((len) * 6 + 1)

/*
 * s (len bytes of UTF-8) as XML 1.0 character data into out, which has
 * TF_XML_ESCAPED_MAX(len) bytes: & < > " ' become entities; characters XML
 * forbids (C0 controls other than tab, LF and CR; U+FFFE and U+FFFF)
 * become U+FFFD.  Returns the bytes written, not counting the NUL.
 */
size_t		tf_xml_escape(char *out, const char *s, size_t len);

#endif
