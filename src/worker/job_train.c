/*
 * job_train.c
 *		The worker of a fine_tune() job: it loads the model's weights as
 *		fp32 master weights (or its last saved state), trains them step by
 *		step on the job's pairs (src/core/train_model.c), and stores the
 *		result as the new model, in one transaction.
 *
 * The run is a function of its settings and pairs alone: step s takes
 * batch (s - 1) mod steps_per_epoch of epoch (s - 1) / steps_per_epoch,
 * whose order is the query's (shuffle false) or a permutation drawn from
 * (seed, epoch); dropout's masks are drawn from (seed, step).  So a job
 * that resumes from a saved state (after a pause, a crash or a restart)
 * ends with the weights an uninterrupted run ends with, bit for bit.
 *
 * Between steps, in a short transaction: the job's state (paused or
 * cancelled: save and leave), the last step's loss, and, every
 * transformer.checkpoint_interval, the state saved (the weights, Adam's
 * moments, the sum of the checkpoints averaged).  The steps themselves run
 * outside any transaction, with the interrupt checks of the trainer.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "ext_tables.h"
#include "job_batch.h"
#include "job_train.h"
#include "jobs.h"
#include "tensor_ops.h"
#include "train_weights.h"

/* A saved state is stored in parts of at most this many bytes. */
#define PART_BYTES (64 * 1024 * 1024)
#define STATE_MAGIC 0x314b4354u	/* "TCK1" */

/* The job's settings (fine_tune()'s arguments, and what it counted). */
typedef struct RunSettings
{
	long		steps;			/* in all */
	long		per_epoch;		/* steps an epoch */
	long		average_every;	/* steps between the checkpoints averaged */
	int			average_last;
	int			batch_size;
	bool		has_rate;
	double		rate;
	long		warmup;
	double		smoothing;
	bool		has_dropout;
	double		dropout;
	bool		shuffle;
	int			seed;
	int			npairs;
} RunSettings;

/* The header of a saved state; the arrays follow it. */
typedef struct SavedHeader
{
	uint32		magic;
	uint32		has_avg;
	uint64		nparams;
	int64		step;			/* steps done */
	int64		adam_step;
	int64		avg_count;		/* checkpoints summed in avg */
} SavedHeader;

typedef struct Run
{
	int64		job;
	Oid			owner;
	char	   *model;
	char	   *new_model;
	RunSettings s;
	TrainWeights w;
	float	   *m;				/* (nparams) Adam's exp_avg */
	float	   *v;				/* (nparams) exp_avg_sq */
	float	   *avg;			/* (nparams) the sum of the checkpoints averaged, or NULL */
	long		avg_count;
	TfAdam		adam;
	long		step;			/* steps done */
	int		  **src;			/* (npairs) the pairs' ids */
	int		   *sn;
	int		  **tgt;
	int		   *tn;
	int		   *order;			/* (npairs) this epoch's order */
	long		order_epoch;	/* the epoch of order; -1: none yet */
	TfTrainState *st;
	TfTrainLimits lim;			/* what st holds: every batch is checked against it */
	/* the last step, to record */
	double		loss;
	int			tokens;
	double		lr;
	double		seconds;
	bool		unrecorded;
	TimestampTz saved_at;
	long		saved_step;		/* the step of the saved state (0: none) */
} Run;

static void
check_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/* ------------------------------------------------------------ transactions */

static void
begin_tx(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
}

static void
commit_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* ------------------------------------------------------------ settings and pairs */

static void
read_settings(Run *r, const JobRow *job)
{
	Oid			t[1] = {TEXTOID};
	Datum		v[1] = {CStringGetTextDatum(job->settings)};
	HeapTuple	tup;
	TupleDesc	d;
	bool		isnull;

	JobExec("SELECT (s->>'steps')::pg_catalog.int8, (s->>'steps_per_epoch')::pg_catalog.int8, "
			"(s->>'average_every')::pg_catalog.int8, (s->>'average_last')::pg_catalog.int4, "
			"(s->>'batch_size')::pg_catalog.int4, (s->>'learning_rate')::pg_catalog.float8, "
			"(s->>'warmup_steps')::pg_catalog.int8, (s->>'label_smoothing')::pg_catalog.float8, "
			"(s->>'dropout')::pg_catalog.float8, (s->>'shuffle')::pg_catalog.bool, (s->>'seed')::pg_catalog.int4, "
			"(s->>'pairs')::pg_catalog.int4 FROM (SELECT $1::pg_catalog.jsonb AS s) j",
			1, t, v, NULL, SPI_OK_SELECT);
	tup = SPI_tuptable->vals[0];
	d = SPI_tuptable->tupdesc;
	r->s.steps = DatumGetInt64(SPI_getbinval(tup, d, 1, &isnull));
	r->s.per_epoch = DatumGetInt64(SPI_getbinval(tup, d, 2, &isnull));
	r->s.average_every = DatumGetInt64(SPI_getbinval(tup, d, 3, &isnull));
	r->s.average_last = DatumGetInt32(SPI_getbinval(tup, d, 4, &isnull));
	r->s.batch_size = DatumGetInt32(SPI_getbinval(tup, d, 5, &isnull));
	r->s.rate = DatumGetFloat8(SPI_getbinval(tup, d, 6, &isnull));
	r->s.has_rate = !isnull;
	r->s.warmup = DatumGetInt64(SPI_getbinval(tup, d, 7, &isnull));
	r->s.smoothing = DatumGetFloat8(SPI_getbinval(tup, d, 8, &isnull));
	r->s.dropout = DatumGetFloat8(SPI_getbinval(tup, d, 9, &isnull));
	r->s.has_dropout = !isnull;
	r->s.shuffle = DatumGetBool(SPI_getbinval(tup, d, 10, &isnull));
	r->s.seed = DatumGetInt32(SPI_getbinval(tup, d, 11, &isnull));
	r->s.npairs = DatumGetInt32(SPI_getbinval(tup, d, 12, &isnull));
	if (r->s.steps < 1 || r->s.per_epoch < 1 || r->s.average_every < 1 || r->s.average_last < 1 ||
		r->s.batch_size < 1 || r->s.batch_size > 1024 || r->s.npairs < 1)
		elog(ERROR, "the settings of job " INT64_FORMAT " are damaged", r->job);
}

/* An id array of a pair row, checked against the vocabulary and the positions */
static int *
pair_ids(Run *r, Datum d, int vocab, int *n)
{
	ArrayType  *a = DatumGetArrayTypeP(d);
	int			count = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	int		   *ids;

	if (ARR_HASNULL(a) || ARR_ELEMTYPE(a) != INT4OID || count < 1 || count > r->w.tm.cfg.max_pos)
		elog(ERROR, "the pairs of job " INT64_FORMAT " are damaged", r->job);
	ids = palloc(sizeof(int) * count);
	memcpy(ids, ARR_DATA_PTR(a), sizeof(int) * count);
	for (int i = 0; i < count; i++)
		if (ids[i] < 0 || ids[i] >= vocab)
			elog(ERROR, "the pairs of job " INT64_FORMAT " are damaged", r->job);
	*n = count;
	return ids;
}

static void
read_pairs(Run *r, MemoryContext cxt)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(r->job)};
	int			n = r->s.npairs;
	JobAsOwner	as;
	Portal		p;
	int			k = 0;

	r->src = MemoryContextAllocHuge(cxt, sizeof(int *) * n);
	r->tgt = MemoryContextAllocHuge(cxt, sizeof(int *) * n);
	r->sn = MemoryContextAllocHuge(cxt, sizeof(int) * n);
	r->tn = MemoryContextAllocHuge(cxt, sizeof(int) * n);
	r->order = MemoryContextAllocHuge(cxt, sizeof(int) * n);
	JobInternalBegin(&as);
	p = SPI_cursor_open_with_args(NULL, psprintf("SELECT n, source_ids, target_ids FROM %s WHERE job = $1 ORDER BY n",
												 JobTable("transformer_job_pairs")),
								  1, t, v, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(p, true, 4096);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++, k++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			bool		isnull;
			MemoryContext old;

			CHECK_FOR_INTERRUPTS();
			if (k >= n || DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull)) != k)
				elog(ERROR, "the pairs of job " INT64_FORMAT " are damaged", r->job);
			old = MemoryContextSwitchTo(cxt);
			r->src[k] = pair_ids(r, SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull), r->w.tm.cfg.src_vocab, &r->sn[k]);
			r->tgt[k] = pair_ids(r, SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull), r->w.tm.cfg.vocab, &r->tn[k]);
			MemoryContextSwitchTo(old);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(p);
	JobInternalEnd(&as);
	if (k != n)
		elog(ERROR, "the pairs of job " INT64_FORMAT " are damaged", r->job);
}

/* splitmix64, as tf_dropout_keep draws */
static uint64
mix64(uint64 *x)
{
	uint64		z = (*x += UINT64CONST(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* The order of epoch e: the query's, or a Fisher-Yates permutation drawn from (seed, e) */
static void
epoch_order(Run *r, long e)
{
	uint64		x = ((uint64) (uint32) r->s.seed << 32) ^ (uint64) e;

	for (int i = 0; i < r->s.npairs; i++)
		r->order[i] = i;
	if (r->s.shuffle)
		for (int i = r->s.npairs - 1; i > 0; i--)
		{
			int			j = (int) (mix64(&x) % (uint64) (i + 1));
			int			tmp = r->order[i];

			r->order[i] = r->order[j];
			r->order[j] = tmp;
		}
	r->order_epoch = e;
}

static int
by_length_desc(const void *a, const void *b)
{
	int			x = *(const int *) a,
				y = *(const int *) b;

	return (x < y) - (x > y);
}

/* The sum of the batch_size longest of len (n of them): a bound for any batch. */
static long
longest_sum(const int *len, int n, int b)
{
	int		   *sorted = palloc(sizeof(int) * n);
	long		sum = 0;

	memcpy(sorted, len, sizeof(int) * n);
	qsort(sorted, n, sizeof(int), by_length_desc);
	for (int i = 0; i < b; i++)
		sum += sorted[i];
	pfree(sorted);
	return sum;
}

/*
 * The activations for the largest batch of the run: its batches are known
 * in advance (the orders are drawn from (seed, epoch)), so the state is
 * sized for the largest of them; a run too long to look through is sized
 * for the batch_size longest sources and targets.
 */
static void
alloc_state(Run *r, MemoryContext cxt)
{
	TfTrainLimits lim = {0};
	int			n = r->s.npairs;
	int			b = Min(r->s.batch_size, n);
	long		epochs = (r->s.steps + r->s.per_epoch - 1) / r->s.per_epoch;
	Size		bytes;
	char	   *buf;

	lim.sentences = b;
	lim.longest = 1;
	for (int i = 0; i < n; i++)
		lim.longest = Max(lim.longest, Max(r->sn[i], r->tn[i]));
	if (!r->s.shuffle)
		epochs = 1;				/* every epoch is the query's order */
	if ((double) epochs * n > 5e7)
	{
		lim.src_tokens = (int) longest_sum(r->sn, n, b);
		lim.tgt_tokens = (int) longest_sum(r->tn, n, b);
	}
	else
		for (long e = 0; e < epochs; e++)
		{
			epoch_order(r, e);
			for (int first = 0; first < n; first += r->s.batch_size)
			{
				int			ns = 0,
							nt = 0;

				for (int k = first; k < Min(n, first + r->s.batch_size); k++)
				{
					ns += r->sn[r->order[k]];
					nt += r->tn[r->order[k]];
				}
				lim.src_tokens = Max(lim.src_tokens, ns);
				lim.tgt_tokens = Max(lim.tgt_tokens, nt);
			}
			CHECK_FOR_INTERRUPTS();
		}
	r->order_epoch = -1;
	bytes = tf_train_state_size(&r->w.tm, &lim);
	if (bytes >= MaxAllocHugeSize - 64)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a batch of %d pairs needs %zu bytes of activations", b, (size_t) bytes),
				 errhint("Use a smaller batch_size.")));
	buf = MemoryContextAllocExtended(cxt, bytes + 64, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	r->st = tf_train_state_init(&r->w.tm, &lim, (void *) TYPEALIGN(64, buf));
	r->lim = lim;
}

/* ------------------------------------------------------------ saved states */

static void
save_state(Run *r)
{
	SavedHeader h;
	Size		np = r->w.tm.nparams;
	const char *arrays[4] = {(const char *) r->w.tm.params, (const char *) r->m, (const char *) r->v,
	(const char *) r->avg};
	int			narrays = r->avg ? 4 : 3;
	Size		total = sizeof(h) + (Size) narrays * np * sizeof(float);
	Oid			t[3] = {INT8OID, INT4OID, BYTEAOID};
	Datum		v[3];
	bytea	   *part = palloc_extended(VARHDRSZ + Min(total, PART_BYTES), MCXT_ALLOC_HUGE);
	Size		done = 0;
	int			k = 0;

	memset(&h, 0, sizeof(h));
	h.magic = STATE_MAGIC;
	h.has_avg = r->avg != NULL;
	h.nparams = np;
	h.step = r->step;
	h.adam_step = r->adam.step;
	h.avg_count = r->avg_count;
	v[0] = Int64GetDatum(r->job);
	JobExec(psprintf("DELETE FROM %s WHERE job = $1", JobTable("transformer_job_checkpoints")),
			1, t, v, NULL, SPI_OK_DELETE);
	/* the header and the arrays laid end to end, cut into parts */
	while (done < total)
	{
		Size		len = Min(total - done, PART_BYTES);
		Size		filled = 0;

		while (filled < len)
		{
			Size		at = done + filled;
			Size		take;
			const char *from;

			if (at < sizeof(h))
			{
				from = (const char *) &h + at;
				take = sizeof(h) - at;
			}
			else
			{
				Size		off = at - sizeof(h);
				Size		a = off / (np * sizeof(float));
				Size		in = off % (np * sizeof(float));

				from = arrays[a] + in;
				take = np * sizeof(float) - in;
			}
			take = Min(take, len - filled);
			memcpy(VARDATA(part) + filled, from, take);
			filled += take;
		}
		SET_VARSIZE(part, VARHDRSZ + len);
		v[1] = Int32GetDatum(k++);
		v[2] = PointerGetDatum(part);
		JobExec(psprintf("INSERT INTO %s (job, part, data) VALUES ($1, $2, $3)", JobTable("transformer_job_checkpoints")),
				3, t, v, NULL, SPI_OK_INSERT);
		done += len;
		CHECK_FOR_INTERRUPTS();
	}
	pfree(part);
	r->saved_at = GetCurrentTimestamp();
	r->saved_step = r->step;
}

/* The saved state, if the job has one: true, and r holds it. */
static bool
load_state(Run *r)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(r->job)};
	SavedHeader h;
	Size		np = r->w.tm.nparams;
	Size		done = 0,
				total = 0;
	char	   *arrays[4] = {(char *) r->w.tm.params, (char *) r->m, (char *) r->v, (char *) r->avg};
	int			parts;

	JobExec(psprintf("SELECT data FROM %s WHERE job = $1 ORDER BY part", JobTable("transformer_job_checkpoints")),
			1, t, v, NULL, SPI_OK_SELECT);
	parts = (int) SPI_processed;
	if (parts == 0)
		return false;
	for (int k = 0; k < parts; k++)
	{
		bool		isnull;
		bytea	   *b = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1, &isnull));
		Size		len = VARSIZE_ANY_EXHDR(b);
		const char *p = VARDATA_ANY(b);
		Size		used = 0;

		if (k == 0)
		{
			if (len < sizeof(h))
				goto damaged;
			memcpy(&h, p, sizeof(h));
			if (h.magic != STATE_MAGIC || h.nparams != np || h.step < 0 || h.step > r->s.steps ||
				h.adam_step != h.step || (h.has_avg != 0) != (r->avg != NULL) || h.avg_count < 0 ||
				h.avg_count > r->s.average_last)
				goto damaged;
			total = sizeof(h) + (Size) (h.has_avg ? 4 : 3) * np * sizeof(float);
			used = sizeof(h);
			done = sizeof(h);
		}
		while (used < len)
		{
			Size		off = done - sizeof(h);
			Size		a = off / (np * sizeof(float));
			Size		in = off % (np * sizeof(float));
			Size		take = Min(np * sizeof(float) - in, len - used);

			if (done + take > total)
				goto damaged;
			memcpy(arrays[a] + in, p + used, take);
			used += take;
			done += take;
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (done != total)
		goto damaged;
	r->step = h.step;
	r->adam.step = h.adam_step;
	r->avg_count = h.avg_count;
	r->saved_step = h.step;
	if (!tf_all_finite(np, r->w.tm.params))
		goto damaged;
	return true;
damaged:
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the saved state of job " INT64_FORMAT " is damaged", r->job),
			 errhint("cancel_job() it and run fine_tune() again.")));
	return false;
}

/* ------------------------------------------------------------ steps */

static double
step_rate(const Run *r, long step)
{
	if (r->s.has_rate)
		return tf_warmup_rate(r->s.rate, step, r->s.warmup);
	return tf_noam_rate(r->w.tm.cfg.d_model, step, r->s.warmup);
}

/* Is the end of step s a checkpoint averaged into the model? */
static bool
averaged_at(const Run *r, long s)
{
	long		to_end = r->s.steps - s;

	return to_end % r->s.average_every == 0 && to_end / r->s.average_every < r->s.average_last;
}

/* One step: the batch, forward, backward, Adam.  false if the loss is not finite (nothing changed). */
static bool
train_step(Run *r)
{
	long		s = r->step + 1;
	long		e = (s - 1) / r->s.per_epoch;
	long		first = ((s - 1) % r->s.per_epoch) * r->s.batch_size;
	int			nb = (int) Min((long) r->s.batch_size, (long) r->s.npairs - first);
	const int **src = palloc(sizeof(int *) * nb);
	const int **tgt = palloc(sizeof(int *) * nb);
	int		   *n = palloc(sizeof(int) * nb);
	int		   *t = palloc(sizeof(int) * nb);
	TimestampTz t0 = GetCurrentTimestamp();
	double		loss;
	long		ms;
	int			us;

	if (r->order_epoch != e)
		epoch_order(r, e);
	r->tokens = 0;
	for (int b = 0; b < nb; b++)
	{
		int			p = r->order[first + b];

		src[b] = r->src[p];
		n[b] = r->sn[p];
		tgt[b] = r->tgt[p];
		t[b] = r->tn[p];
		r->tokens += n[b] + t[b];
	}
	/* the state was sized for the run's batches; one that does not fit would write past it */
	{
		int			ns = 0,
					nt = 0,
					longest = 0;

		for (int b = 0; b < nb; b++)
		{
			ns += n[b];
			nt += t[b];
			longest = Max(longest, Max(n[b], t[b]));
		}
		if (nb > r->lim.sentences || ns > r->lim.src_tokens || nt > r->lim.tgt_tokens || longest > r->lim.longest)
			elog(ERROR, "batch of step %ld of job " INT64_FORMAT " exceeds the activations it was sized for", s, r->job);
	}
	r->w.tm.drop.step = s;
	loss = tf_train_batch(&r->w.tm, r->st, nb, src, n, tgt, t, (float) r->s.smoothing);
	r->loss = loss;
	if (!isfinite(loss))
	{
		memset(r->w.tm.grads, 0, sizeof(float) * r->w.tm.nparams);
		return false;
	}
	r->lr = step_rate(r, s);
	tf_train_adam(&r->w.tm, r->m, r->v, &r->adam, r->lr);
	r->step = s;
	if (r->avg && averaged_at(r, s))
	{
		for (Size i = 0; i < r->w.tm.nparams; i++)
			r->avg[i] += r->w.tm.params[i];
		r->avg_count++;
	}
	TimestampDifference(t0, GetCurrentTimestamp(), &ms, &us);
	r->seconds = ms + us / 1e6;
	r->unrecorded = true;
	pfree(src);
	pfree(tgt);
	pfree(n);
	pfree(t);
	return true;
}

static void
record_step(Run *r)
{
	Oid			t[7] = {INT8OID, INT4OID, FLOAT8OID, INT4OID, FLOAT8OID, FLOAT8OID, OIDOID};
	Datum		v[7];

	if (!r->unrecorded)
		return;
	v[0] = Int64GetDatum(r->job);
	v[1] = Int32GetDatum((int32) r->step);
	v[2] = Float8GetDatum(r->loss);
	v[3] = Int32GetDatum(r->tokens);
	v[4] = Float8GetDatum(r->lr);
	v[5] = Float8GetDatum(r->seconds);
	v[6] = ObjectIdGetDatum(r->owner);
	/* a step done again after a resume replaces its row */
	JobExec(psprintf("INSERT INTO %s AS s (job, step, loss, tokens, learning_rate, seconds, owner) "
					 "VALUES ($1, $2, $3, $4, $5, $6, $7::regrole) ON CONFLICT (job, step) DO UPDATE "
					 "SET loss = $3, tokens = $4, learning_rate = $5, seconds = $6, at = pg_catalog.now()",
					 JobTable("transformer_job_steps")), 7, t, v, NULL, SPI_OK_INSERT);
	r->unrecorded = false;
}

static void
set_job(int64 job, const char *sets)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(job)};

	JobExec(psprintf("UPDATE %s SET %s WHERE id = $1", JobTable("transformer_job"), sets), 1, t, v, NULL, SPI_OK_UPDATE);
}

static void
forget_run(int64 job)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(job)};

	JobExec(psprintf("DELETE FROM %s WHERE job = $1", JobTable("transformer_job_checkpoints")), 1, t, v, NULL, SPI_OK_DELETE);
	JobExec(psprintf("DELETE FROM %s WHERE job = $1", JobTable("transformer_job_pairs")), 1, t, v, NULL, SPI_OK_DELETE);
}

/* The new model: the average of the checkpoints (or the last weights), stored under new_model. */
static void
store_model(Run *r)
{
	const float *params = r->w.tm.params;
	char	   *meta;
	StringInfoData m;

	if (r->avg)
	{
		float	   *mean = palloc_extended(sizeof(float) * r->w.tm.nparams, MCXT_ALLOC_HUGE);

		if (r->avg_count != r->s.average_last)
			elog(ERROR, "job " INT64_FORMAT " averaged %ld checkpoints, not %d", r->job, r->avg_count, r->s.average_last);
		for (Size i = 0; i < r->w.tm.nparams; i++)
			mean[i] = r->avg[i] / (float) r->avg_count;
		params = mean;
	}
	initStringInfo(&m);
	appendStringInfoString(&m, "{\"format\":\"pt\",\"fine_tuned_from\":");
	escape_json(&m, r->model);
	appendStringInfo(&m, ",\"fine_tune_job\":\"" INT64_FORMAT "\",\"steps\":\"%ld\",\"averaged\":\"%d\"}",
					 r->job, r->step, r->avg ? r->s.average_last : 1);
	meta = m.data;
	StoreTrainedModel(r->model, r->new_model, &r->w, params, meta);
}

/* ------------------------------------------------------------ the worker */

typedef enum
{
	GO_ON, LEAVE
} Next;

/*
 * Between two steps, in a transaction: the job's state, the last step's
 * row, a saved state when one is due, and the end.
 */
static Next
between_steps(Run *r, bool nan)
{
	JobRow		job;
	Next		next = GO_ON;

	BatchWaitWriters(r->job);
	if (!OidIsValid(get_extension_oid("transformer", true)) || !ReadJob(r->job, &job))
		return LEAVE;
	if (strcmp(job.state, "cancelled") == 0)
	{
		forget_run(r->job);
		return LEAVE;
	}
	if (strcmp(job.state, "queued") != 0 && strcmp(job.state, "running") != 0)
	{
		/* paused (or failed, or done meanwhile): keep where it is, to resume from */
		record_step(r);
		if (strcmp(job.state, "paused") == 0 && r->step > 0)
			save_state(r);
		return LEAVE;
	}
	if (strcmp(job.state, "queued") == 0)
		set_job(r->job, "state = 'running', started_at = coalesce(started_at, pg_catalog.now()), waiting = NULL");
	record_step(r);
	if (nan)
	{
		/* the last good state stays saved; the step is not taken */
		Oid			t[2] = {INT8OID, TEXTOID};
		Datum		v[2] = {Int64GetDatum(r->job),
			CStringGetTextDatum(psprintf("the loss of step %ld is %g; the job stopped and keeps its last saved state, "
										 "of step %ld%s: run fine_tune() again with a lower learning_rate or a longer warmup_steps",
										 r->step + 1, r->loss, r->saved_step,
										 r->saved_step == 0 ? " (the model as it was)" : ""))};

		JobExec(psprintf("UPDATE %s SET state = 'failed', last_error = $2, finished_at = pg_catalog.now() WHERE id = $1",
						 JobTable("transformer_job")), 2, t, v, NULL, SPI_OK_UPDATE);
		ereport(LOG, (errmsg("transformer job " INT64_FORMAT " failed: %s", r->job, TextDatumGetCString(v[1]))));
		return LEAVE;
	}
	if (r->step == r->s.steps)
		next = LEAVE;			/* the end: saved, then stored in a transaction of its own */
	if (next == LEAVE ||
		(r->step > 0 && (r->avg && averaged_at(r, r->step))) ||
		(r->step > 0 && TimestampDifferenceExceeds(r->saved_at, GetCurrentTimestamp(), train_checkpoint_interval * 1000)))
		save_state(r);
	return next;
}

static void
finish(Run *r)
{
	JobRow		job;

	BatchWaitWriters(r->job);
	if (!ReadJob(r->job, &job) || (strcmp(job.state, "queued") != 0 && strcmp(job.state, "running") != 0))
		return;
	pgstat_report_activity(STATE_RUNNING, psprintf("storing model %s", r->new_model));
	store_model(r);
	set_job(r->job, "state = 'done', finished_at = pg_catalog.now(), waiting = NULL");
	forget_run(r->job);
}

void
FineTuneWorker(const JobWorkerArgs *a)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "fine_tune", ALLOCSET_DEFAULT_SIZES);
	MemoryContext step_cxt = AllocSetContextCreate(cxt, "fine_tune step", ALLOCSET_DEFAULT_SIZES);
	Run		   *r = MemoryContextAllocZero(cxt, sizeof(Run));
	bool		stored = false;

	r->job = a->job;
	r->order_epoch = -1;

	/*
	 * job_worker.c commits without waiting for the disk: a translation batch
	 * lost in a crash is done again in seconds.  A saved state stands for up
	 * to transformer.checkpoint_interval of training, and a crash restart
	 * drops the WAL not yet written: its commit waits (a step's commit too,
	 * a few milliseconds against a step's tenths of a second).
	 */
	SetConfigOption("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION);
	PG_TRY();
	{
		JobRow		job;
		bool		resumed;

		/* the model, the pairs, and the saved state if there is one */
		begin_tx();
		pgstat_report_activity(STATE_RUNNING, "loading the model to fine-tune");
		if (!ReadJob(a->job, &job) || !job.fine_tune ||
			(strcmp(job.state, "queued") != 0 && strcmp(job.state, "running") != 0))
		{
			commit_tx();
			MemoryContextDelete(cxt);
			return;
		}
		/* SPI calls return in SPI's context: everything kept is allocated in cxt explicitly */
		r->owner = job.owner;
		r->model = MemoryContextStrdup(cxt, job.model);
		r->new_model = MemoryContextStrdup(cxt, job.new_model);
		read_settings(r, &job);
		LoadTrainWeights(r->model, &r->w, cxt);
		r->w.tm.interrupt = check_interrupts;
		if (r->s.has_dropout)
			r->w.tm.drop.hidden = r->w.tm.drop.attention = r->w.tm.drop.activation = (float) r->s.dropout;
		else
		{
			r->w.tm.drop.hidden = r->w.dropout;
			r->w.tm.drop.attention = r->w.attention_dropout;
			r->w.tm.drop.activation = r->w.activation_dropout;
		}
		r->w.tm.drop.seed = (unsigned long long) (uint32) r->s.seed;
		r->m = MemoryContextAllocExtended(cxt, sizeof(float) * r->w.tm.nparams, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		r->v = MemoryContextAllocExtended(cxt, sizeof(float) * r->w.tm.nparams, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		if (r->s.average_last > 1)
			r->avg = MemoryContextAllocExtended(cxt, sizeof(float) * r->w.tm.nparams, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		r->adam.beta1 = 0.9;
		r->adam.beta2 = 0.98;
		r->adam.eps = 1e-9;
		read_pairs(r, cxt);
		resumed = load_state(r);
		if (resumed)
			ereport(LOG, (errmsg("transformer job " INT64_FORMAT " resumes fine-tuning at step %ld of %ld",
								 r->job, r->step + 1, r->s.steps)));
		commit_tx();
		alloc_state(r, cxt);
		r->saved_at = GetCurrentTimestamp();

		for (;;)
		{
			bool		ok = true;
			Next		next;

			if (r->step < r->s.steps)
			{
				MemoryContext old = MemoryContextSwitchTo(step_cxt);

				pgstat_report_activity(STATE_RUNNING, psprintf("fine-tuning step %ld of %ld", r->step + 1, r->s.steps));
				ok = train_step(r);
				MemoryContextSwitchTo(old);
				MemoryContextReset(step_cxt);
			}
			begin_tx();
			next = between_steps(r, !ok);
			commit_tx();
			if (next == LEAVE)
				break;
		}
		if (r->step == r->s.steps && isfinite(r->loss))
		{
			begin_tx();
			finish(r);
			commit_tx();
			stored = true;
		}
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		FailJobNow(a->job, e->message ? e->message : "unknown error");
	}
	PG_END_TRY();
	(void) stored;
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextDelete(cxt);
}
