/*
 * tokenizer_share.c
 *		Tokenizers shared between backends through mapped files, as the
 *		weights are (weight_cache.c: names, fingerprints, sweeping): this
 *		layer calls the builder (tokenizer.c), never the reverse.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "tokenizer.h"
#include "tokenizer_share.h"
#include "weight_cache.h"
#include "weight_file.h"

/* ---------------------------------------------------------- tokenizers */

/*
 * A tokenizer is a web of pointers (pieces, prefix maps, the vocabulary),
 * so its file is built in place at a fixed address: the builder maps the
 * new file there and builds the tokenizer into it with a bump allocator;
 * every backend maps the file at the same address (MAP_FIXED_NOREPLACE,
 * which never replaces a mapping) and uses it as is.  The address is a
 * slot chosen by the fingerprint in a region processes leave free; a slot
 * already taken in a backend means that backend builds its own copy.
 */
/* below ASan's heap (from 0x600000000000), so sanitized builds share them too */
#define TOK_REGION ((uintptr_t) 0x500000000000ULL)
#define TOK_SLOT ((size_t) 256 * 1024 * 1024)
#define TOK_SLOTS 1024
#define TOK_HEADER 4096
#define TOK_MAGIC "TFTOKENS"

typedef struct TokHeader
{
	char		magic[8];
	uint32		version;
	uint32		endian;
	uint64		checksum;		/* of every byte from build on */
	char		build[64];
	uint64		fingerprint;
	uint64		address;
	uint64		file_len;
	uint64		root;			/* offset of the TokImage */
} TokHeader;

/* the Tokenizer's fields that point into the image */
typedef struct TokImage
{
	SpmModel   *model;
	TfWordPiece *wp;
	TfSpecialSet *specials;
	bool		has_vocab;
	SpmMap		vocab;
	int32	   *spm_to_model;
	int32		vocab_unk;
	int32		nmodel;
	const char **model_piece;
	uint32	   *model_piece_len;
	uint8		digest[32];		/* the Tokenizer's content digest */
} TokImage;

static void *
tok_address(uint64 fingerprint)
{
	return (void *) (TOK_REGION + (uintptr_t) (fingerprint % TOK_SLOTS) * TOK_SLOT);
}

static char *
tok_path(const char *name, uint64 fingerprint)
{
	return psprintf("%s/" TOK_PREFIX "%s%016llx%s", transformer_weight_cache_dir,
					SharedFilePrefix(MyDatabaseId, name), (unsigned long long) fingerprint, FILE_SUFFIX);
}

/* MAP_FIXED_NOREPLACE at addr, or NULL (older kernels take it as a hint: checked) */
static void *
map_at(void *addr, size_t len, int prot, int fd)
{
	void	   *p = mmap(addr, len, prot, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (p != addr)
	{
		munmap(p, len);
		return NULL;
	}
	return p;
}

static void
use_image(Tokenizer *t, const TokImage *img, void *addr, size_t len)
{
	SharedMapping    *mapping = MemoryContextAlloc(t->cxt, sizeof(SharedMapping));
	MemoryContextCallback *cb = MemoryContextAlloc(t->cxt, sizeof(MemoryContextCallback));

	t->model = img->model;
	t->wp = img->wp;
	t->specials = img->specials;
	t->has_vocab = img->has_vocab;
	t->vocab = img->vocab;
	t->spm_to_model = img->spm_to_model;
	t->vocab_unk = img->vocab_unk;
	t->nmodel = img->nmodel;
	t->model_piece = img->model_piece;
	t->model_piece_len = img->model_piece_len;
	memcpy(t->digest, img->digest, sizeof(t->digest));
	mapping->addr = addr;
	mapping->len = len;
	cb->func = SharedFileUnmap;
	cb->arg = mapping;
	MemoryContextRegisterResetCallback(t->cxt, cb);
}

bool
MapSharedTokenizer(Tokenizer *t, const char *name, uint64 fingerprint)
{
	char	   *path;
	int			fd;
	TokHeader	h;
	struct stat st;
	void	   *addr;

	if (!transformer_shared_weights)
		return false;
	SharedFileSweepAfterStart();
	path = tok_path(name, fingerprint);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) != 0 || pread(fd, &h, sizeof(h), 0) != sizeof(h) ||
		memcmp(h.magic, TOK_MAGIC, 8) != 0 || h.version != 3 || h.endian != 0x01020304u ||
		strncmp(h.build, SharedFileBuildTag(), sizeof(h.build)) != 0 || h.fingerprint != fingerprint ||
		h.address != (uint64) (uintptr_t) tok_address(fingerprint) || h.file_len != (uint64) st.st_size ||
		h.file_len > TOK_SLOT || h.root < TOK_HEADER || h.root > h.file_len - sizeof(TokImage))
	{
		CloseTransientFile(fd);
		/* removed, so that a backend with the slot free rebuilds it */
		unlink(path);
		elog(LOG, "shared tokenizer file \"%s\" is not of this build and version, or is damaged; removed", path);
		return false;
	}
	addr = map_at(tok_address(fingerprint), (size_t) st.st_size, PROT_READ, fd);
	if (addr == NULL)
	{
		/* the slot is taken in this backend: its own copy; but a damaged file still goes */
		void	   *any = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);

		if (any != MAP_FAILED)
		{
			if (tf_checksum64((char *) any + offsetof(TokHeader, build),
							  (size_t) st.st_size - offsetof(TokHeader, build), 0) != ((TokHeader *) any)->checksum)
			{
				unlink(path);
				elog(LOG, "shared tokenizer file \"%s\" has a wrong checksum; removed", path);
			}
			munmap(any, (size_t) st.st_size);
		}
		CloseTransientFile(fd);
		return false;
	}
	CloseTransientFile(fd);
	if (tf_checksum64((char *) addr + offsetof(TokHeader, build), (size_t) st.st_size - offsetof(TokHeader, build), 0) !=
		((TokHeader *) addr)->checksum)
	{
		munmap(addr, (size_t) st.st_size);
		unlink(path);
		elog(LOG, "shared tokenizer file \"%s\" has a wrong checksum; removed", path);
		return false;
	}
	use_image(t, (const TokImage *) ((char *) addr + h.root), addr, (size_t) st.st_size);
	return true;
}

/* bump allocation in the file being built; zeroed (a new file is zeros) */
typedef struct Bump
{
	char	   *base;
	size_t		cap;
	size_t		used;
} Bump;

static void *
bump_alloc(void *ctx, size_t size)
{
	Bump	   *b = ctx;
	size_t		at = TYPEALIGN(16, b->used);

	if (size > b->cap || at > b->cap - size)
		elog(ERROR, "shared tokenizer image overflow");
	b->used = at + size;
	return b->base + at;
}

/* counting, for the size of the image: the private build's allocator, each size noted */
typedef struct Counting
{
	SpmAlloc	inner;
	size_t		used;
} Counting;

static void *
counting_alloc(void *ctx, size_t size)
{
	Counting   *c = ctx;
	void	   *p = c->inner.alloc(c->inner.ctx, size);

	c->used = TYPEALIGN(16, c->used) + size;
	return p;
}

void
LoadTokenizerShared(Tokenizer *t, const char *name, uint64 fingerprint,
					const char *model, Size model_len, const TokVocab *vocab)
{
	static uint32 counter = 0;
	MemoryContext priv = AllocSetContextCreate(t->cxt, "transformer tokenizer", ALLOCSET_DEFAULT_SIZES);
	Counting	counting = {PgAllocator(priv), 0};
	SpmAlloc	a = {counting_alloc, &counting};
	char	   *path,
			   *tmp;
	size_t		len;
	int			fd;
	void	   *addr;
	Bump		bump;
	SpmAlloc	ba = {bump_alloc, &bump};
	Tokenizer	built;
	TokImage   *img;
	TokHeader  *h;

	/* this backend's own, and the measure of the image */
	BuildTokenizerWith(t, &a, model, model_len, vocab);
	if (!transformer_shared_weights || fingerprint == 0)
		return;
	path = tok_path(name, fingerprint);
	tmp = psprintf("%s/" TEMP_PREFIX "%d.t%u", transformer_weight_cache_dir, MyProcPid, counter++);
	len = TOK_HEADER + TYPEALIGN(16, sizeof(TokImage)) + counting.used + counting.used / 8 + 65536;
	len = TYPEALIGN(4096, len);
	if (len > TOK_SLOT)
		return;
	fd = SharedFileCreate(tmp, path, len);
	if (fd < 0)
		return;
	addr = map_at(tok_address(fingerprint), len, PROT_READ | PROT_WRITE, fd);
	CloseTransientFile(fd);
	if (addr == NULL)
	{
		unlink(tmp);
		return;					/* the slot is taken in this backend: keep our own */
	}

	/* the same build again, into the file */
	bump.base = (char *) addr + TOK_HEADER;
	bump.cap = len - TOK_HEADER;
	bump.used = 0;
	memset(&built, 0, sizeof(built));
	PG_TRY();
	{
		img = bump_alloc(&bump, sizeof(TokImage));
		BuildTokenizerWith(&built, &ba, model, model_len, vocab);
	}
	PG_CATCH();
	{
		munmap(addr, len);
		unlink(tmp);
		PG_RE_THROW();
	}
	PG_END_TRY();
	img->model = built.model;
	img->wp = built.wp;
	img->specials = built.specials;
	img->has_vocab = built.has_vocab;
	img->vocab = built.vocab;
	img->spm_to_model = built.spm_to_model;
	img->vocab_unk = built.vocab_unk;
	img->nmodel = built.nmodel;
	img->model_piece = built.model_piece;
	img->model_piece_len = built.model_piece_len;
	memcpy(img->digest, t->digest, sizeof(img->digest));
	h = addr;
	memcpy(h->magic, TOK_MAGIC, 8);
	h->version = 3;
	h->endian = 0x01020304u;
	strlcpy(h->build, SharedFileBuildTag(), sizeof(h->build));
	h->fingerprint = fingerprint;
	h->address = (uint64) (uintptr_t) addr;
	h->file_len = len;
	h->root = (uint64) ((char *) img - (char *) addr);
	h->checksum = tf_checksum64((char *) addr + offsetof(TokHeader, build), len - offsetof(TokHeader, build), 0);
	if (mprotect(addr, len, PROT_READ) != 0 || rename(tmp, path) != 0)
	{
		SharedFileCannotShare("rename", tmp);
		munmap(addr, len);
		unlink(tmp);
		return;
	}
	SharedFileRemovePrefixed(psprintf(TOK_PREFIX "%s", SharedFilePrefix(MyDatabaseId, name)), path);
	SharedFileSweepOrphans();
	use_image(t, img, addr, len);
	MemoryContextDelete(priv);
}

void
RemoveSharedTokenizer(const char *name)
{
	SharedFileRemovePrefixed(psprintf(TOK_PREFIX "%s", SharedFilePrefix(MyDatabaseId, name)), NULL);
}
