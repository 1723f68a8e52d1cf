/*
 * job_sync.c
 *		The sync triggers of keep_in_sync jobs: an AFTER INSERT and an AFTER
 *		UPDATE trigger for each statement, with transition tables, so that
 *		a statement costs one insert into the queue, of chunks of keys.
 *
 *		The rule: a row is queued when it is inserted with a source and a
 *		NULL target; or when an update changes its source (or language)
 *		and leaves its target as it was; or leaves it with a source and a
 *		NULL target that was not NULL, or under a new key.  A target set by
 *		hand, with or without its source, stays.
 *
 *		Keys are written as text under fixed settings (JobKeySettingsBegin),
 *		never under the writing session's DateStyle, TimeZone and the like.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "ext_tables.h"
#include "jobs.h"

/* The columns a trigger reads, by attribute number (0: missing) */
typedef struct SyncColumns
{
	int64		job;
	AttrNumber	source;
	AttrNumber	target;
	AttrNumber	lang;			/* 0: none */
	int			chunk;			/* keys per queue row */
	int			nkeys;
	AttrNumber *keys;
	FmgrInfo   *out;			/* the key columns' output functions */
} SyncColumns;

static SPIPlanPtr enqueue_plan = NULL;
static Oid	enqueue_plan_queue = InvalidOid;

/* Append the key of slot to buf as a JSON array of its columns' text. */
static void
append_key(StringInfo buf, const SyncColumns *c, TupleTableSlot *slot)
{
	appendStringInfoChar(buf, '[');
	for (int i = 0; i < c->nkeys; i++)
	{
		bool		isnull;
		Datum		d = slot_getattr(slot, c->keys[i], &isnull);

		if (i > 0)
			appendStringInfoString(buf, ", ");
		if (isnull)
			appendStringInfoString(buf, "null");
		else
			escape_json(buf, OutputFunctionCall(&c->out[i], d));
	}
	appendStringInfoChar(buf, ']');
}

static bool
same_column(TupleTableSlot *a, TupleTableSlot *b, AttrNumber att)
{
	bool		an,
				bn;
	Datum		ad = slot_getattr(a, att, &an);
	Datum		bd = slot_getattr(b, att, &bn);
	Form_pg_attribute f = TupleDescAttr(a->tts_tupleDescriptor, att - 1);

	if (an || bn)
		return an && bn;
	return datum_image_eq(ad, bd, f->attbyval, f->attlen);
}

static bool
is_null(TupleTableSlot *s, AttrNumber att)
{
	bool		isnull;

	(void) slot_getattr(s, att, &isnull);
	return isnull;
}

/* The sync rule, for an inserted row (os NULL) or an updated one. */
static bool
needs_queue(const SyncColumns *c, TupleTableSlot *os, TupleTableSlot *ns)
{
	bool		src_changed,
				tgt_changed,
				key_changed = false;

	if (os == NULL)
		return !is_null(ns, c->source) && is_null(ns, c->target);
	src_changed = !same_column(os, ns, c->source) || (c->lang && !same_column(os, ns, c->lang));
	tgt_changed = !same_column(os, ns, c->target);
	for (int i = 0; i < c->nkeys && !key_changed; i++)
		key_changed = !same_column(os, ns, c->keys[i]);
	return (src_changed && !tgt_changed) ||
		(!is_null(ns, c->source) && is_null(ns, c->target) &&
		 ((tgt_changed && !is_null(os, c->target)) || key_changed));
}

/* Append the hash of slot's target to buf (JSON null for NULL): a hand edit since is then seen. */
static void
append_target(StringInfo buf, const SyncColumns *c, TupleTableSlot *slot)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, c->target, &isnull);
	Form_pg_attribute f = TupleDescAttr(slot->tts_tupleDescriptor, c->target - 1);

	if (isnull)
		appendStringInfoString(buf, "null");
	else
		appendStringInfo(buf, "%u", datum_image_hash(d, f->attbyval, f->attlen));
}

/* Queue the chunks (SPI connected): one statement for all of them. */
static void
enqueue(int64 job, List *chunks, List *targets, List *counts)
{
	JobAsOwner s;
	Oid			queue_rel;
	Datum		v[4];
	Datum	   *k = palloc(sizeof(Datum) * list_length(chunks));
	Datum	   *tg = palloc(sizeof(Datum) * list_length(chunks));
	Datum	   *n = palloc(sizeof(Datum) * list_length(chunks));
	int			i = 0;
	ListCell   *a,
			   *b,
			   *t;

	forthree(a, chunks, t, targets, b, counts)
	{
		k[i] = CStringGetTextDatum(lfirst(a));
		tg[i] = CStringGetTextDatum(lfirst(t));
		n[i] = Int32GetDatum(lfirst_int(b));
		i++;
	}
	JobInternalBegin(&s);
	queue_rel = ExtensionTableOid("transformer_job_queue");
	if (enqueue_plan == NULL || enqueue_plan_queue != queue_rel)
	{
		Oid			t[4] = {INT8OID, TEXTARRAYOID, INT4ARRAYOID, TEXTARRAYOID};
		SPIPlanPtr	p = SPI_prepare(psprintf("INSERT INTO %s (job, keys, n, targets) SELECT $1, k::pg_catalog.jsonb, c, "
											 "tg::pg_catalog.jsonb FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), "
											 "pg_catalog.unnest($4)) AS u(k, c, tg)",
											 JobTable("transformer_job_queue")), 4, t);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "could not prepare the queue insert");
		if (enqueue_plan)
			SPI_freeplan(enqueue_plan);
		enqueue_plan = p;
		enqueue_plan_queue = queue_rel;
	}
	v[0] = Int64GetDatum(job);
	v[1] = PointerGetDatum(construct_array(k, i, TEXTOID, -1, false, TYPALIGN_INT));
	v[2] = PointerGetDatum(construct_array(n, i, INT4OID, 4, true, TYPALIGN_INT));
	v[3] = PointerGetDatum(construct_array(tg, i, TEXTOID, -1, false, TYPALIGN_INT));
	if (SPI_execute_plan(enqueue_plan, v, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not queue the rows");
	JobInternalEnd(&s);
	EnsureJobSupervisorAtCommit();
}

/*
 * The columns of trigger arguments (job, source, target, language or '',
 * chunk size, key columns...); false if one is gone (renamed or dropped:
 * the supervisor fails the job, and the table's writes go on).
 */
static bool
sync_columns(Trigger *tg, TupleDesc desc, SyncColumns *c)
{
	c->job = pg_strtoint64(tg->tgargs[0] + (tg->tgargs[0][0] == 'r'));
	c->source = SPI_fnumber(desc, tg->tgargs[1]);
	c->target = SPI_fnumber(desc, tg->tgargs[2]);
	c->lang = tg->tgargs[3][0] ? SPI_fnumber(desc, tg->tgargs[3]) : 0;
	c->chunk = Max(1, pg_strtoint32(tg->tgargs[4]));
	c->nkeys = tg->tgnargs - 5;
	c->keys = palloc(sizeof(AttrNumber) * (c->nkeys + 1));
	c->out = palloc(sizeof(FmgrInfo) * (c->nkeys + 1));
	if (c->source <= 0 || c->target <= 0 || c->lang < 0)
		return false;
	for (int i = 0; i < c->nkeys; i++)
	{
		Oid			typoutput;
		bool		varlena;

		c->keys[i] = SPI_fnumber(desc, tg->tgargs[5 + i]);
		if (c->keys[i] <= 0)
			return false;
		getTypeOutputInfo(TupleDescAttr(desc, c->keys[i] - 1)->atttypid, &typoutput, &varlena);
		fmgr_info(typoutput, &c->out[i]);
	}
	return true;
}

/* Chunks queued by one statement at once, at most */
#define FLUSH_CHUNKS 1024

static void
flush(int64 job, List *chunks, List *targets, List *counts)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	enqueue(job, chunks, targets, counts);
	SPI_finish();
	list_free_deep(chunks);
	list_free_deep(targets);
	list_free(counts);
}

static Datum
statement_sync(TriggerData *td)
{
	Trigger    *tg = td->tg_trigger;
	TupleDesc	desc = RelationGetDescr(td->tg_relation);
	SyncColumns c;
	Tuplestorestate *news = td->tg_newtable;
	Tuplestorestate *olds = td->tg_oldtable;
	bool		update = TRIGGER_FIRED_BY_UPDATE(td->tg_event);
	TupleTableSlot *ns,
			   *os = NULL;
	StringInfoData chunk,
				tchunk;
	int			inchunk = 0;
	List	   *chunks = NIL,
			   *targets = NIL,
			   *counts = NIL;
	int			level;

	if (tg->tgnargs < 6 || news == NULL || (update && olds == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("transformer_job_sync must be a statement trigger with transition tables, a job, its columns and key")));
	if (!sync_columns(tg, desc, &c))
		return PointerGetDatum(NULL);

	level = JobKeySettingsBegin(true);
	ns = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	tuplestore_select_read_pointer(news, 0);
	tuplestore_rescan(news);
	if (update)
	{
		os = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
		tuplestore_select_read_pointer(olds, 0);
		tuplestore_rescan(olds);
	}
	initStringInfo(&chunk);
	initStringInfo(&tchunk);
	/* an update's old and new rows are in the same order, one pair per row */
	while (tuplestore_gettupleslot(news, true, false, ns))
	{
		bool		queue;

		if (update && !tuplestore_gettupleslot(olds, true, false, os))
			break;
		queue = needs_queue(&c, update ? os : NULL, ns);
		if (!queue)
			continue;
		appendStringInfoString(&chunk, inchunk == 0 ? "[" : ", ");
		appendStringInfoString(&tchunk, inchunk == 0 ? "[" : ", ");
		append_key(&chunk, &c, ns);
		append_target(&tchunk, &c, ns);
		if (++inchunk == c.chunk)
		{
			appendStringInfoChar(&chunk, ']');
			appendStringInfoChar(&tchunk, ']');
			chunks = lappend(chunks, pstrdup(chunk.data));
			targets = lappend(targets, pstrdup(tchunk.data));
			counts = lappend_int(counts, inchunk);
			resetStringInfo(&chunk);
			resetStringInfo(&tchunk);
			inchunk = 0;
			/* a statement of millions of rows: queued as it goes, in bounded memory */
			if (list_length(chunks) == FLUSH_CHUNKS)
			{
				flush(c.job, chunks, targets, counts);
				chunks = targets = counts = NIL;
			}
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (inchunk > 0)
	{
		appendStringInfoChar(&chunk, ']');
		appendStringInfoChar(&tchunk, ']');
		chunks = lappend(chunks, pstrdup(chunk.data));
		targets = lappend(targets, pstrdup(tchunk.data));
		counts = lappend_int(counts, inchunk);
	}
	ExecDropSingleTupleTableSlot(ns);
	if (os)
		ExecDropSingleTupleTableSlot(os);
	JobKeySettingsEnd(level);

	if (chunks != NIL)
		flush(c.job, chunks, targets, counts);
	return PointerGetDatum(NULL);
}

/*
 * Row triggers: a partitioned table's (statement triggers would miss rows
 * written to a partition directly; a row trigger is cloned to every
 * partition, now and later), whose job argument is "r" and the id; and the
 * triggers of jobs declared by 0.8.0 (job, source, target, key columns...).
 * The same rule, a row at a time, keys under the fixed settings.
 */
static Datum
row_sync(TriggerData *td)
{
	Trigger    *tg = td->tg_trigger;
	TupleDesc	desc = RelationGetDescr(td->tg_relation);
	bool		update = TRIGGER_FIRED_BY_UPDATE(td->tg_event);
	TupleTableSlot *ns = update ? td->tg_newslot : td->tg_trigslot;
	SyncColumns c;
	StringInfoData key,
				target;
	int			level;

	if (tg->tgnargs < 4 || (tg->tgargs[0][0] == 'r' && tg->tgnargs < 6))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("transformer_job_sync must be an AFTER INSERT OR UPDATE row trigger with a job, its columns and key")));
	if (tg->tgargs[0][0] == 'r')
	{
		if (!sync_columns(tg, desc, &c))
			return PointerGetDatum(NULL);
	}
	else
	{
		c.job = pg_strtoint64(tg->tgargs[0]);
		c.source = SPI_fnumber(desc, tg->tgargs[1]);
		c.target = SPI_fnumber(desc, tg->tgargs[2]);
		c.lang = 0;
		c.nkeys = tg->tgnargs - 3;
		c.keys = palloc(sizeof(AttrNumber) * c.nkeys);
		c.out = palloc(sizeof(FmgrInfo) * c.nkeys);
		if (c.source <= 0 || c.target <= 0)
			return PointerGetDatum(NULL);
		for (int i = 0; i < c.nkeys; i++)
		{
			Oid			typoutput;
			bool		varlena;

			c.keys[i] = SPI_fnumber(desc, tg->tgargs[3 + i]);
			if (c.keys[i] <= 0)
				return PointerGetDatum(NULL);
			getTypeOutputInfo(TupleDescAttr(desc, c.keys[i] - 1)->atttypid, &typoutput, &varlena);
			fmgr_info(typoutput, &c.out[i]);
		}
	}
	if (!needs_queue(&c, update ? td->tg_trigslot : NULL, ns))
		return PointerGetDatum(NULL);
	level = JobKeySettingsBegin(true);
	initStringInfo(&key);
	appendStringInfoChar(&key, '[');
	append_key(&key, &c, ns);
	appendStringInfoChar(&key, ']');
	initStringInfo(&target);
	appendStringInfoChar(&target, '[');
	append_target(&target, &c, ns);
	appendStringInfoChar(&target, ']');
	JobKeySettingsEnd(level);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	enqueue(c.job, list_make1(key.data), list_make1(target.data), list_make1_int(1));
	SPI_finish();
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(transformer_job_sync);
Datum
transformer_job_sync(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("transformer_job_sync: not called as a trigger")));
	if (!TRIGGER_FIRED_AFTER(td->tg_event) || TRIGGER_FIRED_BY_DELETE(td->tg_event) ||
		TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("transformer_job_sync must be an AFTER INSERT or AFTER UPDATE trigger")));
	if (TRIGGER_FIRED_FOR_ROW(td->tg_event))
		return row_sync(td);
	return statement_sync(td);
}

/* The sync triggers of a job: for inserts, for updates, and 0.8.0's row trigger */
const char *const SyncTriggerKinds[3] = {"insert", "update", "sync"};

char *
SyncTriggerName(int64 id, const char *kind)
{
	return psprintf("transformer_job_" INT64_FORMAT "_%s", id, kind);
}

/* The sync triggers of a job dropped (as the table's owner), if the table is still there. */
void
DropSyncTriggers(const JobRow *job)
{
	JobAsOwner s;
	char	   *relname = get_rel_name(job->relid);

	if (relname == NULL)
		return;					/* the table is gone, and its triggers with it */
	JobInternalBegin(&s);
	for (int i = 0; i < lengthof(SyncTriggerKinds); i++)
		if (SPI_execute(psprintf("DROP TRIGGER IF EXISTS %s ON %s", quote_identifier(SyncTriggerName(job->id, SyncTriggerKinds[i])),
								 quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)), relname)),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not drop the sync trigger of job " INT64_FORMAT, job->id);
	JobInternalEnd(&s);
}
