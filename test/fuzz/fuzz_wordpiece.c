/*
 * libFuzzer harness for BERT's WordPiece tokenizer (src/core/wordpiece.c)
 * outside the server: the first byte picks the options (lowercase,
 * strip_accents, CJK spacing, special tokens), then a vocabulary (vocab.txt,
 * untrusted: it comes from a model directory or a table row) up to a NUL
 * byte, then the text.  Every token must be an id of the vocabulary whose
 * string it points to; no more tokens than characters + 1; decoding the ids
 * back must work; abort() otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "wordpiece.h"
#include "fuzz_arena.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	TfWordPieceOptions o;
	TfWordPiece *wp;
	const char *vocab;
	const char *nul;
	const char *text;
	size_t		vlen,
				tlen;
	char		err[256];
	SpmEncoding enc;

	if (size < 2 || size > (1 << 20))
		return 0;
	memset(&o, 0, sizeof(o));
	o.clean_text = (data[0] & 1) != 0;
	o.lowercase = (data[0] & 2) != 0;
	o.strip_accents = (data[0] >> 2) % 3 - 1;
	o.handle_chinese_chars = (data[0] & 16) != 0;
	o.max_input_chars_per_word = (data[0] & 32) ? 3 : 100;
	strcpy(o.unk_token, "[UNK]");
	strcpy(o.prefix, "##");
	vocab = (const char *) data + 1;
	nul = memchr(vocab, '\0', size - 1);
	if (nul == NULL)
		return 0;
	vlen = (size_t) (nul - vocab);
	text = nul + 1;
	tlen = size - 1 - vlen - 1;
	wp = tf_wordpiece_load(vocab, vlen, &o, &a, err, sizeof(err));
	if (wp != NULL)
	{
		if (data[0] & 64)
		{
			const char *sp[] = {"[UNK]", "[MASK]", "[CLS]"};
			int			n = 1;

			/* the declared specials must be in the vocabulary; those that are not are refused */
			if (tf_wordpiece_id(wp, "[MASK]", 6) >= 0)
				n = 2;
			if (n == 2 && tf_wordpiece_id(wp, "[CLS]", 5) >= 0)
				n = 3;
			if (tf_wordpiece_set_specials(wp, n, sp, &a) != NULL)
				abort();
		}
		if (tf_wordpiece_encode(wp, text, tlen, &a, &enc))
		{
			int32_t    *ids = arena_alloc(&arena, sizeof(int32_t) * (enc.ntokens + 1));
			size_t		out_len;

			if ((size_t) enc.ntokens > tlen + 1)
				abort();
			for (int i = 0; i < enc.ntokens; i++)
			{
				int			id = enc.tokens[i].id;

				if (id < 0 || id >= wp->ntokens || enc.tokens[i].str != wp->token[id] ||
					enc.tokens[i].len != wp->token_len[id])
					abort();
				ids[i] = id;
			}
			if (tf_wordpiece_decode(wp, enc.ntokens, ids, NULL, &a, &out_len) == NULL)
				abort();
		}
	}
	arena_free(&arena);
	return 0;
}
