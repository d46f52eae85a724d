/* The index checks of the bounds-checked debug build.
 *
 * TFC_CHECK(cond): in the bounds-checked build (TFCOMPAT_BOUNDSCHECK=1 at build time, which
 * defines TFCOMPAT_CHECK_BOUNDS) a failed check prints the condition and aborts the process
 * before the access it guards: the hot loops use raw pointers, which Cython's boundscheck does
 * not see, and a kernel that went on would write where it must not. Normal builds compile the
 * checks away. The kernels never raise; the Python layer proves every index in range first,
 * and these checks prove that it did.
 */
#ifndef TFCOMPAT_CHECKS_H
#define TFCOMPAT_CHECKS_H

#ifdef TFCOMPAT_CHECK_BOUNDS
#include <stdio.h>
#include <stdlib.h>
static void tfc_check_failed(const char *cond, const char *file, int line) {
    fprintf(stderr, "tfcompat: index check failed: %s (%s:%d)\n", cond, file, line);
    fflush(stderr);
    abort();
}
#define TFC_CHECK(c) do { if (!(c)) tfc_check_failed(#c, __FILE__, __LINE__); } while (0)
#define TFC_CHECKS_ON 1
#else
#define TFC_CHECK(c) ((void)0)
#define TFC_CHECKS_ON 0
#endif

#endif
