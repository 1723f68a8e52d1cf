/*
 * protobuf.h
 *		A minimal reader of the protocol buffers wire format, enough for the
 *		SentencePiece ModelProto.  No postgres.h; no allocation.
 *
 * Every read is bounds-checked against the buffer: a truncated or hostile
 * input makes pb_next_field() return PB_ERROR, never read past the end.
 */
#ifndef PROTOBUF_H
#define PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

enum
{
	PB_VARINT = 0,
	PB_FIXED64 = 1,
	PB_BYTES = 2,				/* length-delimited: strings, bytes, messages */
	PB_FIXED32 = 5
};

typedef struct PbReader
{
	const uint8_t *p;
	const uint8_t *end;
} PbReader;

typedef struct PbField
{
	uint32_t	number;
	int			wire_type;
	uint64_t	varint;			/* PB_VARINT, and PB_FIXED32/64 as integers */
	const uint8_t *data;		/* PB_BYTES */
	size_t		len;			/* PB_BYTES */
} PbField;

#define PB_END		0
#define PB_FIELD	1
#define PB_ERROR	(-1)

static inline PbReader
pb_reader(const void *data, size_t len)
{
	PbReader	r;

	r.p = (const uint8_t *) data;
	r.end = r.p + len;
	return r;
}

/* Read the next field: PB_FIELD, PB_END at the end of the buffer, or PB_ERROR. */
int			pb_next_field(PbReader *r, PbField *f);

/* A PB_FIXED32 field's value as float. */
float		pb_float(const PbField *f);

#endif							/* PROTOBUF_H */
