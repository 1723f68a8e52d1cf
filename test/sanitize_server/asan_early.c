/*
 * Preloaded after the ASan runtime into the (uninstrumented) postgres binary,
 * so that ASan initializes before any library takes glibc's gettext lock.
 *
 * Without it the server hangs at start: the constructor of libgpg-error (a
 * dependency of the server's libraries) calls bindtextdomain(), which takes
 * _nl_state_lock for writing and then calls malloc(); that first malloc()
 * initializes the preloaded ASan runtime, whose init calls dlsym() and
 * dlerror(), and dlerror() calls dcgettext(), which takes the same lock for
 * reading.  The lock ends up corrupted, and the next bindtextdomain() (in
 * postgres' main(): set_pglocale_pgservice()) waits for ever on a futex.
 *
 * Here bindtextdomain() is interposed: ASan is initialized first, with no
 * lock held, and the call goes on to glibc's.  A constructor does the same
 * for the case no library calls bindtextdomain() before main().
 * (test/sanitize_server/run.sh builds and preloads it.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

extern void __asan_init(void) __attribute__((weak));

static void
asan_init_now(void)
{
	if (__asan_init)
		__asan_init();			/* a no-op once done */
}

char *
bindtextdomain(const char *domain, const char *dir)
{
	static char *(*real) (const char *, const char *);

	asan_init_now();
	if (real == NULL)
		real = (char *(*) (const char *, const char *)) dlsym(RTLD_NEXT, "bindtextdomain");
	return real ? real(domain, dir) : NULL;
}

__attribute__((constructor)) static void
asan_early(void)
{
	asan_init_now();
}
