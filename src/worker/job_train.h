/*
 * job_train.h
 *		The worker of a fine_tune() job (job_train.c): it trains the model
 *		step by step, saves its state to resume from, and stores the new
 *		model.
 */
#ifndef JOB_TRAIN_H
#define JOB_TRAIN_H

#include "jobs.h"

/* Run the job's training until it is done, paused, cancelled or failed. */
extern void FineTuneWorker(const JobWorkerArgs *a);

#endif							/* JOB_TRAIN_H */
