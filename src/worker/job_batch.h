/*
 * job_batch.h
 *		The rows of one batch of a job worker (job_batch.c): claimed off
 *		the queue, read, and written back, for job_worker.c, which runs the
 *		model over them.
 */
#ifndef JOB_BATCH_H
#define JOB_BATCH_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "jobs.h"

typedef struct BatchRow
{
	char	   *key;			/* JSON array text */
	bool		exists;			/* the row is still there */
	text	   *source;			/* NULL: source is NULL */
	char	   *old_target;		/* the target as read (text form), NULL if NULL */
	bool		target_null;	/* the target as read: NULL, or its hash */
	uint32		target_hash;
	bool		check_target;	/* queued with its target's state (snap_*): */
	bool		snap_null;		/* a target that differs now was written by hand */
	uint32		snap_hash;
	char	   *lang;			/* source_lang_column's value, NULL if NULL or none */
	Datum		out;			/* text, or real[]; 0: NULL */
	bool		failed;
	char		sqlstate[6];
	char	   *message;
} BatchRow;

typedef enum BatchResult
{
	BATCH_DID_WORK,
	BATCH_IDLE,					/* nothing to claim: wait */
	BATCH_EXIT					/* the job is over for this worker */
} BatchResult;

/*
 * Run fn(arg) in a subtransaction.  True if it succeeded; otherwise a row
 * error is stored in r, and anything else is thrown again.
 */
extern bool BatchInSubxact(void (*fn) (void *), void *arg, BatchRow *r);

/* Wait until no transaction that changes the job row is in progress. */
extern void BatchWaitWriters(int64 job);

/* Take chunks of keys off the queue, at least batch_size keys if there are; deduplicated. */
extern int	BatchClaimKeys(const JobRow *job, BatchRow **rows_out);

/* The queue is empty: the job is syncing (keep_in_sync) or done. */
extern void BatchSettleState(int64 job);

/* The job's table, schema-qualified and quoted, for the batch's statements. */
extern char *BatchTableSql(const JobRow *job);

/* Read the rows of the claimed keys, all in one statement (job_batch.c says more). */
extern void BatchReadRows(const JobRow *job, const char *tbl, int n, BatchRow *rows);

/*
 * Write each row whose source, language and target are still the ones
 * read; returns the rows written, *stale the keys to queue again.
 */
extern int64 BatchWriteRows(const JobRow *job, const char *tbl, int n, BatchRow *rows, List **stale);

/* Queue again the rows not written whose source changed since they were read (a job without triggers). */
extern void BatchRequeueStale(const JobRow *job, const char *tbl, List *stale);

#endif							/* JOB_BATCH_H */
