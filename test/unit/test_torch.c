/*
 * test_torch.c
 *		Unit tests of the PyTorch checkpoint reader (src/core/torch_zip.c,
 *		src/core/torch_checkpoint.c, src/core/torch_pickle_*.c), outside the
 *		server (make unittest):
 *
 *	- files torch.save wrote (test/fixtures/torch, tools/gen_torch_fixtures.py):
 *	  every tensor's name, dtype, shape and the CRC-32 of its bytes in the
 *	  file against expected.txt, aliases (one storage, one offset), and the
 *	  same state dict from the pickle machine alone;
 *	- files to refuse (hostile pickles, non-contiguous views, compressed or
 *	  damaged archives, other formats), each with its message; the hostile
 *	  ones would `touch /tmp/tf_torch_pwned` if anything ran them;
 *	- pickles written here, opcode by opcode: every global and opcode a
 *	  state dict has no use for, and every limit.
 *
 *   test/unit/test_torch test/fixtures/torch
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "torch_pickle.h"
#include "torch_zip.h"

#define MARKER "/tmp/tf_torch_pwned"

static int	passed = 0;
static int	failed = 0;

/* ---- memory: an arena per case, freed whole (as a memory context is) ---- */

typedef struct Arena
{
	void	  **ptrs;
	size_t		n,
				cap;
} Arena;

static void *
arena_alloc(void *ctx, size_t size)
{
	Arena	   *a = ctx;
	void	   *p = calloc(1, size ? size : 1);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory (%zu bytes)\n", size);
		exit(2);
	}
	if (a->n == a->cap)
	{
		a->cap = a->cap ? a->cap * 2 : 64;
		a->ptrs = realloc(a->ptrs, a->cap * sizeof(void *));
		if (a->ptrs == NULL)
			exit(2);
	}
	a->ptrs[a->n++] = p;
	return p;
}

static void
arena_free(Arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->ptrs[i]);
	free(a->ptrs);
	memset(a, 0, sizeof(Arena));
}

static void
check(int ok, const char *fmt,...)
{
	va_list		ap;

	printf("%-4s ", ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (ok)
		passed++;
	else
		failed++;
}

/* ---- files ---- */

static int
read_fd(void *ctx, uint64_t off, void *buf, size_t len)
{
	int			fd = *(int *) ctx;
	char	   *p = buf;

	while (len > 0)
	{
		ssize_t		r = pread(fd, p, len, (off_t) off);

		if (r <= 0)
			return -1;
		p += r;
		off += (uint64_t) r;
		len -= (size_t) r;
	}
	return 0;
}

typedef struct Opened
{
	int			fd;
	uint64_t	size;
} Opened;

static int
open_fixture(const char *dir, const char *name, Opened *f)
{
	char		path[1024];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f->fd = open(path, O_RDONLY);
	if (f->fd < 0 || fstat(f->fd, &st) != 0)
	{
		fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
		exit(2);
	}
	f->size = (uint64_t) st.st_size;
	return 0;
}

/* The data.pkl of a ZIP checkpoint (or NULL), from the arena. */
static unsigned char *
zip_pickle(Opened *f, const SpmAlloc *a, size_t *len)
{
	TfZipEntry *e;
	char		err[512];
	int			n = tf_zip_directory(read_fd, &f->fd, f->size, a, &e, err, sizeof(err));

	for (int i = 0; i < n; i++)
	{
		size_t		l = strlen(e[i].name);

		if (l >= 9 && strcmp(e[i].name + l - 9, "/data.pkl") == 0)
		{
			unsigned char *p = a->alloc(a->ctx, e[i].size + 1);

			if (read_fd(&f->fd, e[i].data_offset, p, e[i].size) != 0)
				return NULL;
			*len = e[i].size;
			return p;
		}
	}
	return NULL;
}

/* ---- expected.txt ---- */

#define MAX_EXPECT 64

typedef struct Expect
{
	char		name[256];
	char		dtype[8];
	int			ndim;
	int64_t		shape[TF_TORCH_MAX_DIMS];
	uint32_t	crc;
} Expect;

static const TfTorchTensor *
find_tensor(const TfTorchCheckpoint *c, const char *name)
{
	for (int i = 0; i < c->ntensors; i++)
		if (strcmp(c->tensors[i].name, name) == 0)
			return &c->tensors[i];
	return NULL;
}

/* A good file: its tensors, in order, against the expectations. */
static void
check_file(const char *dir, const char *name, int n, const Expect *ex, char same[][2][256], int nsame)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	TfTorchCheckpoint c,
				u;
	Opened		f;
	char		err[512] = "";
	int			got;
	int			bad = 0;

	open_fixture(dir, name, &f);
	got = tf_torch_checkpoint(read_fd, &f.fd, f.size, &a, &c, err, sizeof(err));
	check(got == n, "%-20s %d tensors (expected %d) %s", name, got, n, got < 0 ? err : "");
	if (got != n)
	{
		close(f.fd);
		arena_free(&arena);
		return;
	}
	for (int i = 0; i < n; i++)
	{
		const TfTorchTensor *t = &c.tensors[i];
		unsigned char *bytes = malloc(t->nbytes ? t->nbytes : 1);
		uint32_t	crc;
		int			ok;
		int64_t		numel = 1;

		for (int k = 0; k < t->ndim; k++)
			numel *= t->shape[k];
		ok = strcmp(t->name, ex[i].name) == 0 && strcmp(t->dtype, ex[i].dtype) == 0 &&
			t->ndim == ex[i].ndim &&
			memcmp(t->shape, ex[i].shape, sizeof(int64_t) * (size_t) t->ndim) == 0 &&
			t->offset <= f.size && t->nbytes <= f.size - t->offset &&
			t->nbytes == (uint64_t) numel * (uint64_t) tf_torch_dtype_size(t->dtype) &&
			t->storage >= 0 && t->storage < c.nstorages &&
			strcmp(c.storages[t->storage].dtype, t->dtype) == 0;
		if (ok && read_fd(&f.fd, t->offset, bytes, t->nbytes) != 0)
			ok = 0;
		crc = ok ? tf_crc32(0, bytes, t->nbytes) : 0;
		if (!ok || crc != ex[i].crc)
		{
			check(0, "%-20s tensor %d \"%s\" %s ndim %d, crc %08x (expected \"%s\" %s ndim %d, crc %08x)",
				  name, i, t->name, t->dtype, t->ndim, crc, ex[i].name, ex[i].dtype, ex[i].ndim, ex[i].crc);
			bad = 1;
		}
		free(bytes);
	}
	if (!bad)
		check(1, "%-20s names, dtypes, shapes and bytes of %d tensors", name, n);
	for (int i = 0; i < nsame; i++)
	{
		const TfTorchTensor *x = find_tensor(&c, same[i][0]),
				   *y = find_tensor(&c, same[i][1]);

		check(x && y && x->storage == y->storage && x->offset == y->offset && x->nbytes == y->nbytes,
			  "%-20s \"%s\" and \"%s\" share their bytes", name, same[i][0], same[i][1]);
	}

	/* the pickle machine alone: the same tensors, offsets within storages */
	{
		size_t		plen = 0;
		unsigned char *pkl = zip_pickle(&f, &a, &plen);

		if (pkl != NULL)
		{
			int			m = tf_torch_unpickle(pkl, plen, &a, &u, err, sizeof(err));
			int			same_all = m == n;

			for (int i = 0; same_all && i < n; i++)
				same_all = strcmp(u.tensors[i].name, c.tensors[i].name) == 0 &&
					u.tensors[i].nbytes == c.tensors[i].nbytes &&
					u.tensors[i].offset + c.storages[c.tensors[i].storage].offset == c.tensors[i].offset;
			check(same_all, "%-20s tf_torch_unpickle of data.pkl agrees %s", name, m < 0 ? err : "");
		}
	}
	close(f.fd);
	arena_free(&arena);
}

static void
check_refused(const char *dir, const char *name, const char *message)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	TfTorchCheckpoint c;
	Opened		f;
	char		err[512] = "";
	int			got;
	size_t		plen = 0;
	unsigned char *pkl;

	open_fixture(dir, name, &f);
	got = tf_torch_checkpoint(read_fd, &f.fd, f.size, &a, &c, err, sizeof(err));
	check(got == -1 && strstr(err, message) != NULL, "%-20s refused: %s", name, err);
	if (got != -1 || strstr(err, message) == NULL)
		printf("     expected: %s\n", message);
	/* a hostile pickle is refused by the machine alone too */
	if (strncmp(name, "hostile_", 8) == 0 && (pkl = zip_pickle(&f, &a, &plen)) != NULL)
	{
		got = tf_torch_unpickle(pkl, plen, &a, &c, err, sizeof(err));
		check(got == -1 && strstr(err, message) != NULL, "%-20s data.pkl refused: %s", name, err);
	}
	close(f.fd);
	arena_free(&arena);
}

static void
run_fixtures(const char *dir)
{
	char		path[1024];
	FILE	   *fp;
	char		line[2048];
	char		file[256] = "";
	int			nfile = 0,
				n = 0,
				nsame = 0;
	static Expect ex[MAX_EXPECT];
	static char same[8][2][256];
	int			files = 0;

	snprintf(path, sizeof(path), "%s/expected.txt", dir);
	if ((fp = fopen(path, "r")) == NULL)
	{
		fprintf(stderr, "cannot open %s\n", path);
		exit(2);
	}
	for (;;)
	{
		char	   *l = fgets(line, sizeof(line), fp);

		if (l)
			line[strcspn(line, "\n")] = '\0';
		/* a file's records end at the next record of another kind, or EOF */
		if (file[0] && (l == NULL || strncmp(line, "file ", 5) == 0 || strncmp(line, "error ", 6) == 0))
		{
			if (n != nfile)
			{
				fprintf(stderr, "expected.txt: %s has %d tensor lines for %d tensors\n", file, n, nfile);
				exit(2);
			}
			check_file(dir, file, nfile, ex, same, nsame);
			file[0] = '\0';
			files++;
		}
		if (l == NULL)
			break;
		if (strncmp(line, "file ", 5) == 0)
		{
			if (sscanf(line, "file %255s %d", file, &nfile) != 2 || nfile > MAX_EXPECT)
				goto bad;
			n = nsame = 0;
		}
		else if (strncmp(line, "tensor ", 7) == 0)
		{
			Expect	   *e = &ex[n];
			int			pos;
			char	   *p;

			if (n >= MAX_EXPECT ||
				sscanf(line, "tensor %255s %7s %d%n", e->name, e->dtype, &e->ndim, &pos) != 3 ||
				e->ndim < 0 || e->ndim > TF_TORCH_MAX_DIMS)
				goto bad;
			p = line + pos;
			for (int k = 0; k < e->ndim; k++)
				e->shape[k] = strtoll(p, &p, 10);
			e->crc = (uint32_t) strtoul(p, &p, 16);
			n++;
		}
		else if (strncmp(line, "same ", 5) == 0)
		{
			if (nsame >= 8 || sscanf(line, "same %255s %255s", same[nsame][0], same[nsame][1]) != 2)
				goto bad;
			nsame++;
		}
		else if (strncmp(line, "error ", 6) == 0)
		{
			char		name[256];
			int			pos;

			if (sscanf(line, "error %255s %n", name, &pos) != 1)
				goto bad;
			check_refused(dir, name, line + pos);
			files++;
		}
		else if (line[0] != '#' && line[0] != '\0')
			goto bad;
	}
	fclose(fp);
	check(files >= 40, "%d fixture files", files);
	return;
bad:
	fprintf(stderr, "expected.txt: cannot read \"%s\"\n", line);
	exit(2);
}

/* ---- pickles written here ---- */

typedef struct Buf
{
	unsigned char *p;
	size_t		len,
				cap;
} Buf;

static void
put(Buf *b, const void *s, size_t n)
{
	if (n == 0)
		return;
	if (b->len + n > b->cap)
	{
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (b->p == NULL)
			exit(2);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void
op(Buf *b, unsigned char c)
{
	put(b, &c, 1);
}

static void
ops(Buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* a literal, NULs and all */
#define OPS(b, lit) put((b), (lit), sizeof(lit) - 1)
#define LIT(lit) (lit), sizeof(lit) - 1

/* BINUNICODE */
static void
ustr(Buf *b, const char *s)
{
	uint32_t	n = (uint32_t) strlen(s);
	unsigned char h[5] = {'X', (unsigned char) n, (unsigned char) (n >> 8), (unsigned char) (n >> 16),
	(unsigned char) (n >> 24)};

	put(b, h, 5);
	put(b, s, n);
}

/* BININT1, BININT or LONG1 as small as fits */
static void
pint(Buf *b, int64_t v)
{
	unsigned char h[10];

	if (v >= 0 && v < 256)
	{
		h[0] = 'K';
		h[1] = (unsigned char) v;
		put(b, h, 2);
	}
	else if (v >= INT32_MIN && v <= INT32_MAX)
	{
		h[0] = 'J';
		for (int i = 0; i < 4; i++)
			h[1 + i] = (unsigned char) ((uint64_t) v >> (8 * i));
		put(b, h, 5);
	}
	else
	{
		h[0] = 0x8a;
		h[1] = 8;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char) ((uint64_t) v >> (8 * i));
		put(b, h, 10);
	}
}

static void
global(Buf *b, const char *module, const char *name)
{
	op(b, 'c');
	ops(b, module);
	op(b, '\n');
	ops(b, name);
	op(b, '\n');
}

typedef struct TSpec
{
	const char *name;
	const char *storage_type;
	const char *key;
	int64_t		numel;
	int64_t		offset;
	int			ndim;
	int64_t		shape[10];
	int64_t		stride[10];
} TSpec;

/* _rebuild_tensor_v2(('storage', type, key, 'cpu', numel), offset, shape, stride, False, OrderedDict()) */
static void
tensor(Buf *b, const TSpec *t)
{
	global(b, "torch._utils", "_rebuild_tensor_v2");
	op(b, '(');
	op(b, '(');
	ustr(b, "storage");
	global(b, "torch", t->storage_type);
	ustr(b, t->key);
	ustr(b, "cpu");
	pint(b, t->numel);
	op(b, 't');
	op(b, 'Q');
	pint(b, t->offset);
	op(b, '(');
	for (int k = 0; k < t->ndim; k++)
		pint(b, t->shape[k]);
	op(b, 't');
	op(b, '(');
	for (int k = 0; k < t->ndim; k++)
		pint(b, t->stride[k]);
	op(b, 't');
	op(b, 0x89);
	global(b, "collections", "OrderedDict");
	op(b, ')');
	op(b, 'R');
	op(b, 't');
	op(b, 'R');
}

/* {name: tensor, ...} as torch.save writes it (protocol 2) */
static void
state_dict(Buf *b, const TSpec *t, int n)
{
	ops(b, "\x80\x02");
	global(b, "collections", "OrderedDict");
	op(b, ')');
	op(b, 'R');
	op(b, '(');
	for (int i = 0; i < n; i++)
	{
		ustr(b, t[i].name);
		tensor(b, &t[i]);
	}
	op(b, 'u');
	op(b, '.');
}

static int
unpickle(const Buf *b, TfTorchCheckpoint *c, char *err, size_t errlen, Arena *arena)
{
	SpmAlloc	a = {arena_alloc, arena};

	return tf_torch_unpickle(b->p, b->len, &a, c, err, errlen);
}

/* The pickle is refused with message; nothing else. */
static void
refused(const char *what, const Buf *b, const char *message)
{
	Arena		arena = {0};
	TfTorchCheckpoint c;
	char		err[512] = "";
	int			got = unpickle(b, &c, err, sizeof(err), &arena);

	check(got == -1 && strstr(err, message) != NULL, "%-28s %s", what, err);
	if (got != -1 || strstr(err, message) == NULL)
		printf("     expected: %s\n", message);
	arena_free(&arena);
}

static void
refused_bytes(const char *what, const char *bytes, size_t len, const char *message)
{
	Buf			b = {0};

	put(&b, bytes, len);
	refused(what, &b, message);
	free(b.p);
}

/* a literal pickle, refused with message */
#define REFUSED_BYTES(what, lit, message) refused_bytes((what), (lit), sizeof(lit) - 1, (message))

static const TSpec W = {"w", "FloatStorage", "0", 6, 0, 2, {2, 3}, {3, 1}};

static void
run_pickles(void)
{
	Buf			b = {0};
	Arena		arena = {0};
	TfTorchCheckpoint c;
	char		err[512];
	int			got;

	/* a state dict written here: two tensors, one storage */
	{
		TSpec		t[2] = {W, {"v", "FloatStorage", "0", 6, 3, 1, {3}, {1}}};

		state_dict(&b, t, 2);
		got = unpickle(&b, &c, err, sizeof(err), &arena);
		check(got == 2 && c.nstorages == 1 && c.storages[0].numel == 6 &&
			  strcmp(c.storages[0].key, "0") == 0 && strcmp(c.tensors[0].dtype, "F32") == 0 &&
			  c.tensors[0].offset == 0 && c.tensors[0].nbytes == 24 && c.tensors[1].offset == 12 &&
			  c.tensors[1].nbytes == 12 && c.tensors[1].ndim == 1 && c.tensors[1].shape[0] == 3,
			  "%-28s %d tensors %s", "written here", got, got < 0 ? err : "");
		arena_free(&arena);
		free(b.p);
		memset(&b, 0, sizeof(b));
	}

	/* every global of the brief's list, and a few more, by GLOBAL */
	{
		static const char *const bad[][2] = {
			{"os", "system"}, {"posix", "system"}, {"nt", "system"}, {"builtins", "eval"},
			{"builtins", "exec"}, {"builtins", "getattr"}, {"__builtin__", "eval"},
			{"subprocess", "Popen"}, {"torch", "load"}, {"torch._utils", "_rebuild_qtensor"},
			{"collections", "defaultdict"}, {"numpy.core.multiarray", "_reconstruct"},
			{"torch.nn.modules.linear", "Linear"}, {"torch", "Tensor"}, {"torch.storage", "FloatStorage"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		{
			char		msg[256];

			OPS(&b, "\x80\x02");
			global(&b, bad[i][0], bad[i][1]);
			ustr(&b, "touch " MARKER);
			OPS(&b, "\x85R.");
			snprintf(msg, sizeof(msg), "pickle names the global \"%s.%s\", which a state dict never needs; refused",
					 bad[i][0], bad[i][1]);
			refused("GLOBAL", &b, msg);
			b.len = 0;
			/* and by STACK_GLOBAL */
			OPS(&b, "\x80\x04");
			ustr(&b, bad[i][0]);
			ustr(&b, bad[i][1]);
			op(&b, 0x93);
			ustr(&b, "touch " MARKER);
			OPS(&b, "\x85R.");
			refused("STACK_GLOBAL", &b, msg);
			b.len = 0;
		}
	}
	/* the global is refused where it is met, not when it is called */
	OPS(&b, "\x80\x02]\x28K\x01K\x02");
	global(&b, "os", "system");
	refused("GLOBAL before its REDUCE", &b, "\"os.system\"");
	b.len = 0;
	/* a global name with a NUL, a newline-less line, a long line */
	REFUSED_BYTES("GLOBAL with a NUL", "\x80\x02" "ccollections\0\nOrderedDict\n)R.",
				  "pickle names the global \"collections?.OrderedDict\"");
	REFUSED_BYTES("GLOBAL without its newline", "\x80\x02" "ccollections", "the pickle ends inside GLOBAL at byte 2");
	{
		char		longline[400];

		memset(longline, 'a', sizeof(longline));
		longline[0] = 'c';
		refused_bytes("GLOBAL of 399 bytes", longline, sizeof(longline), "has a line longer than 256 bytes");
	}
	REFUSED_BYTES("STACK_GLOBAL of ints", "\x80\x04K\x01K\x02\x93.",
				  "STACK_GLOBAL at byte 6 has operands that are not strings");

	/* every opcode a state dict has no use for */
	{
		static const struct
		{
			const char *bytes;
			size_t		len;
			const char *msg;
		}			bad[] = {
			{LIT("\x80\x02iposix\nsystem\n."), "pickle opcode INST (0x69) at byte 2 is not allowed in a state dict; refused"},
			{LIT("\x80\x02(o."), "pickle opcode OBJ (0x6f) at byte 3"},
			{LIT("\x80\x02)\x81."), "pickle opcode NEWOBJ (0x81) at byte 3"},
			{LIT("\x80\x04))}\x92."), "pickle opcode NEWOBJ_EX (0x92) at byte 5"},
			{LIT("\x80\x02Pfoo\n."), "pickle opcode PERSID (0x50) at byte 2"},
			{LIT("\x80\x02\x82\x01."), "pickle opcode EXT1 (0x82) at byte 2"},
			{LIT("\x80\x02\x83\x01\x00."), "pickle opcode EXT2 (0x83) at byte 2"},
			{LIT("\x80\x02\x84\x01\x00\x00\x00."), "pickle opcode EXT4 (0x84) at byte 2"},
			{LIT("\x80\x02g0\n."), "pickle opcode GET (0x67) at byte 2"},
			{LIT("\x80\x02Np0\n."), "pickle opcode PUT (0x70) at byte 3"},
			{LIT("\x80\x02S'x'\n."), "pickle opcode STRING (0x53) at byte 2"},
			{LIT("\x80\x02Vx\n."), "pickle opcode UNICODE (0x56) at byte 2"},
			{LIT("\x80\x02" "F1.0\n."), "pickle opcode FLOAT (0x46) at byte 2"},
			{LIT("\x80\x02L1L\n."), "pickle opcode LONG (0x4c) at byte 2"},
			{LIT("\x80\x02\x8b\x01\x00\x00\x00\x01."), "pickle opcode LONG4 (0x8b) at byte 2"},
			{LIT("\x80\x03" "B\x01\x00\x00\x00x."), "pickle opcode BINBYTES (0x42) at byte 2"},
			{LIT("\x80\x03" "C\x01x."), "pickle opcode SHORT_BINBYTES (0x43) at byte 2"},
			{LIT("\x80\x04\x8e\x01\x00\x00\x00\x00\x00\x00\x00x."), "pickle opcode BINBYTES8 (0x8e) at byte 2"},
			{LIT("\x80\x05\x96\x01\x00\x00\x00\x00\x00\x00\x00x."), "pickle opcode BYTEARRAY8 (0x96) at byte 2"},
			{LIT("\x80\x05\x97."), "pickle opcode NEXT_BUFFER (0x97) at byte 2"},
			{LIT("\x80\x05N\x98."), "pickle opcode READONLY_BUFFER (0x98) at byte 3"},
			{LIT("\x80\x04\x8f."), "pickle opcode EMPTY_SET (0x8f) at byte 2"},
			{LIT("\x80\x04(K\x01\x90."), "pickle opcode ADDITEMS (0x90) at byte 5"},
			{LIT("\x80\x04(K\x01\x91."), "pickle opcode FROZENSET (0x91) at byte 5"},
			{LIT("\x80\x02N0."), "pickle opcode POP (0x30) at byte 3"},
			{LIT("\x80\x02(1."), "pickle opcode POP_MARK (0x31) at byte 3"},
			{LIT("\x80\x02N2."), "pickle opcode DUP (0x32) at byte 3"},
			{LIT("\x80\x02(d."), "pickle opcode DICT (0x64) at byte 3"},
			{LIT("\x80\x02(l."), "pickle opcode LIST (0x6c) at byte 3"},
			{LIT("\x80\x02\xff."), "unknown pickle opcode 0xff at byte 2"},
			{LIT("\x80\x02\x00."), "unknown pickle opcode 0x00 at byte 2"},
			{LIT("\x80\x06}."), "the pickle has protocol 6"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			refused_bytes("opcode", bad[i].bytes, bad[i].len, bad[i].msg);
	}

	/* REDUCE of anything but the allowed functions */
	OPS(&b, "\x80\x02");
	global(&b, "torch", "FloatStorage");
	OPS(&b, "K\x03\x85R.");
	refused("REDUCE of a storage type", &b, "REDUCE at byte 25 calls torch.FloatStorage; a state dict never constructs a storage");
	b.len = 0;
	REFUSED_BYTES("REDUCE of a str", "\x80\x02X\x01\x00\x00\x00x)R.", "REDUCE at byte 9 calls a str");
	OPS(&b, "\x80\x02");
	global(&b, "collections", "OrderedDict");
	OPS(&b, "]\x85R.");
	refused("OrderedDict with arguments", &b, "calls collections.OrderedDict with arguments");
	b.len = 0;
	OPS(&b, "\x80\x02");
	global(&b, "collections", "OrderedDict");
	OPS(&b, "]R.");
	refused("REDUCE with a list", &b, "has arguments that are a list, not a tuple");
	b.len = 0;
	OPS(&b, "\x80\x02");
	global(&b, "torch._utils", "_rebuild_tensor_v2");
	OPS(&b, "K\x01K\x02K\x03\x87R.");
	refused("_rebuild_tensor_v2(1, 2, 3)", &b, "_rebuild_tensor_v2 with 3 arguments (6 or 7 expected)");
	b.len = 0;
	OPS(&b, "\x80\x02");
	global(&b, "torch._utils", "_rebuild_tensor_v2");
	OPS(&b, "(K\x01K\x02K\x03K\x04K\x05K\x06tR.");
	refused("_rebuild_tensor_v2 of ints", &b, "has arguments that are not (storage, offset, size, stride, ...)");
	b.len = 0;
	OPS(&b, "\x80\x02");
	global(&b, "torch._utils", "_rebuild_parameter");
	OPS(&b, "K\x01\x88}\x87R.");
	refused("_rebuild_parameter of an int", &b, "_rebuild_parameter with arguments that are not (tensor");
	b.len = 0;
	REFUSED_BYTES("BUILD of a list", "\x80\x02]}b.", "BUILD at byte 4 sets the state of a list");

	/* persistent ids */
	REFUSED_BYTES("BINPERSID of a str", "\x80\x02X\x01\x00\x00\x00xQ.", "has a persistent id that is a str");
	OPS(&b, "\x80\x02(X\x06\x00\x00\x00module");
	global(&b, "torch", "FloatStorage");
	OPS(&b, "NNtQ.");
	refused("a 'module' persistent id", &b, "saves a whole nn.Module");
	b.len = 0;
	OPS(&b, "\x80\x02(X\x03\x00\x00\x00" "fooK\x01tQ.");
	refused("a 'foo' persistent id", &b, "has a persistent id of type \"foo\"; only storages are expected");
	b.len = 0;
	OPS(&b, "\x80\x02(X\x07\x00\x00\x00storageK\x01K\x02K\x03K\x04tQ.");
	refused("a storage id of ints", &b, "a storage id that is not (\"storage\", storage type, key, location, numel)");
	b.len = 0;
	OPS(&b, "\x80\x02(X\x07\x00\x00\x00storage");
	global(&b, "torch", "FloatStorage");
	OPS(&b, "X\x00\x00\x00\x00X\x03\x00\x00\x00" "cpuK\x01tQ.");
	refused("an empty storage key", &b, "a storage key that is empty, too long or holds a NUL");
	b.len = 0;
	OPS(&b, "\x80\x02(X\x07\x00\x00\x00storage");
	global(&b, "torch", "DoubleStorage");
	OPS(&b, "X\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpu");
	pint(&b, INT64_MAX / 4);
	OPS(&b, "tQ.");
	refused("a storage of 2^61 doubles", &b, "storage \"0\" has 2305843009213693951 elements, too many");
	b.len = 0;
	OPS(&b, "\x80\x02(X\x07\x00\x00\x00storage");
	global(&b, "torch", "FloatStorage");
	OPS(&b, "X\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x08(X\x01\x00\x00\x00" "1K\x06K\x03ttQ.");
	refused("a view beyond its storage", &b, "storage \"0\" has a view of 3 elements at 6, beyond its 8");
	b.len = 0;
	OPS(&b, "\x80\x02(X\x07\x00\x00\x00storage");
	global(&b, "torch", "FloatStorage");
	OPS(&b, "X\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x08tQ(X\x07\x00\x00\x00storage");
	global(&b, "torch", "HalfStorage");
	OPS(&b, "X\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x08tQ\x86.");
	refused("one key, two dtypes", &b, "storage \"0\" is named with two dtypes or sizes");
	b.len = 0;

	/* tensors that do not fit their storage, or are not contiguous */
	{
		TSpec		t = W;

		t.offset = 1;
		state_dict(&b, &t, 1);
		refused("a tensor beyond its storage", &b, "tensor \"w\" (6 elements at 1) lies beyond its storage of 6 elements");
		b.len = 0;
		t = W;
		t.shape[0] = INT64_C(1) << 62;
		t.shape[1] = INT64_C(1) << 62;
		state_dict(&b, &t, 1);
		refused("a shape of 2^124 elements", &b, "tensor \"w\" has more elements than its storage");
		b.len = 0;
		t = W;
		t.stride[0] = 1;
		t.stride[1] = 2;
		state_dict(&b, &t, 1);
		refused("a transposed tensor", &b, "tensor \"w\" is a non-contiguous view (stride (1, 2) of shape (2, 3)); save it with .contiguous()");
		b.len = 0;
		t = W;
		t.stride[1] = -1;
		state_dict(&b, &t, 1);
		refused("a negative stride", &b, "is a non-contiguous view (stride (3, -1)");
		b.len = 0;
		t = W;
		t.shape[0] = -2;
		state_dict(&b, &t, 1);
		refused("a negative size", &b, "has a size or stride that is not an integer (or a negative size)");
		b.len = 0;
		t = W;
		t.ndim = 9;
		for (int k = 0; k < 9; k++)
			t.shape[k] = 1, t.stride[k] = 1;
		state_dict(&b, &t, 1);
		refused("9 dimensions", &b, "makes a tensor of 9 dimensions with 9 strides (at most 8)");
		b.len = 0;
		t = W;
		t.offset = -1;
		state_dict(&b, &t, 1);
		refused("a negative offset", &b, "has arguments that are not (storage, offset, size, stride, ...)");
		b.len = 0;

		/* size-1 dimensions may have any stride; empty tensors any strides */
		t = W;
		t.ndim = 3;
		t.shape[0] = 2, t.shape[1] = 1, t.shape[2] = 3;
		t.stride[0] = 3, t.stride[1] = 12345, t.stride[2] = 1;
		state_dict(&b, &t, 1);
		got = unpickle(&b, &c, err, sizeof(err), &arena);
		check(got == 1 && c.tensors[0].nbytes == 24, "%-28s %s", "a size-1 dimension's stride", got < 0 ? err : "");
		arena_free(&arena);
		b.len = 0;
		t = W;
		t.shape[0] = 0, t.stride[0] = 7, t.stride[1] = 9;
		t.offset = 6;
		state_dict(&b, &t, 1);
		got = unpickle(&b, &c, err, sizeof(err), &arena);
		check(got == 1 && c.tensors[0].nbytes == 0 && c.tensors[0].offset == 24, "%-28s %s",
			  "an empty tensor at the end", got < 0 ? err : "");
		arena_free(&arena);
		b.len = 0;

		/* names */
		{
			TSpec		two[2] = {W, W};

			state_dict(&b, two, 2);
			refused("a name twice", &b, "the state dict names \"w\" twice");
			b.len = 0;
			two[0].name = "";
			state_dict(&b, two, 1);
			refused("an empty name", &b, "the state dict has a name (\"\") that is empty");
			b.len = 0;
			two[0].name = "bad\xff";
			state_dict(&b, two, 1);
			refused("a name not UTF-8", &b, "the state dict has a name (\"bad?\")");
			b.len = 0;
		}
	}

	/* not a state dict */
	REFUSED_BYTES("a list", "\x80\x02].", "the pickle holds a list, not a state dict");
	REFUSED_BYTES("an int key", "\x80\x02}K\x01K\x02s.", "entry 0 of the state dict has a key that is an int, not a name");
	REFUSED_BYTES("a value None", "\x80\x02}X\x01\x00\x00\x00wNs.", "the state dict's value for \"w\" is None, not a tensor");
	/* a list that contains itself, a dict that contains itself */
	REFUSED_BYTES("a list in itself", "\x80\x02}X\x01\x00\x00\x00w]q\x00h\x00" "as.",
				  "the state dict's value for \"w\" is a list");
	REFUSED_BYTES("a dict in itself", "\x80\x02}q\x00X\x0a\x00\x00\x00state_dicth\x00s.",
				  "the state dict's value for \"state_dict\" is a dict, not a tensor");

	/* the machine's own limits */
	REFUSED_BYTES("no STOP", "\x80\x02}", "the pickle ends at byte 3 without STOP");
	REFUSED_BYTES("empty", "", "the pickle ends at byte 0 without STOP");
	REFUSED_BYTES("STOP on an empty stack", "\x80\x02.", "STOP at byte 2 finds the stack empty");
	REFUSED_BYTES("STOP with two objects", "\x80\x02}}.", "the pickle stops at byte 4 with 1 more objects or marks");
	REFUSED_BYTES("STOP inside a MARK", "\x80\x02}(.", "STOP at byte 4 finds the stack empty");
	REFUSED_BYTES("TUPLE without MARK", "\x80\x02Nt.", "TUPLE at byte 3 has no MARK before it");
	REFUSED_BYTES("TUPLE3 of two", "\x80\x02NN\x87.", "TUPLE3 at byte 4 finds the stack empty");
	REFUSED_BYTES("TUPLE2 across a MARK", "\x80\x02N(N\x86.", "TUPLE2 at byte 5 finds the stack empty");
	REFUSED_BYTES("SETITEM into a list", "\x80\x02]NNs.", "SETITEM at byte 5 stores into a list, not a dict");
	REFUSED_BYTES("SETITEMS of three", "\x80\x02}(NNNu.", "SETITEMS at byte 7 stores 3 objects into a dict");
	REFUSED_BYTES("APPENDS to a dict", "\x80\x02}(Ne.", "APPENDS at byte 5 appends to a dict, not a list");
	REFUSED_BYTES("APPEND to a tuple", "\x80\x02)Na.", "APPEND at byte 4 appends to a tuple, not a list");
	REFUSED_BYTES("BINGET never set", "\x80\x02h\x05.", "BINGET at byte 2 reads memo entry 5, which was never set");
	REFUSED_BYTES("LONG_BINGET far", "\x80\x02j\xff\xff\xff\xff.", "reads memo entry 4294967295, which was never set");
	REFUSED_BYTES("LONG_BINPUT far", "\x80\x02Nr\xff\xff\xff\xff.", "LONG_BINPUT at byte 3 uses memo entry 4294967295, beyond 4194304");
	REFUSED_BYTES("BINPUT of nothing", "\x80\x02q\x00.", "BINPUT at byte 2 finds the stack empty");
	REFUSED_BYTES("MEMOIZE above a MARK", "\x80\x02N(\x94.", "MEMOIZE at byte 4 finds the stack empty");
	REFUSED_BYTES("a string of 2^63 bytes", "\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x80.",
				  "BINUNICODE8 at byte 2 has a string of 9223372036854775808 bytes, more than 16777216");
	REFUSED_BYTES("a string beyond the end", "\x80\x02X\xff\x00\x00\x00" "abc.", "the pickle ends inside BINUNICODE at byte 2");
	REFUSED_BYTES("BINSTRING of -1 bytes", "\x80\x02T\xff\xff\xff\xff.", "BINSTRING at byte 2 has a negative length");
	REFUSED_BYTES("a FRAME beyond the end", "\x80\x04\x95\x00\x01\x00\x00\x00\x00\x00\x00}.", "FRAME at byte 2 is longer than the pickle");
	REFUSED_BYTES("INT of 20 digits", "\x80\x01I99999999999999999999\n.", "INT at byte 2 is not an integer of 64 bits");
	REFUSED_BYTES("INT of letters", "\x80\x01I1x\n.", "INT at byte 2 is not an integer of 64 bits");
	REFUSED_BYTES("INT of nothing", "\x80\x01I\n.", "INT at byte 2 is not an integer of 64 bits");
	{
		/* 2000 MARKs */
		Buf			d = {0};

		OPS(&d, "\x80\x02");
		for (int i = 0; i < 2000; i++)
			op(&d, '(');
		refused("2000 MARKs", &d, "the pickle nests deeper than 1024 at byte 1026");
		free(d.p);
	}
	{
		/* 2^21 Nones: the stack's limit */
		Buf			d = {0};

		OPS(&d, "\x80\x02");
		for (int i = 0; i < (1 << 21); i++)
			op(&d, 'N');
		refused("2^21 Nones", &d, "the pickle's stack grows beyond 1048576 objects");
		free(d.p);
	}
	{
		/* 3 million dicts in a list: the budget of objects */
		Buf			d = {0};

		OPS(&d, "\x80\x02]");
		for (int i = 0; i < 3000000; i++)
			OPS(&d, "}a");
		op(&d, '.');
		refused("3 million dicts", &d, "the pickle builds more than 64 MB of objects");
		free(d.p);
	}

	/* values a state dict never has but a training checkpoint's other entries do */
	{
		TSpec		t = W;
		Buf			d = {0};

		OPS(&d, "\x80\x02}(X\x05\x00\x00\x00" "epochK\x03X\x02\x00\x00\x00lrG?\xb9\x99\x99\x99\x99\x99\x9a"
			"X\x01\x00\x00\x00n\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01X\x01\x00\x00\x00mJ\xff\xff\xff\xff"
			"X\x01\x00\x00\x00sU\x02hiX\x01\x00\x00\x00" "bI01\nX\x01\x00\x00\x00i\x8a\x02\x00\x80"
			"X\x0a\x00\x00\x00state_dict}(X\x01\x00\x00\x00w");
		tensor(&d, &t);
		OPS(&d, "uu.");
		got = unpickle(&d, &c, err, sizeof(err), &arena);
		check(got == 1 && strcmp(c.tensors[0].name, "w") == 0, "%-28s %s", "a training checkpoint",
			  got < 0 ? err : "");
		arena_free(&arena);
		free(d.p);
	}
	/* _rebuild_tensor (4 arguments) and _rebuild_parameter, LONG_BINPUT, MEMOIZE, BINGET */
	{
		Buf			d = {0};

		OPS(&d, "\x80\x04}(X\x01\x00\x00\x00p");
		global(&d, "torch._utils", "_rebuild_parameter");
		op(&d, '(');
		global(&d, "torch._utils", "_rebuild_tensor");
		OPS(&d, "((X\x07\x00\x00\x00storage");
		global(&d, "torch", "BFloat16Storage");
		OPS(&d, "r\x07\x00\x00\x00X\x01\x00\x00\x00kX\x04\x00\x00\x00" "cuda\x8a\x02\x00\x01tQK\x80(M\x80\x00t(K\x01t\x94tR\x88}tR"
			"X\x01\x00\x00\x00q(X\x07\x00\x00\x00storagej\x07\x00\x00\x00X\x01\x00\x00\x00iX\x03\x00\x00\x00" "cpuK\x04tQ.");
		/* (the storage of q is a dict value here: refused below, after p is fine) */
		got = unpickle(&d, &c, err, sizeof(err), &arena);
		check(got == -1 && strstr(err, "the pickle stops at byte") != NULL, "%-28s %s", "an unfinished dict", err);
		arena_free(&arena);
		d.len -= 1;
		OPS(&d, "u.");
		got = unpickle(&d, &c, err, sizeof(err), &arena);
		check(got == -1 && strstr(err, "the state dict's value for \"q\" is a storage, not a tensor") != NULL,
			  "%-28s %s", "a storage for a tensor", err);
		arena_free(&arena);
		d.len = 0;
		OPS(&d, "\x80\x04}(X\x01\x00\x00\x00p");
		global(&d, "torch._utils", "_rebuild_parameter");
		op(&d, '(');
		global(&d, "torch._utils", "_rebuild_tensor");
		OPS(&d, "((X\x07\x00\x00\x00storage");
		global(&d, "torch", "BFloat16Storage");
		OPS(&d, "X\x01\x00\x00\x00kX\x04\x00\x00\x00" "cuda\x8a\x02\x00\x01tQK\x80(M\x80\x00t(K\x01ttR\x88}tRu.");
		got = unpickle(&d, &c, err, sizeof(err), &arena);
		check(got == 1 && strcmp(c.tensors[0].dtype, "BF16") == 0 && c.tensors[0].offset == 256 &&
			  c.tensors[0].nbytes == 256 && c.storages[0].numel == 256 &&
			  strcmp(c.storages[0].key, "k") == 0,
			  "%-28s %s", "_rebuild_parameter(_rebuild_tensor)", got < 0 ? err : "");
		arena_free(&arena);
		free(d.p);
	}
	free(b.p);
}

/* ---- the ZIP reader on buffers written here ---- */

typedef struct Mem
{
	const unsigned char *p;
	size_t		len;
} Mem;

static int
read_mem(void *ctx, uint64_t off, void *buf, size_t len)
{
	Mem		   *m = ctx;

	if (off > m->len || len > m->len - off)
		return -1;
	memcpy(buf, m->p + off, len);
	return 0;
}

static void
run_zip(void)
{
	static const char check_str[] = "123456789";
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	TfZipEntry *e;
	char		err[512];
	int			n;

	check(tf_crc32(0, check_str, 9) == 0xCBF43926u, "%-28s %08x", "CRC-32 of \"123456789\"", tf_crc32(0, check_str, 9));
	check(tf_crc32(tf_crc32(0, check_str, 4), check_str + 4, 5) == 0xCBF43926u, "%-28s", "CRC-32 in two parts");
	check(tf_crc32(0, "", 0) == 0, "%-28s", "CRC-32 of nothing");
	check(tf_torch_dtype_size("BF16") == 2 && tf_torch_dtype_size("F64") == 8 && tf_torch_dtype_size("BOOL") == 1 &&
		  tf_torch_dtype_size("F8") == 0 && strcmp(tf_torch_dtype_torch_name("I64"), "int64") == 0 &&
		  tf_torch_dtype_torch_name("") == NULL, "%-28s", "dtypes");

	/* an empty archive: the EOCD alone, then with a comment holding a fake EOCD */
	{
		unsigned char z[22 + 30] = {0x50, 0x4b, 0x05, 0x06};
		Mem			m = {z, 22};

		n = tf_zip_directory(read_mem, &m, 22, &a, &e, err, sizeof(err));
		check(n == 0, "%-28s %d %s", "an empty archive", n, n < 0 ? err : "");
		z[20] = 30;
		memcpy(z + 22, "\x50\x4b\x05\x06", 4);
		m.len = sizeof(z);
		n = tf_zip_directory(read_mem, &m, sizeof(z), &a, &e, err, sizeof(err));
		check(n == 0, "%-28s %d %s", "a comment with an EOCD", n, n < 0 ? err : "");
		/* 65535 entries claimed in 0 bytes of directory */
		z[8] = z[9] = z[10] = z[11] = 0xff;
		n = tf_zip_directory(read_mem, &m, sizeof(z), &a, &e, err, sizeof(err));
		check(n == -1 && strstr(err, "cannot hold 65535 entries"), "%-28s %s", "65535 entries in 0 bytes", err);
		n = tf_zip_directory(read_mem, &m, 21, &a, &e, err, sizeof(err));
		check(n == -1 && strstr(err, "too short"), "%-28s %s", "21 bytes", err);
		z[0] = 'X';
		n = tf_zip_directory(read_mem, &m, 22, &a, &e, err, sizeof(err));
		check(n == -1 && strstr(err, "no end of central directory record"), "%-28s %s", "no EOCD", err);
	}
	/* the reader reports a short read */
	{
		unsigned char z[22] = {0x50, 0x4b, 0x05, 0x06};
		Mem			m = {z, 10};

		n = tf_zip_directory(read_mem, &m, 22, &a, &e, err, sizeof(err));
		check(n == -1 && strstr(err, "cannot read"), "%-28s %s", "a short read", err);
	}
	/* names for messages */
	{
		char		q[16];

		tf_zip_quote(q, sizeof(q), "a\nb\xc3\xa9\xff", 6);
		check(strcmp(q, "a?b\xc3\xa9?") == 0, "%-28s %s", "quote", q);
		tf_zip_quote(q, sizeof(q), "0123456789abcdefghij", 20);
		check(strcmp(q, "0123456789ab...") == 0, "%-28s %s", "quote, cut", q);
	}
	arena_free(&arena);
}

/*
 * A legacy file written here: magic number, protocol, system, a state dict
 * beside a long string (longer than the reader's window), the keys, the
 * storage; variants spoil one part.
 */
static void
legacy(Buf *f, int variant)
{
	TSpec		t = W;
	char	   *note = calloc(1, 70001);
	unsigned char count[8] = {6};

	memset(note, 'x', 70000);
	f->len = 0;
	OPS(f, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.");
	OPS(f, "\x80\x02M\xe9\x03.");
	OPS(f, "\x80\x02}X\x0d\x00\x00\x00little_endian");
	op(f, variant == 1 ? 0x89 : 0x88);
	OPS(f, "s.");
	OPS(f, "\x80\x02}(X\x04\x00\x00\x00note");
	ustr(f, note);
	OPS(f, "X\x0a\x00\x00\x00state_dict}(X\x01\x00\x00\x00w");
	tensor(f, &t);
	OPS(f, "uu.");
	if (variant == 2)
		OPS(f, "\x80\x02]X\x01\x00\x00\x00" "1a.");
	else if (variant == 3)
		OPS(f, "\x80\x02](X\x01\x00\x00\x00" "0X\x01\x00\x00\x00" "0e.");
	else if (variant == 4)
		OPS(f, "\x80\x02].");
	else
		OPS(f, "\x80\x02]X\x01\x00\x00\x00" "0a.");
	if (variant == 5)
		count[0] = 7;
	put(f, count, 8);
	for (int i = 0; i < 24; i++)
		op(f, (unsigned char) i);
	free(note);
}

static void
run_legacy(void)
{
	static const char *const msg[] = {
		NULL,
		"the checkpoint was saved on a big-endian machine",
		"the checkpoint's list of storages names \"1\", which the pickle does not",
		"the checkpoint's list of storages names \"0\" twice",
		"storage \"0\" has no data in the file",
		"storage \"0\" has 7 elements in the file, but the pickle says 6",
	};
	Buf			f = {0};

	for (int v = 0; v < 6; v++)
	{
		Arena		arena = {0};
		SpmAlloc	a = {arena_alloc, &arena};
		TfTorchCheckpoint c;
		char		err[512] = "";
		Mem			m;
		int			got;

		legacy(&f, v);
		m.p = f.p;
		m.len = f.len;
		got = tf_torch_checkpoint(read_mem, &m, f.len, &a, &c, err, sizeof(err));
		if (v == 0)
			check(got == 1 && c.tensors[0].offset == f.len - 24 && c.tensors[0].nbytes == 24 &&
				  c.storages[0].offset == f.len - 24,
				  "%-28s %d tensors %s", "legacy, a 70000-byte string", got, got < 0 ? err : "");
		else
			check(got == -1 && strstr(err, msg[v]) != NULL, "%-28s %s", "legacy, spoilt", err);
		arena_free(&arena);
		/* cut anywhere: refused, never read beyond the end */
		if (v == 0)
		{
			int			ok = 1;

			for (size_t cut = 0; cut < f.len; cut += cut < 200 ? 1 : 997)
			{
				SpmAlloc	b = {arena_alloc, &arena};

				m.len = cut;
				if (tf_torch_checkpoint(read_mem, &m, cut, &b, &c, err, sizeof(err)) != -1 || err[0] == '\0')
					ok = 0;
				arena_free(&arena);
			}
			check(ok, "%-28s", "legacy, cut anywhere");
		}
	}
	free(f.p);
}

int
main(int argc, char **argv)
{
	struct stat st;

	if (argc != 2)
	{
		fprintf(stderr, "usage: %s test/fixtures/torch\n", argv[0]);
		return 2;
	}
	unlink(MARKER);
	run_zip();
	run_pickles();
	run_legacy();
	run_fixtures(argv[1]);
	check(stat(MARKER, &st) != 0, "%-28s", "nothing ran: no " MARKER);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
