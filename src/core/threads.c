/*
 * threads.c
 *		The pool behind tf_parallel (threads.h).  No postgres.h.
 *
 * One region at a time: the caller publishes (task, arg, nparts), bumps a
 * generation counter and runs part 0; worker i runs part i + 1 if there is
 * one, then counts itself done.  Between regions (a decoder step has ~100
 * products a few microseconds apart) workers spin briefly on the counter
 * and then sleep on a condition variable, so an idle pool costs no CPU
 * and a busy one wakes in well under a microsecond.  The caller likewise
 * spins, then sleeps, until every worker is done.
 *
 * Workers are created with every signal blocked: PostgreSQL's handlers
 * (SIGINT for cancel, SIGTERM, SIGUSR1 latches, SIGALRM timeouts) must run
 * on the backend's own thread.  A pool belongs to the process that made
 * it: after a fork, the child starts its own.
 */
#include "threads.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <unistd.h>

/* ~50-100 µs of polling before sleeping */
#define SPIN_ROUNDS 20000

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

typedef struct Pool
{
	pthread_mutex_t mu;
	pthread_cond_t work;		/* generation moved (or quit) */
	pthread_cond_t done;		/* pending reached 0 */
	unsigned	gen;			/* bumped once per region (atomic) */
	int			pending;		/* workers not yet done with this region (atomic) */
	int			quit;			/* workers leave (atomic) */
	TfTask		task;			/* this region's task, arguments */
	void	   *arg;
	int			nparts;
	int			nworkers;		/* started */
	pid_t		owner;			/* the process that started them */
	pthread_t	tid[TF_MAX_THREADS];
	unsigned	gen0[TF_MAX_THREADS];	/* gen when each was started: it takes
										 * part in every region after that */
} Pool;

static Pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER};
static int	wanted = 1;

static void *
worker_main(void *p)
{
	int			me = (int) (long) p;	/* 0-based: runs part me + 1 */
	unsigned	seen = pool.gen0[me];

	for (;;)
	{
		unsigned	g;

		for (int i = 0; i < SPIN_ROUNDS; i++)
		{
			if (__atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE) != seen ||
				__atomic_load_n(&pool.quit, __ATOMIC_ACQUIRE))
				break;
			cpu_relax();
		}
		g = __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE);
		if (g == seen && !__atomic_load_n(&pool.quit, __ATOMIC_ACQUIRE))
		{
			pthread_mutex_lock(&pool.mu);
			while ((g = __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE)) == seen &&
				   !__atomic_load_n(&pool.quit, __ATOMIC_ACQUIRE))
				pthread_cond_wait(&pool.work, &pool.mu);
			pthread_mutex_unlock(&pool.mu);
		}
		if (__atomic_load_n(&pool.quit, __ATOMIC_ACQUIRE))
			return NULL;
		seen = g;
		if (me + 1 < pool.nparts)
			pool.task(pool.arg, me + 1, pool.nparts);
		if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_ACQ_REL) == 0)
		{
			pthread_mutex_lock(&pool.mu);
			pthread_cond_broadcast(&pool.done);
			pthread_mutex_unlock(&pool.mu);
		}
	}
}

/* stop and join every worker of this process */
static void
stop_workers(void)
{
	if (pool.nworkers == 0)
		return;
	pthread_mutex_lock(&pool.mu);
	__atomic_store_n(&pool.quit, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&pool.work);
	pthread_mutex_unlock(&pool.mu);
	for (int i = 0; i < pool.nworkers; i++)
		pthread_join(pool.tid[i], NULL);
	pool.nworkers = 0;
	__atomic_store_n(&pool.quit, 0, __ATOMIC_RELEASE);
}

/* workers for wanted - 1 parts, started with every signal blocked */
static void
start_workers(void)
{
	sigset_t	all,
				old;

	if (pool.nworkers > 0 && pool.owner != getpid())
	{
		/* a forked child: its parent's threads are not here */
		pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
		pthread_cond_t c = PTHREAD_COND_INITIALIZER;

		pool.mu = mu;
		pool.work = c;
		pool.done = c;
		pool.nworkers = 0;
		pool.quit = 0;
		pool.pending = 0;
	}
	if (pool.nworkers >= wanted - 1)
		return;
	pool.owner = getpid();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (pool.nworkers < wanted - 1)
	{
		pthread_attr_t attr;
		int			rc;

		/* kernels only: a small stack will do (the int8 path keeps 66 kB on it) */
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 1 << 20);
		pool.gen0[pool.nworkers] = __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE);
		rc = pthread_create(&pool.tid[pool.nworkers], &attr, worker_main,
							(void *) (long) pool.nworkers);
		pthread_attr_destroy(&attr);
		if (rc != 0)
			break;				/* fewer threads, never an error */
		pool.nworkers++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int
tf_threads_set(int n)
{
	if (n < 1)
		n = 1;
	if (n > TF_MAX_THREADS)
		n = TF_MAX_THREADS;
	if (n < wanted && pool.owner == getpid())
		stop_workers();			/* started again, fewer, when next needed */
	wanted = n;
	return wanted;
}

int
tf_threads(void)
{
	return wanted;
}

int
tf_parallel_parts(void)
{
	if (wanted <= 1)
		return 1;
	if (pool.nworkers < wanted - 1 || pool.owner != getpid())
		start_workers();
	return pool.nworkers + 1;
}

void
tf_parallel(int nparts, TfTask task, void *arg)
{
	int			workers;

	if (nparts <= 1 || tf_parallel_parts() <= 1)
	{
		for (int p = 0; p < nparts; p++)
			task(arg, p, nparts);
		return;
	}
	workers = pool.nworkers;
	pool.task = task;
	pool.arg = arg;
	pool.nparts = nparts;
	__atomic_store_n(&pool.pending, workers, __ATOMIC_RELEASE);
	/* publish: the workers read task, arg and nparts after seeing gen move */
	pthread_mutex_lock(&pool.mu);
	__atomic_add_fetch(&pool.gen, 1, __ATOMIC_ACQ_REL);
	pthread_cond_broadcast(&pool.work);
	pthread_mutex_unlock(&pool.mu);

	task(arg, 0, nparts);
	for (int p = workers + 1; p < nparts; p++)
		task(arg, p, nparts);	/* more parts than threads: the rest here */

	for (int i = 0; i < SPIN_ROUNDS; i++)
	{
		if (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) == 0)
			return;
		cpu_relax();
	}
	pthread_mutex_lock(&pool.mu);
	while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) != 0)
		pthread_cond_wait(&pool.done, &pool.mu);
	pthread_mutex_unlock(&pool.mu);
}
