/*
 * threads.h
 *		Threads for one call: a small pool of worker threads that share a
 *		product with the calling thread.  No postgres.h.
 *
 * The workers only run the numeric kernels they are handed (column blocks
 * of tf_linear); they never call the server, never allocate, and block
 * every signal, so the server's signal handlers and interrupt checks stay
 * on the calling thread.  A parallel region ends before tf_parallel
 * returns, so a cancel (a longjmp on the calling thread, between products)
 * never leaves a worker inside the caller's buffers.
 */
#ifndef TF_THREADS_H
#define TF_THREADS_H

/* The most threads one call may use (the caller's included). */
#define TF_MAX_THREADS 64

/*
 * Use n threads per call from now on (1: none but the caller's).  Clamped
 * to 1..TF_MAX_THREADS; returns the number in effect.  Workers are started
 * when a product first needs them; fewer are used if the system refuses
 * threads.
 */
int			tf_threads_set(int n);

/* The number set (1 = single-threaded). */
int			tf_threads(void);

/* A task: part `part` of `nparts` (0 .. nparts-1). */
typedef void (*TfTask) (void *arg, int part, int nparts);

/*
 * Run task(arg, p, nparts) for every p in 0 .. nparts-1 and return when all
 * are done: part 0 on the calling thread, the others on workers (parts
 * beyond tf_parallel_parts() on the calling thread too).
 */
void		tf_parallel(int nparts, TfTask task, void *arg);

/* How many parts tf_parallel can run at once now (>= 1). */
int			tf_parallel_parts(void);

#endif							/* TF_THREADS_H */
