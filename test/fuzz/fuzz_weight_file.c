/*
 * libFuzzer harness for the shared weights file reader (src/core/weight_file.c),
 * outside the server: make fuzz-weight-file.
 *
 * The first 8 bytes choose a small configuration; the rest is the file.
 * Its header is made consistent (tf_wfile_fix_header) and the checksum is
 * not verified, so the fuzzer works on what the checksum cannot vouch for
 * against a crafted file: the table of offsets and dtypes, and the arena.
 * Whatever tf_wfile_open accepts is then used as the server would use it:
 * embeddings, the encoder and greedy decoding over every weight, under
 * AddressSanitizer, so an accepted offset that lets a kernel read outside
 * the file is a crash here.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "weight_file.h"
#include "fuzz_arena.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	TfModel		m;
	TfLayerWeights enc[2],
				dec[2];
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	size_t		len;
	char	   *file;

	if (size < 8 || size > (16u << 20))
		return 0;
	memset(&m, 0, sizeof(m));
	m.cfg.vocab = m.cfg.src_vocab = 2 + data[0] % 40;
	m.cfg.enc_heads = m.cfg.dec_heads = 1 + data[1] % 2;
	m.cfg.d_model = m.cfg.enc_heads * (1 + data[2] % 8);
	m.cfg.enc_layers = data[3] % 3;
	m.cfg.dec_layers = 1 + data[4] % 2;
	m.cfg.enc_ffn = m.cfg.dec_ffn = 1 + data[5] % 24;
	m.cfg.max_pos = 4 + data[6] % 8;
	m.cfg.final_norm = data[7] & 1;
	m.cfg.pre_norm = (data[7] >> 1) & 1;
	m.cfg.activation = (TfActivation) ((data[7] >> 2) % 3);
	m.cfg.scale_embedding = true;
	m.cfg.eos_id = 0;
	m.cfg.pad_id = m.cfg.decoder_start_id = m.cfg.vocab - 1;
	m.cfg.ln_eps = 1e-5f;
	if (m.cfg.enc_layers > 2)
		m.cfg.enc_layers = 2;

	/* the file, page-aligned as a mapping is */
	len = size - 8;
	file = aligned_alloc(4096, (len + 4095) & ~(size_t) 4095);
	if (file == NULL)
		return 0;
	memcpy(file, data + 8, len);
	if (tf_wfile_fix_header(file, len, &m, "fuzz", 1) == 0 &&
		tf_wfile_open(file, len, &m, enc, dec, "fuzz", 1, 0) == NULL)
	{
		int			src[3] = {1 % m.cfg.vocab, 0, 0};
		TfDecodeOptions opt;
		int		   *out = NULL;
		float	   *x = arena_alloc(&arena, sizeof(float) * 3 * m.cfg.d_model);

		memset(&opt, 0, sizeof(opt));
		opt.beam_size = 1;
		opt.max_length = 4;
		opt.length_penalty = 1.0;
		opt.repetition_penalty = 1.0;
		opt.forced_eos_id = -1;
		opt.forced_bos_id = -1;
		tf_embed(&m, 3, src, x);
		tf_encode(&m, 3, src, x, &a);
		(void) tf_translate(&m, 3, src, &opt, &out, &a, NULL);
	}
	free(file);
	arena_free(&arena);
	return 0;
}
