/*
 * checkpoint_files.c
 *		A checkpoint's weights as published: one model.safetensors, shards
 *		of it with model.safetensors.index.json, a pytorch_model.bin (zip or
 *		legacy format, read by the core's restricted unpickler) or shards of
 *		it with pytorch_model.bin.index.json.  Tensors are located first
 *		(name, dtype, shape, file and offset) and read one at a time when
 *		they are stored: an import never holds the model.
 */
#include "postgres.h"

#include <limits.h>
#include <sys/stat.h>

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "model_store.h"
#include "safetensors.h"
#include "server_files.h"
#include "torch_pickle.h"

/* checkpoint files: sharded ones of big models pass 4 GB */
#define MAX_CHECKPOINT_FILE ((Size) 1 << 40)
#define MAX_HEADER ((Size) 100 * 1024 * 1024)
#define MAX_INDEX_FILE ((Size) 64 * 1024 * 1024)
#define MAX_SHARDS 10000

static uint64
le64(const unsigned char *p)
{
	uint64		v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void
bad_safetensors(const char *fmt, const char *arg) pg_attribute_noreturn();

static void
bad_safetensors(const char *fmt, const char *arg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid safetensors file"),
			 errdetail(fmt, arg)));
}

/*
 * Parse a safetensors header (hdr: the 8 length bytes, then hlen of JSON)
 * before data_len bytes of data, with the core's reader (safetensors.c);
 * then the checks rows read back from the tables get too.  Each tensor's
 * offset is set, its data is left to the caller.
 */
/*
 * An encoder-only checkpoint (BERT, XLM-R) is read as BertModel /
 * XLMRobertaModel: a head model's prefix ("bert.", "roberta.") goes, and so
 * do what embed() never reads: the pooler and the pre-training heads, and
 * the position_ids buffer older files include.  Set for one
 * LocateCheckpoint() call.
 */
static bool encoder_checkpoint = false;

/* The name a tensor is stored under, or NULL to leave it out. */
static const char *
encoder_tensor_name(const char *name)
{
	static const char *const prefixes[] = {"bert.", "roberta.", "xlm_roberta.", "model."};
	static const char *const dropped[] = {"pooler.", "cls.", "lm_head.", "classifier.", "qa_outputs."};
	size_t		len;

	if (!encoder_checkpoint)
		return name;
	for (int i = 0; i < lengthof(prefixes); i++)
		if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
		{
			name += strlen(prefixes[i]);
			break;
		}
	for (int i = 0; i < lengthof(dropped); i++)
		if (strncmp(name, dropped[i], strlen(dropped[i])) == 0)
			return NULL;
	len = strlen(name);
	if (len >= 12 && strcmp(name + len - 12, "position_ids") == 0)
		return NULL;
	/* TensorFlow-era names, as from_pretrained() renames them */
	if (len > 6 && strcmp(name + len - 6, ".gamma") == 0)
		return psprintf("%.*s.weight", (int) len - 6, name);
	if (len > 5 && strcmp(name + len - 5, ".beta") == 0)
		return psprintf("%.*s.bias", (int) len - 5, name);
	return name;
}

static int
ParseSafetensorsHeader(const char *hdr, Size hlen, Size data_len, StoredTensor **out)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	TfSafetensor *st;
	StoredTensor *tensors;
	char		err[512];
	int			n = tf_safetensors_header(hdr + 8, hlen, data_len, &a, &st, err, sizeof(err));

	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid safetensors file"),
				 errdetail_internal("%s", err)));
	tensors = palloc0(sizeof(StoredTensor) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		StoredTensor *t = &tensors[i];
		const char *defect;

		t->name = (char *) encoder_tensor_name(st[i].name);
		if (t->name == NULL)
			continue;
		strlcpy(t->dtype, st[i].dtype, sizeof(t->dtype));
		if (strcmp(t->dtype, "F32") != 0 && strcmp(t->dtype, "F16") != 0 && strcmp(t->dtype, "BF16") != 0 &&
			strcmp(t->dtype, "I8") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("tensor \"%s\" has the unsupported dtype \"%s\"", t->name, st[i].dtype),
					 errhint("Supported are F32, F16, BF16 and I8.")));
		t->ndim = st[i].ndim;
		memcpy(t->shape, st[i].shape, sizeof(int64) * t->ndim);
		t->offset = (int64) st[i].begin;
		t->nbytes = (Size) (st[i].end - st[i].begin);
		/* the same checks as rows read back from the tables */
		defect = TensorDefect(t);
		if (defect != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid safetensors file"),
					 errdetail_internal("%s", defect)));
		/* tables of 0.6.0 hold a tensor in parts; older ones in one value */
		if (t->nbytes > MaxAllocSize - VARHDRSZ && !TensorsHaveParts())
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("tensor \"%s\" is too large to store", t->name),
					 errdetail("It has %zu bytes; a value may have at most %zu.",
							   (size_t) t->nbytes, (size_t) (MaxAllocSize - VARHDRSZ))));
	}
	*out = tensors;
	return n;
}

/* The header length of a safetensors file that has len bytes; ERROR if it does not fit. */
static Size
SafetensorsHeaderLength(const char *first8, Size len)
{
	uint64		hlen;

	if (len < 8)
		bad_safetensors("The file has %s bytes, fewer than the 8 of the header length.", psprintf("%zu", len));
	hlen = le64((const unsigned char *) first8);
	if (hlen > len - 8 || hlen > MAX_HEADER || hlen < 2)
		bad_safetensors("The header length %s does not fit in the file.", psprintf(UINT64_FORMAT, hlen));
	return (Size) hlen;
}

/* A whole safetensors file in memory (bytes from the client). */
int
ParseSafetensors(const char *buf, Size len, StoredTensor **out, Size *hlen_out)
{
	Size		hlen;
	int			n;

	encoder_checkpoint = false; /* bytes from load_model(): names as they are */
	hlen = SafetensorsHeaderLength(buf, len);
	n = ParseSafetensorsHeader(buf, hlen, len - 8 - hlen, out);

	for (int i = 0; i < n; i++)
		(*out)[i].data = buf + 8 + hlen + (*out)[i].offset;
	*hlen_out = hlen;
	return n;
}

/* Read exactly len bytes at offset, in pieces that cancel can interrupt. */
static void
ReadAt(FILE *f, const char *path, off_t offset, char *buf, Size len)
{
	const Size	piece = 16 * 1024 * 1024;

	if (fseeko(f, offset, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not seek in file \"%s\": %m", path)));
	for (Size done = 0; done < len; done += piece)
	{
		Size		n = Min(piece, len - done);

		CHECK_FOR_INTERRUPTS();
		if (fread(buf + done, 1, n, f) != n)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", path),
					 errdetail("It ended before the data its header describes.")));
	}
}

/* ------------------------------------------------------- checkpoints */

static bool
file_exists(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0)
		return true;
	if (errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	return false;
}

static int
add_file(CheckpointFiles *files, const char *path)
{
	for (int i = 0; i < files->nfiles; i++)
		if (strcmp(files->paths[i], path) == 0)
			return i;
	if (files->nfiles % 16 == 0)
		files->paths = files->paths == NULL ? palloc(sizeof(char *) * 16) :
			repalloc(files->paths, sizeof(char *) * (files->nfiles + 16));
	files->paths[files->nfiles] = pstrdup(path);
	return files->nfiles++;
}

typedef struct TensorList
{
	StoredTensor *t;
	int			n;
	int			cap;
} TensorList;

static StoredTensor *
next_tensor(TensorList *l)
{
	if (l->n == l->cap)
	{
		l->cap = l->cap ? 2 * l->cap : 256;
		if (l->cap > TF_SAFETENSORS_MAX_TENSORS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("checkpoint has more than %d tensors", TF_SAFETENSORS_MAX_TENSORS)));
		l->t = l->t == NULL ? palloc0(sizeof(StoredTensor) * l->cap) :
			repalloc(l->t, sizeof(StoredTensor) * l->cap);
		memset(l->t + l->n, 0, sizeof(StoredTensor) * (l->cap - l->n));
	}
	return &l->t[l->n++];
}

/*
 * The tensors of one safetensors file, located (header read, data not);
 * its header (8 + *hlen_out bytes) in *hdr_out if not NULL.
 */
static void
locate_safetensors(const char *dir, const char *path, int file, TensorList *l, char **hdr_out, Size *hlen_out)
{
	FILE	   *f;
	Size		fsize;
	char		first8[8];
	Size		hlen;
	char	   *hdr;
	StoredTensor *st;
	int			n;

	f = OpenServerFile(path, dir, MAX_CHECKPOINT_FILE, &fsize);
	memset(first8, 0, sizeof(first8));
	if (fsize >= 8)
		ReadAt(f, path, 0, first8, 8);
	hlen = SafetensorsHeaderLength(first8, fsize);
	hdr = palloc(8 + hlen);
	ReadAt(f, path, 0, hdr, 8 + hlen);
	FreeFile(f);
	n = ParseSafetensorsHeader(hdr, hlen, fsize - 8 - hlen, &st);
	for (int i = 0; i < n; i++)
	{
		StoredTensor *t;

		if (st[i].name == NULL)
			continue;			/* left out (encoder_tensor_name) */
		t = next_tensor(l);
		*t = st[i];
		t->src_file = file;
		t->src_offset = 8 + hlen + (uint64) st[i].offset;
		t->alias_of = -1;
	}
	if (hdr_out)
	{
		*hdr_out = hdr;
		*hlen_out = hlen;
	}
	else
		pfree(hdr);
}

/* the core's reads of a checkpoint file */
static int
read_at(void *ctx, uint64_t offset, void *buf, size_t len)
{
	FILE	   *f = ctx;

	if (offset > (uint64_t) LLONG_MAX || fseeko(f, (off_t) offset, SEEK_SET) != 0)
		return -1;
	return fread(buf, 1, len, f) == len ? 0 : -1;
}

/*
 * The tensors of a pytorch_model.bin, located with the core's reader: the
 * pickle runs in a restricted unpickler that knows only what a state dict
 * needs (torch_pickle_globals.c), so no code of the file is ever executed.
 * Names that alias an earlier tensor's bytes (tied weights) are marked.
 */
static void
locate_torch(const char *dir, const char *path, int file, TensorList *l)
{
	FILE	   *f;
	Size		fsize;
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	TfTorchCheckpoint ck;
	char		err[512];
	int			first = l->n;

	f = OpenServerFile(path, dir, MAX_CHECKPOINT_FILE, &fsize);
	if (tf_torch_checkpoint(read_at, f, fsize, &a, &ck, err, sizeof(err)) < 0)
	{
		size_t		len = strlen(err);

		FreeFile(f);
		/* the core's messages are lower-case phrases; a detail is a sentence */
		err[0] = (char) pg_toupper((unsigned char) err[0]);
		if (len > 0 && len + 1 < sizeof(err) && err[len - 1] != '.')
			strcat(err, ".");
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not read PyTorch checkpoint \"%s\"", path),
				 errdetail_internal("%s", err),
				 errhint("import_model() reads a state dict saved by torch.save(); it never runs code from the file.")));
	}
	FreeFile(f);
	for (int i = 0; i < ck.ntensors; i++)
	{
		TfTorchTensor *tt = &ck.tensors[i];
		StoredTensor *t;
		const char *defect;
		const char *name = encoder_tensor_name(tt->name);

		if (name == NULL)
			continue;
		if (strcmp(tt->dtype, "F32") != 0 && strcmp(tt->dtype, "F16") != 0 && strcmp(tt->dtype, "BF16") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("tensor \"%s\" has the unsupported dtype %s", tt->name,
							tf_torch_dtype_torch_name(tt->dtype) ? tf_torch_dtype_torch_name(tt->dtype) : tt->dtype),
					 errdetail("In \"%s\".", path),
					 errhint("Supported are float32, float16 and bfloat16.")));
		t = next_tensor(l);
		t->name = (char *) name;
		strlcpy(t->dtype, tt->dtype, sizeof(t->dtype));
		if (tt->ndim < 0 || tt->ndim > MAX_TENSOR_DIMS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("tensor \"%s\" has %d dimensions", tt->name, tt->ndim)));
		t->ndim = tt->ndim;
		memcpy(t->shape, tt->shape, sizeof(int64) * tt->ndim);
		t->nbytes = (Size) tt->nbytes;
		t->src_file = file;
		t->src_offset = tt->offset;
		t->alias_of = -1;
		defect = TensorDefect(t);
		if (defect != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid PyTorch checkpoint \"%s\"", path),
					 errdetail_internal("%s", defect)));
		for (int j = first; j < l->n - 1; j++)
			if (l->t[j].src_file == file && l->t[j].src_offset == t->src_offset &&
				l->t[j].nbytes == t->nbytes && strcmp(l->t[j].dtype, t->dtype) == 0 &&
				l->t[j].ndim == t->ndim &&
				memcmp(l->t[j].shape, t->shape, sizeof(int64) * t->ndim) == 0)
			{
				t->alias_of = l->t[j].alias_of >= 0 ? l->t[j].alias_of : j;
				break;
			}
	}
}

static Jsonb *
read_json_file(const char *dir, const char *path, const char *what)
{
	Size		len;
	char	   *s = ReadServerFile(path, dir, MAX_INDEX_FILE, &len);

	if (!pg_verify_mbstr(PG_UTF8, s, (int) len, true))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("%s is not valid UTF-8", what)));
	s = pg_any_to_server(s, (int) len, PG_UTF8);
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s)));
}

static void
bad_index(const char *index, const char *detail) pg_attribute_noreturn();

static void
bad_index(const char *index, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid checkpoint index \"%s\"", index),
			 errdetail_internal("%s", detail)));
}

/*
 * A sharded checkpoint: the index's weight_map names, for every weight, the
 * shard file that holds it.  Every shard is located, and every weight
 * listed must be in its shard, exactly once, and nothing else anywhere.
 */
static void
locate_shards(const char *dir, const char *index, bool torch, CheckpointFiles *files, TensorList *l)
{
	char	   *path = psprintf("%s/%s", dir, index);
	Jsonb	   *j = read_json_file(dir, path, index);
	JsonbValue *map;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	  **names = NULL;
	int		   *shard = NULL;
	int			nnames = 0;
	int			cap = 0;

	if (!JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		bad_index(index, "It is not a JSON object.");
	map = getKeyJsonValueFromContainer(&j->root, "weight_map", 10, NULL);
	if (map == NULL || map->type != jbvBinary || !JsonContainerIsObject(map->val.binary.data))
		bad_index(index, "It has no \"weight_map\" object.");

	it = JsonbIteratorInit(map->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *name;
		char	   *file;

		if (tok != WJB_KEY)
			continue;
		name = pnstrdup(v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		if (tok != WJB_VALUE || v.type != jbvString || v.val.string.len == 0)
			bad_index(index, psprintf("The shard of \"%s\" is not a file name.", name));
		file = pnstrdup(v.val.string.val, v.val.string.len);
		/* a file of the directory: no path, so an index cannot point elsewhere */
		if (strchr(file, '/') != NULL || strcmp(file, "..") == 0 || strcmp(file, ".") == 0)
			bad_index(index, psprintf("The shard \"%s\" of \"%s\" is not a file of the directory.", file, name));
		if (nnames == cap)
		{
			cap = cap ? 2 * cap : 256;
			if (cap > TF_SAFETENSORS_MAX_TENSORS)
				bad_index(index, "It lists too many weights.");
			names = names ? repalloc(names, sizeof(char *) * cap) : palloc(sizeof(char *) * cap);
			shard = shard ? repalloc(shard, sizeof(int) * cap) : palloc(sizeof(int) * cap);
		}
		names[nnames] = name;
		shard[nnames] = add_file(files, psprintf("%s/%s", dir, file));
		if (files->nfiles > MAX_SHARDS)
			bad_index(index, "It names too many shards.");
		nnames++;
	}
	if (nnames == 0)
		bad_index(index, "Its weight_map is empty.");

	for (int f = 0; f < files->nfiles; f++)
	{
		CHECK_FOR_INTERRUPTS();
		if (torch)
			locate_torch(dir, files->paths[f], f, l);
		else
			locate_safetensors(dir, files->paths[f], f, l, NULL, NULL);
	}

	/* every weight listed is in its shard exactly once; nothing unlisted */
	for (int i = 0; i < l->n; i++)
	{
		int			k;

		for (k = 0; k < nnames; k++)
			if (strcmp(names[k], l->t[i].name) == 0)
				break;
		if (k == nnames)
			bad_index(index, psprintf("Shard \"%s\" holds \"%s\", which the index does not list.",
									  files->paths[l->t[i].src_file], l->t[i].name));
		if (shard[k] != l->t[i].src_file)
			bad_index(index, psprintf("\"%s\" is in \"%s\", but the index puts it in \"%s\".",
									  l->t[i].name, files->paths[l->t[i].src_file], files->paths[shard[k]]));
		if (shard[k] == -1)
			bad_index(index, psprintf("\"%s\" is in more than one place.", l->t[i].name));
		shard[k] = -1;
	}
	for (int k = 0; k < nnames; k++)
		if (shard[k] != -1)
			bad_index(index, psprintf("\"%s\" is listed, but its shard \"%s\" does not hold it.",
									  names[k], files->paths[shard[k]]));
}

/* The names a checkpoint may tie to the shared embeddings (model_pack.c reads them as tied when absent). */
static bool
tied_name(const char *name)
{
	return strcmp(name, "model.encoder.embed_tokens.weight") == 0 ||
		strcmp(name, "model.decoder.embed_tokens.weight") == 0 ||
		strcmp(name, "lm_head.weight") == 0;
}

/* Non-persistent buffers of M2M100 (recomputed, never read) that old exports include. */
static bool
m2m100_buffer(const char *name)
{
	size_t		len = strlen(name);

	return (len > 24 && strcmp(name + len - 24, "embed_positions._float_tensor") == 0) ||
		(len > 23 && strcmp(name + len - 23, "embed_positions.weights") == 0);
}

int
LocateCheckpoint(const char *dir, ModelFamily family, CheckpointFiles *files, StoredTensor **out,
				 char **header, Size *hlen)
{
	bool		m2m100 = family == FAMILY_M2M100;
	TensorList	l;
	int			kept = 0;
	char	   *path;
	char	   *orig = NULL;
	Size		orig_len = 0;

	memset(&l, 0, sizeof(l));
	memset(files, 0, sizeof(*files));
	files->dir = pstrdup(dir);
	encoder_checkpoint = family == FAMILY_BERT || family == FAMILY_XLMR;
	if (file_exists(path = psprintf("%s/model.safetensors", dir)))
	{
		files->layout = "model.safetensors";
		locate_safetensors(dir, path, add_file(files, path), &l, &orig, &orig_len);
	}
	else if (file_exists(psprintf("%s/model.safetensors.index.json", dir)))
	{
		files->layout = "sharded safetensors";
		locate_shards(dir, "model.safetensors.index.json", false, files, &l);
	}
	else if (file_exists(path = psprintf("%s/pytorch_model.bin", dir)))
	{
		files->layout = "pytorch_model.bin";
		locate_torch(dir, path, add_file(files, path), &l);
	}
	else if (file_exists(psprintf("%s/pytorch_model.bin.index.json", dir)))
	{
		files->layout = "sharded pytorch_model.bin";
		locate_shards(dir, "pytorch_model.bin.index.json", true, files, &l);
	}
	else
	{
		const char *only = NULL;

		if (file_exists(psprintf("%s/tf_model.h5", dir)))
			only = "TensorFlow (tf_model.h5)";
		else if (file_exists(psprintf("%s/flax_model.msgpack", dir)))
			only = "Flax (flax_model.msgpack)";
		else if (file_exists(psprintf("%s/model.onnx", dir)) || file_exists(psprintf("%s/onnx", dir)))
			only = "ONNX";
		if (only)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("directory \"%s\" has only %s weights", dir, only),
					 errdetail("import_model() reads model.safetensors, pytorch_model.bin, or their shards with an index."),
					 errhint("Convert the weights to PyTorch or safetensors first, e.g. with Hugging Face's from_pretrained(..., from_tf=True or from_flax=True) and save_pretrained().")));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("directory \"%s\" has no model weights", dir),
				 errdetail("import_model() reads model.safetensors, model.safetensors.index.json with its shards, pytorch_model.bin, or pytorch_model.bin.index.json with its shards.")));
	}

	/* keep one copy of tied weights, and no recomputed buffers */
	for (int i = 0; i < l.n; i++)
	{
		StoredTensor *t = &l.t[i];

		if (m2m100 && m2m100_buffer(t->name))
			continue;
		if (t->alias_of >= 0 && tied_name(t->name))
			continue;
		if (t->alias_of >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("tensor \"%s\" shares its storage with \"%s\"", t->name, l.t[t->alias_of].name),
					 errdetail("Only token embeddings and the output layer may be tied.")));
		for (int j = 0; j < kept; j++)
			if (strcmp(l.t[j].name, t->name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("checkpoint has the tensor \"%s\" twice", t->name)));
		if (t->nbytes > MaxAllocSize - VARHDRSZ && !TensorsHaveParts())
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("tensor \"%s\" is too large to store", t->name),
					 errdetail("It has %zu bytes; a value may have at most %zu.",
							   (size_t) t->nbytes, (size_t) (MaxAllocSize - VARHDRSZ))));
		t->data = NULL;
		if (kept != i)
			l.t[kept] = *t;
		kept++;
	}
	/*
	 * The stored header: a model.safetensors's own, kept whole, so that
	 * export_model() writes the file back byte for byte; else one that
	 * describes the tensors as kept, laid end to end.
	 */
	if (orig != NULL && kept == l.n && !encoder_checkpoint)
	{
		*header = orig;
		*hlen = orig_len;
	}
	else
		*header = SafetensorsHeaderFor(l.t, kept, NULL, hlen);
	*out = l.t;
	return kept;
}

/* One located tensor's bytes, read into a new bytea; t->data points into it. */
bytea *
ReadTensorBytea(const CheckpointFiles *files, StoredTensor *t)
{
	const char *path = files->paths[t->src_file];
	FILE	   *f;
	Size		fsize;
	bytea	   *b;

	f = OpenServerFile(path, files->dir, MAX_CHECKPOINT_FILE, &fsize);
	if (t->src_offset > fsize || t->nbytes > fsize - t->src_offset)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("file \"%s\" changed during the import", path)));
	b = palloc(VARHDRSZ + t->nbytes);
	SET_VARSIZE(b, VARHDRSZ + t->nbytes);
	ReadAt(f, path, (off_t) t->src_offset, VARDATA(b), t->nbytes);
	FreeFile(f);
	t->data = VARDATA(b);
	return b;
}

/*
 * The safetensors header of tensors laid out in order: 8 bytes of length,
 * then the JSON, padded with spaces to a multiple of 8 (as safetensors
 * writes it).  Sets each tensor's offset; returns the header (8 + *hlen
 * bytes).  metadata, if not NULL, is the JSON of "__metadata__".
 */
char *
SafetensorsHeaderFor(StoredTensor *t, int n, const char *metadata, Size *hlen)
{
	StringInfoData j;
	uint64		offset = 0;
	uint64		len;
	char	   *out;

	initStringInfo(&j);
	appendStringInfo(&j, "{\"__metadata__\":%s", metadata ? metadata : "{\"format\":\"pt\"}");
	for (int i = 0; i < n; i++)
	{
		t[i].offset = offset;
		appendStringInfoChar(&j, ',');
		escape_json(&j, t[i].name);
		appendStringInfo(&j, ":{\"dtype\":\"%s\",\"shape\":[", t[i].dtype);
		for (int k = 0; k < t[i].ndim; k++)
			appendStringInfo(&j, k ? ",%lld" : "%lld", (long long) t[i].shape[k]);
		appendStringInfo(&j, "],\"data_offsets\":[%llu,%llu]}",
						 (unsigned long long) offset, (unsigned long long) (offset + t[i].nbytes));
		offset += t[i].nbytes;
	}
	appendStringInfoChar(&j, '}');
	while (j.len % 8 != 0)
		appendStringInfoChar(&j, ' ');
	len = j.len;
	out = palloc(8 + j.len);
	for (int b = 0; b < 8; b++)
		out[b] = (char) ((len >> (8 * b)) & 0xff);
	memcpy(out + 8, j.data, j.len);
	*hlen = j.len;
	return out;
}
