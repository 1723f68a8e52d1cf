/*
 * torch_zip.h
 *		The central directory of a ZIP archive, as torch.save writes it
 *		(PyTorch's checkpoints since 1.6 are ZIP archives of stored, that
 *		is uncompressed, entries; ZIP64 when large).  Part of the core: no
 *		postgres.h, so that a fuzzer drives it outside the server
 *		(test/fuzz/fuzz_torch_zip.c).
 *
 * The file is read through a callback, never held in memory: a checkpoint
 * may be several gigabytes and only its directory is needed here.
 */
#ifndef TORCH_ZIP_H
#define TORCH_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "spm.h"				/* SpmAlloc */

/* far beyond a checkpoint (a few thousand entries for the largest) */
#define TF_ZIP_MAX_ENTRIES 1000000
#define TF_ZIP_MAX_NAME 4096

/*
 * Read len bytes at offset into buf: 0, or -1 on a short read or an error
 * (the reader may keep its own message; the caller's err then only says
 * what was being read).
 */
typedef int (*TfReadAt) (void *ctx, uint64_t offset, void *buf, size_t len);

typedef struct TfZipEntry
{
	char	   *name;			/* NUL-terminated, as stored (no NUL inside) */
	uint64_t	data_offset;	/* of the entry's first byte in the file */
	uint64_t	size;			/* stored: compressed size == size */
	uint32_t	crc32;			/* as the directory gives it (not checked here) */
} TfZipEntry;

/*
 * Read the central directory of a file of file_size bytes: the end of
 * central directory record (and its ZIP64 record when the archive has
 * one), every directory entry and every entry's local header.  Only
 * single-disk archives of stored, unencrypted entries whose sizes the
 * directory gives are accepted; every offset and size is checked against
 * the file (an entry's data lies before the directory), names are unique,
 * at most TF_ZIP_MAX_NAME bytes and without NUL, and the local header
 * agrees with the directory.  Returns the number of entries, *out
 * allocated from a and sorted by name (bytewise; see tf_zip_find), or -1
 * with a sentence in err (errlen bytes).
 */
int			tf_zip_directory(TfReadAt read, void *ctx, uint64_t file_size, const SpmAlloc *a,
							 TfZipEntry **out, char *err, size_t errlen);

/* The entry named name among n sorted by tf_zip_directory, or NULL. */
const TfZipEntry *tf_zip_find(const TfZipEntry *entries, int n, const char *name);

/*
 * CRC-32 as zlib computes it (and ZIP stores it): crc 0 to start, then
 * the previous result to continue over more bytes.
 */
uint32_t	tf_crc32(uint32_t crc, const void *buf, size_t len);

/*
 * A name from a file, fit for a message: valid UTF-8 and printable ASCII
 * kept, anything else a '?', cut with "..." to dstlen bytes with the NUL.
 */
void		tf_zip_quote(char *dst, size_t dstlen, const char *s, size_t len);

#endif							/* TORCH_ZIP_H */
