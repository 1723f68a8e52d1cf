/*
 * protobuf.c
 *		Protocol buffers wire format: varints, fixed-width and
 *		length-delimited fields.  Groups (wire types 3, 4) are deprecated and
 *		absent from SentencePiece models, so they are an error.
 */
#include "protobuf.h"

#include <string.h>

static int
read_varint(PbReader *r, uint64_t *out)
{
	uint64_t	v = 0;

	for (int shift = 0; shift < 64; shift += 7)
	{
		uint8_t		b;

		if (r->p >= r->end)
			return PB_ERROR;
		b = *r->p++;
		v |= (uint64_t) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
		{
			*out = v;
			return PB_FIELD;
		}
	}
	return PB_ERROR;			/* more than 10 bytes */
}

int
pb_next_field(PbReader *r, PbField *f)
{
	uint64_t	key;

	if (r->p >= r->end)
		return PB_END;
	if (read_varint(r, &key) != PB_FIELD)
		return PB_ERROR;

	f->number = (uint32_t) (key >> 3);
	f->wire_type = (int) (key & 7);
	f->varint = 0;
	f->data = NULL;
	f->len = 0;
	if (f->number == 0 || (key >> 3) > 0x1fffffff)
		return PB_ERROR;

	switch (f->wire_type)
	{
		case PB_VARINT:
			return read_varint(r, &f->varint);
		case PB_FIXED64:
			if (r->end - r->p < 8)
				return PB_ERROR;
			for (int i = 7; i >= 0; i--)
				f->varint = (f->varint << 8) | r->p[i];
			r->p += 8;
			return PB_FIELD;
		case PB_FIXED32:
			if (r->end - r->p < 4)
				return PB_ERROR;
			for (int i = 3; i >= 0; i--)
				f->varint = (f->varint << 8) | r->p[i];
			r->p += 4;
			return PB_FIELD;
		case PB_BYTES:
			{
				uint64_t	len;

				if (read_varint(r, &len) != PB_FIELD ||
					len > (uint64_t) (r->end - r->p))
					return PB_ERROR;
				f->data = r->p;
				f->len = (size_t) len;
				r->p += len;
				return PB_FIELD;
			}
		default:
			return PB_ERROR;
	}
}

float
pb_float(const PbField *f)
{
	uint32_t	bits = (uint32_t) f->varint;
	float		v;

	memcpy(&v, &bits, sizeof(v));
	return v;
}
