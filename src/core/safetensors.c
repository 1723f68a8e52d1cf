/*
 * safetensors.c
 *		A bounds-checked reader of safetensors headers: a small JSON parser
 *		for exactly what the format needs.  No postgres.h.
 */
#include "safetensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct Parser
{
	const char *s;
	size_t		len;
	size_t		pos;
	const SpmAlloc *a;
	char	   *err;
	size_t		errlen;
	bool		failed;
} Parser;

static bool fail(Parser *p, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static bool
fail(Parser *p, const char *fmt,...)
{
	va_list		ap;

	if (!p->failed)
	{
		va_start(ap, fmt);
		vsnprintf(p->err, p->errlen, fmt, ap);
		va_end(ap);
		p->failed = true;
	}
	return false;
}

static void
skip_ws(Parser *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
							   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static bool
expect(Parser *p, char c)
{
	skip_ws(p);
	if (p->pos >= p->len || p->s[p->pos] != c)
		return fail(p, "The header is not valid JSON: '%c' expected at byte %zu.", c, p->pos);
	p->pos++;
	return true;
}

static int
hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static size_t
put_utf8(char *o, uint32_t c)
{
	if (c < 0x80)
	{
		o[0] = (char) c;
		return 1;
	}
	if (c < 0x800)
	{
		o[0] = (char) (0xC0 | (c >> 6));
		o[1] = (char) (0x80 | (c & 0x3F));
		return 2;
	}
	if (c < 0x10000)
	{
		o[0] = (char) (0xE0 | (c >> 12));
		o[1] = (char) (0x80 | ((c >> 6) & 0x3F));
		o[2] = (char) (0x80 | (c & 0x3F));
		return 3;
	}
	o[0] = (char) (0xF0 | (c >> 18));
	o[1] = (char) (0x80 | ((c >> 12) & 0x3F));
	o[2] = (char) (0x80 | ((c >> 6) & 0x3F));
	o[3] = (char) (0x80 | (c & 0x3F));
	return 4;
}

/* A JSON string, decoded into *out (NUL-terminated; out NULL: skipped). */
static bool
string(Parser *p, char **out, size_t *outlen)
{
	char	   *o = NULL;
	size_t		n = 0;

	skip_ws(p);
	if (p->pos >= p->len || p->s[p->pos] != '"')
		return fail(p, "The header is not valid JSON: a string expected at byte %zu.", p->pos);
	p->pos++;
	/* decoded, a string is never longer than its source */
	if (out)
		o = p->a->alloc(p->a->ctx, p->len - p->pos + 1);
	while (p->pos < p->len && p->s[p->pos] != '"')
	{
		unsigned char c = (unsigned char) p->s[p->pos++];

		if (c < 0x20)
			return fail(p, "The header is not valid JSON: a control character in a string at byte %zu.", p->pos - 1);
		if (c != '\\')
		{
			if (o)
				o[n] = (char) c;
			n++;
			continue;
		}
		if (p->pos >= p->len)
			break;
		c = (unsigned char) p->s[p->pos++];
		if (c == 'u')
		{
			uint32_t	cp = 0;

			for (int i = 0; i < 4; i++)
			{
				int			h = p->pos < p->len ? hex(p->s[p->pos]) : -1;

				if (h < 0)
					return fail(p, "The header is not valid JSON: a bad \\u escape at byte %zu.", p->pos);
				cp = cp * 16 + (uint32_t) h;
				p->pos++;
			}
			if (cp >= 0xD800 && cp < 0xDC00)
			{
				uint32_t	lo = 0;

				if (p->pos + 6 > p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
					return fail(p, "The header is not valid JSON: an unpaired surrogate at byte %zu.", p->pos);
				p->pos += 2;
				for (int i = 0; i < 4; i++)
				{
					int			h = hex(p->s[p->pos]);

					if (h < 0)
						return fail(p, "The header is not valid JSON: a bad \\u escape at byte %zu.", p->pos);
					lo = lo * 16 + (uint32_t) h;
					p->pos++;
				}
				if (lo < 0xDC00 || lo > 0xDFFF)
					return fail(p, "The header is not valid JSON: an unpaired surrogate at byte %zu.", p->pos);
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			}
			else if (cp >= 0xDC00 && cp <= 0xDFFF)
				return fail(p, "The header is not valid JSON: an unpaired surrogate at byte %zu.", p->pos);
			if (cp == 0)
				return fail(p, "The header has a \\u0000 in a string at byte %zu.", p->pos);
			if (o)
				n += put_utf8(o + n, cp);
			else
				n += 4;
			continue;
		}
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'n':
				c = '\n';
				break;
			case 'r':
				c = '\r';
				break;
			case 't':
				c = '\t';
				break;
			default:
				return fail(p, "The header is not valid JSON: a bad escape at byte %zu.", p->pos - 1);
		}
		if (o)
			o[n] = (char) c;
		n++;
	}
	if (p->pos >= p->len)
		return fail(p, "The header is not valid JSON: a string is not closed.");
	p->pos++;
	if (out)
	{
		o[n] = '\0';
		*out = o;
		*outlen = n;
	}
	return true;
}

/* A JSON number that must be a non-negative integer below 2^63. */
static bool
integer(Parser *p, int64_t *v, const char *what)
{
	uint64_t	x = 0;
	size_t		start;

	skip_ws(p);
	start = p->pos;
	if (p->pos < p->len && p->s[p->pos] == '-')
		return fail(p, "%s.", what);
	while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
	{
		if (x > (uint64_t) INT64_MAX / 10)
			return fail(p, "%s.", what);
		x = x * 10 + (uint64_t) (p->s[p->pos++] - '0');
		if (x > (uint64_t) INT64_MAX)
			return fail(p, "%s.", what);
	}
	if (p->pos == start || (p->pos - start > 1 && p->s[start] == '0') ||
		(p->pos < p->len && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E')))
		return fail(p, "%s.", what);
	*v = (int64_t) x;
	return true;
}

static bool value(Parser *p, int depth);

/* Skip any JSON value (the metadata, keys we do not use). */
static bool
value(Parser *p, int depth)
{
	char		c;

	if (depth > MAX_DEPTH)
		return fail(p, "The header nests deeper than %d.", MAX_DEPTH);
	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p, "The header is not valid JSON: it ends early.");
	c = p->s[p->pos];
	if (c == '"')
		return string(p, NULL, NULL);
	if (c == '{' || c == '[')
	{
		char		close = c == '{' ? '}' : ']';

		p->pos++;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == close)
		{
			p->pos++;
			return true;
		}
		for (;;)
		{
			if (c == '{' && !(string(p, NULL, NULL) && expect(p, ':')))
				return false;
			if (!value(p, depth + 1))
				return false;
			skip_ws(p);
			if (p->pos < p->len && p->s[p->pos] == ',')
			{
				p->pos++;
				continue;
			}
			return expect(p, close);
		}
	}
	if (p->len - p->pos >= 4 && (memcmp(p->s + p->pos, "true", 4) == 0 || memcmp(p->s + p->pos, "null", 4) == 0))
	{
		p->pos += 4;
		return true;
	}
	if (p->len - p->pos >= 5 && memcmp(p->s + p->pos, "false", 5) == 0)
	{
		p->pos += 5;
		return true;
	}
	if (c == '-' || (c >= '0' && c <= '9'))
	{
		/* a number: -? digits (. digits)? ([eE] [+-]? digits)? */
		size_t		d;

		if (c == '-')
			p->pos++;
		d = p->pos;
		while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
			p->pos++;
		if (p->pos == d)
			return fail(p, "The header is not valid JSON: a bad number at byte %zu.", d);
		if (p->pos < p->len && p->s[p->pos] == '.')
		{
			d = ++p->pos;
			while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
				p->pos++;
			if (p->pos == d)
				return fail(p, "The header is not valid JSON: a bad number at byte %zu.", d);
		}
		if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
		{
			p->pos++;
			if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
				p->pos++;
			d = p->pos;
			while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
				p->pos++;
			if (p->pos == d)
				return fail(p, "The header is not valid JSON: a bad number at byte %zu.", d);
		}
		return true;
	}
	return fail(p, "The header is not valid JSON: unexpected '%c' at byte %zu.", c, p->pos);
}

/* An array of non-negative integers, at most max of them. */
static bool
int_array(Parser *p, int64_t *v, int max, int *n, const char *what)
{
	*n = 0;
	if (!expect(p, '['))
		return fail(p, "%s.", what);
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == ']')
	{
		p->pos++;
		return true;
	}
	for (;;)
	{
		if (*n >= max || !integer(p, &v[(*n)++], what))
			return fail(p, "%s.", what);
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',')
		{
			p->pos++;
			continue;
		}
		if (!expect(p, ']'))
			return false;
		return true;
	}
}

/* One tensor's description: {"dtype": ..., "shape": [...], "data_offsets": [b, e]} */
static bool
tensor(Parser *p, TfSafetensor *t, uint64_t data_len)
{
	bool		have_dtype = false,
				have_shape = false,
				have_offsets = false;
	char		bad_shape[300],
				bad_offsets[300];

	snprintf(bad_shape, sizeof(bad_shape), "Tensor \"%.200s\" has a malformed shape", t->name);
	snprintf(bad_offsets, sizeof(bad_offsets), "Tensor \"%.200s\" has malformed data_offsets", t->name);
	skip_ws(p);
	if (p->pos >= p->len || p->s[p->pos] != '{')
		return fail(p, "Tensor \"%.200s\" is not described by an object.", t->name);
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == '}')
		p->pos++;
	else
		for (;;)
		{
			char	   *key;
			size_t		keylen;

			if (!string(p, &key, &keylen) || !expect(p, ':'))
				return false;
			if (strcmp(key, "dtype") == 0)
			{
				char	   *d;
				size_t		dlen;

				skip_ws(p);
				if (p->pos >= p->len || p->s[p->pos] != '"')
					return fail(p, "Tensor \"%.200s\" lacks dtype, shape or data_offsets.", t->name);
				if (!string(p, &d, &dlen))
					return false;
				if (dlen < sizeof(t->dtype))
					memcpy(t->dtype, d, dlen + 1);
				have_dtype = true;
			}
			else if (strcmp(key, "shape") == 0)
			{
				if (!int_array(p, t->shape, TF_SAFETENSORS_MAX_DIMS, &t->ndim, bad_shape))
					return false;
				have_shape = true;
			}
			else if (strcmp(key, "data_offsets") == 0)
			{
				int64_t		o[2];
				int			n;

				if (!int_array(p, o, 2, &n, bad_offsets) || n != 2)
					return fail(p, "%s.", bad_offsets);
				t->begin = (uint64_t) o[0];
				t->end = (uint64_t) o[1];
				have_offsets = true;
			}
			else if (!value(p, 2))
				return false;
			skip_ws(p);
			if (p->pos < p->len && p->s[p->pos] == ',')
			{
				p->pos++;
				continue;
			}
			if (!expect(p, '}'))
				return false;
			break;
		}
	if (!have_dtype || !have_shape || !have_offsets)
		return fail(p, "Tensor \"%.200s\" lacks dtype, shape or data_offsets.", t->name);
	if (t->begin > t->end || t->end > data_len)
		return fail(p, "The data of tensor \"%.200s\" lies outside the file.", t->name);
	return true;
}

/* Valid UTF-8, no overlong forms or surrogates (as PostgreSQL checks it). */
bool
tf_valid_utf8(const unsigned char *s, size_t n)
{
	size_t		i = 0;

	while (i < n)
	{
		unsigned char c = s[i];
		size_t		k;
		uint32_t	cp;

		if (c < 0x80)
		{
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			k = 1, cp = c & 0x1F;
		else if (c >= 0xE0 && c <= 0xEF)
			k = 2, cp = c & 0x0F;
		else if (c >= 0xF0 && c <= 0xF4)
			k = 3, cp = c & 0x07;
		else
			return false;
		for (size_t j = 1; j <= k; j++)
		{
			if (i + j >= n || (s[i + j] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
			(cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += k + 1;
	}
	return true;
}

int
tf_safetensors_header(const char *json, size_t hlen, uint64_t data_len, const SpmAlloc *a,
					  TfSafetensor **out, char *err, size_t errlen)
{
	Parser		p = {json, hlen, 0, a, err, errlen, false};
	TfSafetensor *t;
	int			n = 0;
	int			cap = 16;

	if (!tf_valid_utf8((const unsigned char *) json, hlen))
	{
		snprintf(err, errlen, "The header is not valid UTF-8.");
		return -1;
	}
	skip_ws(&p);
	if (p.pos >= p.len || json[p.pos] != '{')
	{
		snprintf(err, errlen, "The header is not a JSON object.");
		return -1;
	}
	p.pos++;
	t = a->alloc(a->ctx, sizeof(TfSafetensor) * cap);
	skip_ws(&p);
	if (p.pos < p.len && json[p.pos] == '}')
		p.pos++;
	else
		for (;;)
		{
			char	   *key;
			size_t		keylen;

			if (spm_interrupt_hook != NULL && (n & 255) == 0)
				spm_interrupt_hook();
			if (!string(&p, &key, &keylen) || !expect(&p, ':'))
				return -1;
			if (strcmp(key, "__metadata__") == 0)
			{
				if (!value(&p, 1))
					return -1;
			}
			else
			{
				if (n == cap)
				{
					TfSafetensor *bigger = a->alloc(a->ctx, sizeof(TfSafetensor) * cap * 2);

					memcpy(bigger, t, sizeof(TfSafetensor) * cap);
					t = bigger;
					cap *= 2;
				}
				if (n >= TF_SAFETENSORS_MAX_TENSORS)
				{
					snprintf(err, errlen, "The header describes more than %d tensors.", TF_SAFETENSORS_MAX_TENSORS);
					return -1;
				}
				memset(&t[n], 0, sizeof(TfSafetensor));
				t[n].name = key;
				if (!tensor(&p, &t[n], data_len))
					return -1;
				n++;
			}
			skip_ws(&p);
			if (p.pos < p.len && json[p.pos] == ',')
			{
				p.pos++;
				continue;
			}
			if (!expect(&p, '}'))
				return -1;
			break;
		}
	skip_ws(&p);
	if (p.pos != p.len)
	{
		snprintf(err, errlen, "The header is not valid JSON: text after the object at byte %zu.", p.pos);
		return -1;
	}
	*out = t;
	return n;
}
