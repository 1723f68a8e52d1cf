/*
 * fuzz_spm_model.c
 *		libFuzzer harness for the SentencePiece model reader: any bytes are
 *		parsed as a model; a model that loads is then used to encode and
 *		decode a few strings.  Nothing may crash, hang or read out of bounds.
 *
 *	 make fuzz-spm FUZZ_SECONDS=600   (clang with -fsanitize=fuzzer,address,undefined)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spm.h"
#include "fuzz_arena.h"

static const char *const samples[] = {
	"Hello world", "  Zwei junge   Männer\tim Freien. ", "中华人民共和国 ＡＢＣ①", "e\xCC\x81 \xF0\x9F\x99\x82",
	"\xFF\xC3 bad \xED\xA0\x80", "",
};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	char		err[256];
	SpmModel   *m = spm_load(data, size, &a, err, sizeof(err));

	if (m != NULL)
	{
		for (size_t s = 0; s < sizeof(samples) / sizeof(samples[0]); s++)
		{
			SpmEncoding enc;

			if (spm_encode(m, samples[s], strlen(samples[s]), &a, &enc))
			{
				const char **strs = arena_alloc(&arena, sizeof(char *) * (enc.ntokens + 1));
				uint32_t   *lens = arena_alloc(&arena, sizeof(uint32_t) * (enc.ntokens + 1));
				size_t		len;

				for (int i = 0; i < enc.ntokens; i++)
				{
					if (enc.tokens[i].id < 0 || enc.tokens[i].id >= m->npieces)
						abort();
					strs[i] = enc.tokens[i].str;
					lens[i] = enc.tokens[i].len;
				}
				(void) spm_decode_pieces(m, enc.ntokens, strs, lens, &a, &len);
			}
		}
	}
	arena_free(&arena);
	return 0;
}
