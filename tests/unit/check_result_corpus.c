/* Every file of the JSONTestSuite parsing corpus, read in place from
   $SP_JSON_TEST_SUITE, is ERROR as /probe/out: none of them is the one
   accepted form, whether the JSON is valid, invalid or implementation-defined.
   This is a crash-and-sanitizer net as much as a verdict check.  The corpus
   is part of acceptance: when it is missing the suite fails, it never skips.  */
#define _GNU_SOURCE
#include "sp_check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/error.h"
#include "text/result.h"

#define CORPUS_ENV        "SP_JSON_TEST_SUITE"
#define CORPUS_FILE_COUNT 318
/* Far above the biggest file (250001 bytes); a bigger one is still fed to the
   validator, truncated to CORPUS_READ_CAP + 1 bytes, and must be ERROR.  */
#define CORPUS_READ_CAP (1024 * 1024)

#define OUTCOME(s)                                                                                           \
  {                                                                                                          \
    (const uint8_t *)(s), sizeof (s) - 1                                                                     \
  }
static const struct sp_bytes STD[SP_OUTCOME_COUNT] = { OUTCOME ("YES"), OUTCOME ("NO"), OUTCOME ("MAYBE") };

/* Built in make_suite, before the runner forks: the sorted file list and the
   directory fd every file is opened relative to.  */
static int corpus_fd = -1;
static char **corpus_names;
static size_t corpus_count;
static char corpus_problem[512];

static int
compare_names (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static void
load_corpus (void)
{
  const char *path = getenv (CORPUS_ENV);
  cleanup_dir DIR *dir = NULL;
  int fd;
  struct dirent *de;
  size_t allocated = 0;

  if (path == NULL || path[0] == '\0')
    {
      snprintf (corpus_problem, sizeof (corpus_problem),
                "%s is not set: it must name JSONTestSuite's test_parsing directory", CORPUS_ENV);
      return;
    }
  corpus_fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (corpus_fd < 0)
    {
      snprintf (corpus_problem, sizeof (corpus_problem), "cannot open %s=%s: %s", CORPUS_ENV, path,
                strerror (errno));
      return;
    }
  /* fdopendir owns the fd it gets, so give it a duplicate.  */
  fd = fcntl (corpus_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0 || (dir = fdopendir (fd)) == NULL)
    {
      if (fd >= 0)
        close (fd);
      snprintf (corpus_problem, sizeof (corpus_problem), "cannot list %s: %s", path, strerror (errno));
      return;
    }
  while ((errno = 0, de = readdir (dir)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (corpus_count == allocated)
        {
          size_t next = allocated ? allocated * 2 : 512;
          char **grown = realloc (corpus_names, next * sizeof (*grown));

          if (grown == NULL)
            abort ();
          corpus_names = grown;
          allocated = next;
        }
      corpus_names[corpus_count] = strdup (de->d_name);
      if (corpus_names[corpus_count] == NULL)
        abort ();
      corpus_count++;
    }
  if (errno != 0)
    snprintf (corpus_problem, sizeof (corpus_problem), "reading %s: %s", path, strerror (errno));
  if (corpus_count > 0)
    qsort (corpus_names, corpus_count, sizeof (*corpus_names), compare_names);
}

/* Reads at most cap + 1 bytes of dirfd/name, so that an oversized file shows
   up as such.  Returns the length, or -1 with errno set.  */
static ssize_t
read_capped_at (int dirfd, const char *name, char *buf, size_t cap)
{
  cleanup_close int fd = -1;
  struct stat st;
  size_t used = 0;

  fd = openat (dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return -1;
  if (fstat (fd, &st) < 0)
    return -1;
  if (!S_ISREG (st.st_mode))
    {
      errno = EINVAL;
      return -1;
    }
  while (used < cap + 1)
    {
      ssize_t n = TEMP_FAILURE_RETRY (read (fd, buf + used, cap + 1 - used));

      if (n < 0)
        return -1;
      if (n == 0)
        break;
      used += (size_t)n;
    }
  return (ssize_t)used;
}

START_TEST (corpus_directory_is_available)
{
  ck_assert_msg (corpus_problem[0] == '\0', "JSONTestSuite corpus: %s", corpus_problem);
}
END_TEST

START_TEST (corpus_directory_holds_318_files)
{
  ck_assert_msg (corpus_count == CORPUS_FILE_COUNT, "%s holds %zu files, expected %d", CORPUS_ENV,
                 corpus_count, CORPUS_FILE_COUNT);
}
END_TEST

START_TEST (every_corpus_file_is_error)
{
  const char *name = corpus_names[_i];
  cleanup_free char *buf = malloc (CORPUS_READ_CAP + 1);
  sp_error_t err = NULL;
  ssize_t len;
  int got;

  ck_assert_ptr_nonnull (buf);
  len = read_capped_at (corpus_fd, name, buf, CORPUS_READ_CAP);
  ck_assert_msg (len >= 0, "%s: cannot read: %s", name, strerror (errno));
  got = sp_result_validate (buf, (size_t)len, STD, &err);
  ck_assert_msg (got == -1, "%s: validated to outcome %d instead of ERROR", name, got);
  ck_assert_msg (err != NULL, "%s: ERROR without a reason", name);
  sp_error_release (&err);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_result_corpus");
  TCase *tc = tcase_create ("json_test_suite");

  load_corpus ();
  tcase_add_test (tc, corpus_directory_is_available);
  tcase_add_test (tc, corpus_directory_holds_318_files);
  /* One TAP line per file; the failure message names the file.  */
  tcase_add_loop_test (tc, every_corpus_file_is_error, 0, (int)corpus_count);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
