/*
 * torch_zip.c
 *		The central directory of a ZIP archive of stored entries, read
 *		with every offset and size checked against the file, for PyTorch's
 *		checkpoints (torch_checkpoint.c).  No postgres.h.
 *
 * The format (PKWARE's APPNOTE.TXT): the archive ends with the end of
 * central directory record (EOCD), possibly followed by a comment of up to
 * 65535 bytes and preceded, in a ZIP64 archive, by a ZIP64 EOCD locator
 * that points at a ZIP64 EOCD record with the 64-bit counts and offsets.
 * The EOCD points at the central directory: one header per entry with its
 * sizes and the offset of its local header, which precedes its data.  The
 * local header's name and extra field may differ in length from the
 * directory's (PyTorch pads the local extra field so that data is aligned
 * to 64 bytes), so the data offset is only known from the local header.
 */
#include "torch_zip.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_LOCAL		0x04034b50
#define SIG_CENTRAL		0x02014b50
#define SIG_EOCD		0x06054b50
#define SIG_EOCD64		0x06064b50
#define SIG_LOCATOR64	0x07064b50

#define LOCAL_LEN		30
#define CENTRAL_LEN		46
#define EOCD_LEN		22
#define EOCD64_LEN		56
#define LOCATOR64_LEN	20
/* the EOCD and the longest comment */
#define EOCD_SEARCH		(EOCD_LEN + 65535)

/* bits of the general purpose flags */
#define FLAG_ENCRYPTED	0x0001
#define FLAG_DESCRIPTOR 0x0008
#define FLAG_STRONG		0x0040
#define FLAG_CD_MASKED	0x2000

/* the central directory is read through a buffer of this many bytes */
#define CD_BUF			65536

static const uint32_t crc_table[256] = {
	0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f,
	0xe963a535, 0x9e6495a3, 0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988,
	0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91, 0x1db71064, 0x6ab020f2,
	0xf3b97148, 0x84be41de, 0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
	0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec, 0x14015c4f, 0x63066cd9,
	0xfa0f3d63, 0x8d080df5, 0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172,
	0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b, 0x35b5a8fa, 0x42b2986c,
	0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
	0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423,
	0xcfba9599, 0xb8bda50f, 0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924,
	0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d, 0x76dc4190, 0x01db7106,
	0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
	0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb, 0x086d3d2d,
	0x91646c97, 0xe6635c01, 0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e,
	0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457, 0x65b0d9c6, 0x12b7e950,
	0x8bbeb8ea, 0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
	0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7,
	0xa4d1c46d, 0xd3d6f4fb, 0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0,
	0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9, 0x5005713c, 0x270241aa,
	0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
	0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81,
	0xb7bd5c3b, 0xc0ba6cad, 0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a,
	0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683, 0xe3630b12, 0x94643b84,
	0x0d6d6a3e, 0x7a6a5aa8, 0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
	0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe, 0xf762575d, 0x806567cb,
	0x196c3671, 0x6e6b06e7, 0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc,
	0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5, 0xd6d6a3e8, 0xa1d1937e,
	0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
	0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55,
	0x316e8eef, 0x4669be79, 0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236,
	0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f, 0xc5ba3bbe, 0xb2bd0b28,
	0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
	0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a, 0x9c0906a9, 0xeb0e363f,
	0x72076785, 0x05005713, 0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38,
	0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21, 0x86d3d2d4, 0xf1d4e242,
	0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
	0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69,
	0x616bffd3, 0x166ccf45, 0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2,
	0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db, 0xaed16a4a, 0xd9d65adc,
	0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
	0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605, 0xcdd70693,
	0x54de5729, 0x23d967bf, 0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94,
	0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

uint32_t
tf_crc32(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
	return ~crc;
}

typedef struct Zip
{
	TfReadAt	read;
	void	   *ctx;
	uint64_t	size;
	const SpmAlloc *a;
	char	   *err;
	size_t		errlen;
	bool		failed;
	/* the central directory, [cd_begin, cd_end), through a buffer */
	uint64_t	cd_begin;
	uint64_t	cd_end;
	unsigned char *buf;
	uint64_t	buf_off;
	size_t		buf_len;
} Zip;

static int	fail(Zip *z, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static int
fail(Zip *z, const char *fmt,...)
{
	va_list		ap;

	if (!z->failed)
	{
		va_start(ap, fmt);
		vsnprintf(z->err, z->errlen, fmt, ap);
		va_end(ap);
		z->failed = true;
	}
	return -1;
}

static uint16_t
le16(const unsigned char *p)
{
	return (uint16_t) (p[0] | (p[1] << 8));
}

static uint32_t
le32(const unsigned char *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static uint64_t
le64(const unsigned char *p)
{
	return (uint64_t) le32(p) | ((uint64_t) le32(p + 4) << 32);
}

/* Does [off, off + len) lie within [0, limit)?  (No overflow.) */
static bool
within(uint64_t off, uint64_t len, uint64_t limit)
{
	return len <= limit && off <= limit - len;
}

void
tf_zip_quote(char *dst, size_t dstlen, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *) s;
	size_t		o = 0,
				i = 0;

	if (dstlen == 0)
		return;
	while (i < len)
	{
		unsigned char c = u[i];
		size_t		k = 0;

		/* the length of a valid UTF-8 sequence at i, 0 if none */
		if (c >= 0x20 && c < 0x7F)
			k = 1;
		else if (c >= 0xC2 && c <= 0xF4)
		{
			size_t		need = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
			uint32_t	cp = c & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07);

			k = need;
			for (size_t j = 1; j < need; j++)
			{
				if (i + j >= len || (u[i + j] & 0xC0) != 0x80)
				{
					k = 0;
					break;
				}
				cp = (cp << 6) | (u[i + j] & 0x3F);
			}
			if (k && ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
					  (cp >= 0xD800 && cp <= 0xDFFF)))
				k = 0;
		}
		/* room for it, or for "..." and the NUL */
		if (o + (k ? k : 1) + 4 > dstlen)
		{
			if (o + 4 <= dstlen)
			{
				memcpy(dst + o, "...", 3);
				o += 3;
			}
			break;
		}
		if (k)
			memcpy(dst + o, u + i, k);
		else
			dst[o] = '?';
		o += k ? k : 1;
		i += k ? k : 1;
	}
	dst[o < dstlen ? o : dstlen - 1] = '\0';
}

/* Read len bytes at off, which must lie within the file. */
static int
read_at(Zip *z, uint64_t off, void *buf, size_t len, const char *what)
{
	if (!within(off, len, z->size))
		return fail(z, "the %s at byte %llu lies outside the file of %llu bytes", what,
					(unsigned long long) off, (unsigned long long) z->size);
	if (len > 0 && z->read(z->ctx, off, buf, len) != 0)
		return fail(z, "cannot read the %s at byte %llu", what, (unsigned long long) off);
	return 0;
}

/* Read len bytes at off of the central directory, through the buffer. */
static int
cd_read(Zip *z, uint64_t off, void *dst, size_t len)
{
	if (!within(off, len, z->cd_end) || off < z->cd_begin)
		return fail(z, "the central directory ends inside an entry at byte %llu",
					(unsigned long long) off);
	if (len > CD_BUF)
		return read_at(z, off, dst, len, "central directory");
	if (off < z->buf_off || off + len > z->buf_off + z->buf_len)
	{
		uint64_t	n = z->cd_end - off;

		if (n > CD_BUF)
			n = CD_BUF;
		if (read_at(z, off, z->buf, (size_t) n, "central directory") != 0)
			return -1;
		z->buf_off = off;
		z->buf_len = (size_t) n;
	}
	memcpy(dst, z->buf + (off - z->buf_off), len);
	return 0;
}

static int
cmp_entry(const void *x, const void *y)
{
	return strcmp(((const TfZipEntry *) x)->name, ((const TfZipEntry *) y)->name);
}

const TfZipEntry *
tf_zip_find(const TfZipEntry *entries, int n, const char *name)
{
	TfZipEntry	key;

	if (n <= 0)
		return NULL;
	key.name = (char *) name;
	return bsearch(&key, entries, (size_t) n, sizeof(TfZipEntry), cmp_entry);
}

/*
 * The end of central directory record: the last signature in the file's
 * last EOCD_SEARCH bytes whose comment ends exactly at the end of the
 * file (a signature inside a comment does not end there).  Sets the
 * directory's bounds and *count.
 */
static int
find_directory(Zip *z, uint64_t *count)
{
	size_t		tail = z->size < EOCD_SEARCH ? (size_t) z->size : EOCD_SEARCH;
	uint64_t	base = z->size - tail;
	unsigned char *t;
	unsigned char *p = NULL;
	uint64_t	eocd,
				limit,
				disk,
				cd_disk,
				n_disk,
				n_total,
				cd_size,
				cd_off;

	if (z->size < EOCD_LEN)
		return fail(z, "the file is too short (%llu bytes) to be a ZIP archive", (unsigned long long) z->size);
	t = z->a->alloc(z->a->ctx, tail);
	if (read_at(z, base, t, tail, "end of the file") != 0)
		return -1;
	for (size_t i = tail - EOCD_LEN + 1; i-- > 0;)
		if (le32(t + i) == SIG_EOCD && i + EOCD_LEN + le16(t + i + 20) == tail)
		{
			p = t + i;
			break;
		}
	if (p == NULL)
		return fail(z, "the file is not a ZIP archive: it has no end of central directory record");
	eocd = base + (uint64_t) (p - t);
	disk = le16(p + 4);
	cd_disk = le16(p + 6);
	n_disk = le16(p + 8);
	n_total = le16(p + 10);
	cd_size = le32(p + 12);
	cd_off = le32(p + 16);
	limit = eocd;

	/* a ZIP64 archive: the locator right before the EOCD */
	if (eocd >= LOCATOR64_LEN)
	{
		unsigned char loc[LOCATOR64_LEN];
		unsigned char r[EOCD64_LEN];
		uint64_t	r_off;

		if (read_at(z, eocd - LOCATOR64_LEN, loc, LOCATOR64_LEN, "ZIP64 locator") != 0)
			return -1;
		if (le32(loc) == SIG_LOCATOR64)
		{
			if (le32(loc + 4) != 0 || le32(loc + 16) > 1)
				return fail(z, "the archive spans %u disks; only single-file archives are supported",
							(unsigned) le32(loc + 16));
			r_off = le64(loc + 8);
			if (!within(r_off, EOCD64_LEN, eocd - LOCATOR64_LEN))
				return fail(z, "the ZIP64 end of central directory record lies outside the file");
			if (read_at(z, r_off, r, EOCD64_LEN, "ZIP64 end of central directory record") != 0)
				return -1;
			if (le32(r) != SIG_EOCD64)
				return fail(z, "the ZIP64 locator points at byte %llu, where there is no ZIP64 end of central directory record",
							(unsigned long long) r_off);
			disk = le32(r + 16);
			cd_disk = le32(r + 20);
			n_disk = le64(r + 24);
			n_total = le64(r + 32);
			cd_size = le64(r + 40);
			cd_off = le64(r + 48);
			limit = r_off;
		}
	}
	if (disk != 0 || cd_disk != 0 || n_disk != n_total)
		return fail(z, "the archive spans several disks; only single-file archives are supported");
	if (n_total > TF_ZIP_MAX_ENTRIES)
		return fail(z, "the archive has %llu entries, more than %d", (unsigned long long) n_total,
					TF_ZIP_MAX_ENTRIES);
	if (!within(cd_off, cd_size, limit))
		return fail(z, "the central directory (%llu bytes at byte %llu) lies outside the file",
					(unsigned long long) cd_size, (unsigned long long) cd_off);
	/* every entry takes at least CENTRAL_LEN bytes: no count beyond the file */
	if (n_total > cd_size / CENTRAL_LEN)
		return fail(z, "the central directory of %llu bytes cannot hold %llu entries",
					(unsigned long long) cd_size, (unsigned long long) n_total);
	z->cd_begin = cd_off;
	z->cd_end = cd_off + cd_size;
	*count = n_total;
	return 0;
}

/*
 * The ZIP64 extended information extra field (id 0x0001) of a directory
 * entry: the 64-bit values of exactly those fields that are all ones in
 * the fixed header, in this order.
 */
static int
zip64_extra(Zip *z, const unsigned char *x, size_t xlen, const char *qname, uint64_t *usize,
			uint64_t *csize, uint64_t *lho, uint32_t *disk_start)
{
	size_t		off = 0;

	/* some writers pad the extra field with fewer than 4 bytes of zeros */
	while (off + 4 <= xlen)
	{
		uint16_t	id = le16(x + off);
		uint16_t	sz = le16(x + off + 2);
		const unsigned char *v = x + off + 4;
		size_t		need = 0;

		if (sz > xlen - off - 4)
			return fail(z, "the extra field of entry \"%s\" is malformed", qname);
		if (id == 0x0001)
		{
			if (*usize == 0xFFFFFFFF)
			{
				if (need + 8 > sz)
					return fail(z, "the ZIP64 extra field of entry \"%s\" is too short", qname);
				*usize = le64(v + need);
				need += 8;
			}
			if (*csize == 0xFFFFFFFF)
			{
				if (need + 8 > sz)
					return fail(z, "the ZIP64 extra field of entry \"%s\" is too short", qname);
				*csize = le64(v + need);
				need += 8;
			}
			if (*lho == 0xFFFFFFFF)
			{
				if (need + 8 > sz)
					return fail(z, "the ZIP64 extra field of entry \"%s\" is too short", qname);
				*lho = le64(v + need);
				need += 8;
			}
			if (*disk_start == 0xFFFF)
			{
				if (need + 4 > sz)
					return fail(z, "the ZIP64 extra field of entry \"%s\" is too short", qname);
				*disk_start = le32(v + need);
			}
		}
		off += 4 + (size_t) sz;
	}
	return 0;
}

/* The local header at lho of entry e: it must agree with the directory. */
static int
local_header(Zip *z, TfZipEntry *e, size_t nlen, uint64_t lho, uint16_t flags, uint32_t crc,
			 const char *qname, char *namebuf)
{
	unsigned char h[LOCAL_LEN];
	uint16_t	lflags;
	uint32_t	lcsize,
				lusize;
	uint64_t	hdr,
				data;

	if (!within(lho, LOCAL_LEN, z->cd_begin))
		return fail(z, "the local header of entry \"%s\" lies outside the archive's data", qname);
	if (read_at(z, lho, h, LOCAL_LEN, "local header") != 0)
		return -1;
	if (le32(h) != SIG_LOCAL)
		return fail(z, "entry \"%s\" points at byte %llu, where there is no local header", qname,
					(unsigned long long) lho);
	lflags = le16(h + 6);
	if ((lflags & (FLAG_ENCRYPTED | FLAG_STRONG)) != 0)
		return fail(z, "entry \"%s\" is encrypted; only plain entries are supported", qname);
	if (le16(h + 8) != 0)
		return fail(z, "entry \"%s\" is compressed (method %u) in its local header; only stored entries are supported",
					qname, (unsigned) le16(h + 8));
	if (le16(h + 26) != nlen)
		return fail(z, "the local header of entry \"%s\" names another entry", qname);
	/*
	 * Without a data descriptor (flag bit 3) the local header repeats CRC
	 * and sizes.  With one, they follow the data, and the directory's are
	 * used: a streaming writer did not know them, the directory does.
	 */
	lcsize = le32(h + 18);
	lusize = le32(h + 22);
	if ((lflags & FLAG_DESCRIPTOR) == 0 && (flags & FLAG_DESCRIPTOR) == 0 &&
		(le32(h + 14) != crc ||
		 (lcsize != 0xFFFFFFFF && lcsize != e->size) ||
		 (lusize != 0xFFFFFFFF && lusize != e->size)))
		return fail(z, "the local header of entry \"%s\" disagrees with the central directory", qname);
	/* the same name: a reader going by local headers must see the same archive */
	if (read_at(z, lho + LOCAL_LEN, namebuf, nlen, "local header") != 0)
		return -1;
	if (memcmp(namebuf, e->name, nlen) != 0)
		return fail(z, "the local header of entry \"%s\" names another entry", qname);
	/* the header, then the data, before the directory */
	hdr = LOCAL_LEN + (uint64_t) nlen + le16(h + 28);
	if (!within(lho, hdr, z->cd_begin))
		return fail(z, "the local header of entry \"%s\" lies outside the archive's data", qname);
	data = lho + hdr;
	if (!within(data, e->size, z->cd_begin))
		return fail(z, "the data of entry \"%s\" (%llu bytes at byte %llu) lies outside the archive's data",
					qname, (unsigned long long) e->size, (unsigned long long) data);
	e->data_offset = data;
	return 0;
}

int
tf_zip_directory(TfReadAt read, void *ctx, uint64_t file_size, const SpmAlloc *a,
				 TfZipEntry **out, char *err, size_t errlen)
{
	Zip			z = {0};
	uint64_t	count = 0,
				pos;
	TfZipEntry *entries;
	unsigned char *extra;
	char	   *namebuf;

	z.read = read;
	z.ctx = ctx;
	z.size = file_size;
	z.a = a;
	z.err = err;
	z.errlen = errlen;
	if (errlen > 0)
		err[0] = '\0';
	if (find_directory(&z, &count) != 0)
		return -1;
	z.buf = a->alloc(a->ctx, CD_BUF);
	z.buf_off = 0;
	z.buf_len = 0;
	extra = a->alloc(a->ctx, 65536);
	namebuf = a->alloc(a->ctx, TF_ZIP_MAX_NAME + 1);
	entries = a->alloc(a->ctx, sizeof(TfZipEntry) * (count ? count : 1));
	pos = z.cd_begin;
	for (uint64_t i = 0; i < count; i++)
	{
		unsigned char h[CENTRAL_LEN];
		TfZipEntry *e = &entries[i];
		uint16_t	flags,
					method,
					nlen,
					xlen,
					clen;
		uint32_t	disk_start;
		uint64_t	csize,
					usize,
					lho;
		char		qname[160];

		SPM_CHECK_INTERRUPTS(i);
		if (cd_read(&z, pos, h, CENTRAL_LEN) != 0)
			return -1;
		if (le32(h) != SIG_CENTRAL)
			return fail(&z, "entry %llu of the central directory (byte %llu) has no signature",
						(unsigned long long) i, (unsigned long long) pos);
		flags = le16(h + 8);
		method = le16(h + 10);
		csize = le32(h + 20);
		usize = le32(h + 24);
		nlen = le16(h + 28);
		xlen = le16(h + 30);
		clen = le16(h + 32);
		disk_start = le16(h + 34);
		lho = le32(h + 42);
		if (nlen == 0 || nlen > TF_ZIP_MAX_NAME)
			return fail(&z, "entry %llu of the central directory has a name of %u bytes (1 to %d expected)",
						(unsigned long long) i, (unsigned) nlen, TF_ZIP_MAX_NAME);
		e->name = a->alloc(a->ctx, (size_t) nlen + 1);
		if (cd_read(&z, pos + CENTRAL_LEN, e->name, nlen) != 0 ||
			cd_read(&z, pos + CENTRAL_LEN + nlen, extra, xlen) != 0)
			return -1;
		e->name[nlen] = '\0';
		tf_zip_quote(qname, sizeof(qname), e->name, nlen);
		if (memchr(e->name, '\0', nlen) != NULL)
			return fail(&z, "the name of entry \"%s\" contains a NUL byte", qname);
		if (zip64_extra(&z, extra, xlen, qname, &usize, &csize, &lho, &disk_start) != 0)
			return -1;
		if ((flags & (FLAG_ENCRYPTED | FLAG_STRONG | FLAG_CD_MASKED)) != 0)
			return fail(&z, "entry \"%s\" is encrypted; only plain entries are supported", qname);
		if (method != 0)
			return fail(&z, "entry \"%s\" is compressed (method %u); only stored entries are supported",
						qname, (unsigned) method);
		if (csize != usize)
			return fail(&z, "entry \"%s\" is stored in %llu bytes but has %llu; only stored entries are supported",
						qname, (unsigned long long) csize, (unsigned long long) usize);
		if (disk_start != 0)
			return fail(&z, "entry \"%s\" starts on disk %u; only single-file archives are supported",
						qname, (unsigned) disk_start);
		e->size = usize;
		e->crc32 = le32(h + 16);
		if (local_header(&z, e, nlen, lho, flags, e->crc32, qname, namebuf) != 0)
			return -1;
		pos += CENTRAL_LEN + (uint64_t) nlen + xlen + clen;
	}
	if (count > 1)
	{
		qsort(entries, (size_t) count, sizeof(TfZipEntry), cmp_entry);
		for (uint64_t i = 1; i < count; i++)
			if (strcmp(entries[i - 1].name, entries[i].name) == 0)
			{
				char		qname[160];

				tf_zip_quote(qname, sizeof(qname), entries[i].name, strlen(entries[i].name));
				return fail(&z, "the archive has two entries named \"%s\"", qname);
			}
	}
	*out = entries;
	return (int) count;
}
