/*
 * Seeds for fuzz_weight_file: valid shared weights files of small random
 * models, each prefixed with the 8 configuration bytes the harness reads.
 *   make test/fuzz/seeds_weight_file (writes test/fuzz/seeds_weight_file/seed-N)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "weight_file.h"

static char *arena;
static size_t used;

static void *
take(size_t bytes, int fp32)
{
	char	   *p = arena + used;

	used += (bytes + 63) & ~(size_t) 63;
	if (fp32)
		for (size_t i = 0; i < bytes / 4; i++)
			((float *) p)[i] = ((float) rand() / RAND_MAX - 0.5f) * 0.5f;
	return p;
}

static TfMatrix
matrix(size_t rows, size_t cols, TfDType dt)
{
	TfMatrix	m;

	m.dtype = dt;
	m.data = take(tf_packed_size(rows, cols, dt), dt == TF_F32);
	return m;
}

static void
attn(TfAttnWeights *A, int d, TfDType dt)
{
	A->q_w = matrix(d, d, dt);
	A->q_b = take(4 * d, 1);
	A->k_w = matrix(d, d, dt);
	A->k_b = take(4 * d, 1);
	A->v_w = matrix(d, d, dt);
	A->v_b = take(4 * d, 1);
	A->o_w = matrix(d, d, dt);
	A->o_b = take(4 * d, 1);
	A->ln_g = take(4 * d, 1);
	A->ln_b = take(4 * d, 1);
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "test/fuzz/seeds_weight_file";

	for (int seed = 0; seed < 4; seed++)
	{
		unsigned char cfgb[8] = {(unsigned char) (6 + seed), (unsigned char) (seed & 1), 3, (unsigned char) (seed % 3),
		(unsigned char) (seed & 1), 7, 2, (unsigned char) seed};
		TfModel		m;
		TfLayerWeights enc[2],
					dec[2];
		TfDType		dt = (TfDType) (seed % 4);
		size_t		len;
		char	   *file,
					path[512];
		FILE	   *f;

		srand(seed + 1);
		memset(&m, 0, sizeof(m));
		memset(enc, 0, sizeof(enc));
		memset(dec, 0, sizeof(dec));
		/* as fuzz_weight_file.c reads the 8 bytes */
		m.cfg.vocab = m.cfg.src_vocab = 2 + cfgb[0] % 40;
		m.cfg.enc_heads = m.cfg.dec_heads = 1 + cfgb[1] % 2;
		m.cfg.d_model = m.cfg.enc_heads * (1 + cfgb[2] % 8);
		m.cfg.enc_layers = cfgb[3] % 3 > 2 ? 2 : cfgb[3] % 3;
		m.cfg.dec_layers = 1 + cfgb[4] % 2;
		m.cfg.enc_ffn = m.cfg.dec_ffn = 1 + cfgb[5] % 24;
		m.cfg.max_pos = 4 + cfgb[6] % 8;
		m.cfg.final_norm = cfgb[7] & 1;
		arena = aligned_alloc(64, 1 << 20);
		memset(arena, 0, 1 << 20);
		used = 0;
		{
			int			d = m.cfg.d_model,
						ffn = m.cfg.enc_ffn;

			m.w.enc_embed = matrix(m.cfg.vocab, d, dt);
			m.w.dec_embed = m.w.lm_head = m.w.enc_embed;
			m.w.logits_bias = seed & 1 ? take(4 * m.cfg.vocab, 1) : NULL;
			m.w.enc_pos = take(4 * (size_t) m.cfg.max_pos * d, 1);
			m.w.dec_pos = m.w.enc_pos;
			m.w.enc = enc;
			m.w.dec = dec;
			for (int l = 0; l < m.cfg.enc_layers; l++)
			{
				attn(&enc[l].self_attn, d, dt);
				enc[l].fc1_w = matrix(ffn, d, dt);
				enc[l].fc1_b = take(4 * ffn, 1);
				enc[l].fc2_w = matrix(d, ffn, dt);
				enc[l].fc2_b = take(4 * d, 1);
				enc[l].ln_g = take(4 * d, 1);
				enc[l].ln_b = take(4 * d, 1);
			}
			for (int l = 0; l < m.cfg.dec_layers; l++)
			{
				attn(&dec[l].self_attn, d, dt);
				attn(&dec[l].cross_attn, d, dt);
				dec[l].fc1_w = matrix(ffn, d, dt);
				dec[l].fc1_b = take(4 * ffn, 1);
				dec[l].fc2_w = matrix(d, ffn, dt);
				dec[l].fc2_b = take(4 * d, 1);
				dec[l].ln_g = take(4 * d, 1);
				dec[l].ln_b = take(4 * d, 1);
			}
			if (m.cfg.final_norm)
			{
				m.w.enc_norm_g = take(4 * d, 1);
				m.w.enc_norm_b = take(4 * d, 1);
				m.w.dec_norm_g = take(4 * d, 1);
				m.w.dec_norm_b = take(4 * d, 1);
			}
		}
		len = tf_wfile_size(&m, used);
		file = calloc(1, len);
		if (tf_wfile_write(file, len, &m, arena, used, "fuzz", 1) != NULL)
			return 1;
		snprintf(path, sizeof(path), "%s/seed-%d", dir, seed);
		f = fopen(path, "wb");
		if (f == NULL || fwrite(cfgb, 1, 8, f) != 8 || fwrite(file, 1, len, f) != len || fclose(f) != 0)
			return 1;
		free(file);
		free(arena);
	}
	return 0;
}
