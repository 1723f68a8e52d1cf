/*
 * weight_file.h
 *		A model's packed weights as one file, to be mapped read-only and
 *		shared by every backend (the page cache holds one copy).  No
 *		postgres.h: the format is written and checked here, the file itself
 *		is the glue's (weight_cache.c).
 *
 * Layout: a header (TF_WFILE_HEADER bytes: magic, format version, build
 * tag, fingerprint, dimensions, sizes, checksum), a table of every weight
 * pointer of TfWeights as an offset into the arena and a dtype, then the
 * arena (the packed weights as BuildModelWeights laid them out), at a
 * page-aligned offset so its 64-byte alignment survives mapping.  The
 * checksum covers every byte after it.
 */
#ifndef WEIGHT_FILE_H
#define WEIGHT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define TF_WFILE_HEADER 4096
#define TF_WFILE_ALIGN 4096

/* 64-bit checksum of n bytes (xxHash64's rounds, 4 lanes) */
uint64_t	tf_checksum64(const void *p, size_t n, uint64_t seed);

/* Bytes of the file of model m with an arena of arena_len bytes. */
size_t		tf_wfile_size(const TfModel *m, size_t arena_len);

/*
 * Write the file of model m, whose weight pointers all point into
 * [arena, arena + arena_len), to out (tf_wfile_size bytes).  build: the
 * build tag (tf_wfile_build_tag); fingerprint: the version of the model's
 * rows it was built from.  Returns NULL, or why it cannot (a pointer
 * outside the arena).  The arena may already be in place in out (at
 * tf_wfile_size(m, 0) bytes): it is then not copied.
 */
const char *tf_wfile_write(void *out, size_t len, const TfModel *m, const void *arena,
						   size_t arena_len, const char *build, uint64_t fingerprint);

/*
 * Check a file of len bytes (mapped at a page boundary) against the
 * configuration, the build tag and the fingerprint, and point the weights
 * of m (m->cfg set) into it: enc and dec are m->cfg.enc_layers and
 * m->cfg.dec_layers layer structs the caller provides.  Every offset is
 * checked against the arena and the size its field needs; with verify,
 * the checksum too.  Returns NULL, or why the file is not to be used.
 */
const char *tf_wfile_open(const void *file, size_t len, TfModel *m, TfLayerWeights *enc,
						  TfLayerWeights *dec, const char *build, uint64_t fingerprint,
						  int verify);

/*
 * For fuzzing: make the header of a file of len bytes consistent with m,
 * build and fingerprint (magic, sizes, dimensions; no checksum), so that
 * tf_wfile_open(..., verify 0) meets the field table and the arena as
 * they are.  Returns 0, or -1 if len cannot hold the header and table.
 */
int			tf_wfile_fix_header(void *file, size_t len, const TfModel *m, const char *build,
								uint64_t fingerprint);

/* The fingerprint stored in a file's header, if it has one; 0 if not. */
uint64_t	tf_wfile_fingerprint(const void *file, size_t len);

/* This build's tag: what the layout depends on (format, panels, CPU family, byte order). */
const char *tf_wfile_build_tag(void);

#endif							/* WEIGHT_FILE_H */
