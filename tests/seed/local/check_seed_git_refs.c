/* Reading the commit without git (git_seed.h): HEAD, loose refs,
   packed-refs, symbolic chains, and what is refused.  The git directories
   are written by hand.  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/open_beneath.h"
#include "seed/git_seed.h"

#include "seed/git_parse.h"
#include "seed_fixture.h"
#include "sp_check.h"

#define C1   "0123456789abcdef0123456789abcdef01234567"
#define C2   "89abcdef0123456789abcdef0123456789abcdef"
#define C256 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int git = -1;

static void
setup (void)
{
  fx_setup ();
  git = fx_mkdirs (fx_fd, "repo/.git");
  close (fx_mkdirs (git, "refs/heads"));
  close (fx_mkdirs (git, "refs/tags"));
  close (fx_mkdirs (git, "objects"));
}

static void
teardown (void)
{
  sp_closep (&git);
  fx_teardown ();
}

static void
commit_is (const char *expected)
{
  cleanup_error sp_error_t err = NULL;
  char commit[SP_COMMIT_HEX_MAX + 1];

  if (sp_git_read_commit (git, commit, &err) < 0)
    ck_abort_msg ("sp_git_read_commit: %s", sp_error_message (err));
  ck_assert_str_eq (commit, expected);
}

static void
fails_with (const char *fragment)
{
  cleanup_error sp_error_t err = NULL;
  char commit[SP_COMMIT_HEX_MAX + 1];

  ck_assert_int_eq (sp_git_read_commit (git, commit, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), fragment) != NULL, "`%s` is not in the error: %s", fragment,
                 sp_error_message (err));
}

START_TEST (read_commit_from_a_detached_head)
{
  fx_put (git, "HEAD", C1 "\n", 0644);
  commit_is (C1);
}
END_TEST

START_TEST (read_commit_through_a_loose_ref)
{
  fx_put (git, "HEAD", "ref: refs/heads/main\n", 0644);
  fx_put (git, "refs/heads/main", C1 "\n", 0644);
  fx_put (git, "packed-refs", C2 " refs/heads/main\n", 0644); /* the loose ref wins, as in git */
  commit_is (C1);
}
END_TEST

START_TEST (read_commit_through_packed_refs)
{
  fx_put (git, "HEAD", "ref: refs/heads/feature/x\n", 0644);
  fx_put (git, "packed-refs",
          "# pack-refs with: peeled fully-peeled sorted \n" C1 " refs/heads/main\n" C1 " refs/tags/v1\n^" C2
          "\n" C2 " refs/heads/feature/x\n",
          0644);
  commit_is (C2);
}
END_TEST

START_TEST (read_commit_refuses_a_malformed_packed_refs_line)
{
  fx_put (git, "HEAD", "ref: refs/heads/main\n", 0644);
  fx_put (git, "packed-refs", "# pack-refs with: peeled\n" C1 " refs/heads/a\n" C1 "refs/heads/main\n", 0644);
  fails_with ("packed-refs line 3");
}
END_TEST

START_TEST (read_commit_follows_a_symbolic_chain_of_five_levels)
{
  /* HEAD -> a -> b -> c -> d -> e: five symbolic steps, e holds the commit.  */
  fx_put (git, "HEAD", "ref: refs/heads/a\n", 0644);
  fx_put (git, "refs/heads/a", "ref: refs/heads/b\n", 0644);
  fx_put (git, "refs/heads/b", "ref: refs/heads/c\n", 0644);
  fx_put (git, "refs/heads/c", "ref: refs/heads/d\n", 0644);
  fx_put (git, "refs/heads/d", "ref: refs/heads/e\n", 0644);
  fx_put (git, "refs/heads/e", C1 "\n", 0644);
  commit_is (C1);
  /* One more level is too many.  */
  fx_put (git, "refs/heads/e", "ref: refs/heads/f\n", 0644);
  fx_put (git, "refs/heads/f", C1 "\n", 0644);
  fails_with ("nest more than 5 levels");
}
END_TEST

START_TEST (read_commit_detects_a_symbolic_loop)
{
  fx_put (git, "HEAD", "ref: refs/heads/a\n", 0644);
  fx_put (git, "refs/heads/a", "ref: refs/heads/b\n", 0644);
  fx_put (git, "refs/heads/b", "ref: refs/heads/a\n", 0644);
  fails_with ("nest more than 5 levels (a loop?)");
}
END_TEST

START_TEST (read_commit_reports_an_unborn_branch)
{
  fx_put (git, "HEAD", "ref: refs/heads/main\n", 0644);
  fails_with ("HEAD points at refs/heads/main, which has no commit");
  fx_put (git, "packed-refs", C1 " refs/heads/other\n", 0644);
  fails_with ("HEAD points at refs/heads/main, which has no commit");
}
END_TEST

START_TEST (read_commit_refuses_bad_ref_names)
{
  static const char *bad[] = {
    "refs/../../etc/passwd",
    "/etc/passwd",
    "heads/main",
    "refs/heads/../heads/main",
    "refs/heads//main",
    "refs/heads/.main",
    "refs/heads/main.lock",
    "refs/heads/main/",
    "refs/heads/main.",
    "refs/",
    "refs/heads/ma in",
    "refs/heads/ma~in",
    "refs/heads/ma^in",
    "refs/heads/ma:in",
    "refs/heads/ma?in",
    "refs/heads/ma*in",
    "refs/heads/ma[in",
    "refs/heads/ma\\in",
    "refs/heads/ma\001in",
    "refs/heads/ma\177in",
    "refs/heads/m@{1}",
  };
  char head[256];

  /* Targets that exist, so that only the name check can refuse them.  */
  fx_put (git, "refs/heads/.main", C1 "\n", 0644);
  fx_put (git, "refs/heads/main.lock", C1 "\n", 0644);
  fx_put (git, "refs/heads/main", C1 "\n", 0644);
  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_error sp_error_t err = NULL;
      char commit[SP_COMMIT_HEX_MAX + 1];

      snprintf (head, sizeof (head), "ref: %s\n", bad[i]);
      fx_put (git, "HEAD", head, 0644);
      ck_assert_msg (sp_git_read_commit (git, commit, &err) == -1, "accepted %s", bad[i]);
      ck_assert_msg (strstr (sp_error_message (err), "not a valid ref name") != NULL, "%s: %s", bad[i],
                     sp_error_message (err));
    }
}
END_TEST

/* A copy of name between two inaccessible pages, at the start of the page
   between them (at_end false) or at its end: a read outside the name
   faults, in every build.  ASan alone is not enough here: gcc -O2 inlines a
   short memcmp into loads that it does not check.  */
static char *
guarded_copy (const char *name, size_t len, bool at_end, char **map)
{
  long page = sysconf (_SC_PAGESIZE);
  char *m = mmap (NULL, 3 * (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *copy;

  ck_assert_ptr_ne (m, MAP_FAILED);
  ck_assert_int_eq (mprotect (m + page, (size_t)page, PROT_READ | PROT_WRITE), 0);
  copy = at_end ? m + 2 * page - len : m + page;
  memcpy (copy, name, len);
  *map = m;
  return copy;
}

/* Issue 11 item 8: for every name under refs/, the check of the first
   component read the byte before the name.  */
START_TEST (ref_name_check_reads_only_the_name)
{
  static const struct
  {
    const char *name;
    bool ok;
  } cases[] = {
    { "refs/heads/main", true }, { "refs/x", true },       { "refs/.x", false },
    { "refs/x.lock", false },    { "refs/heads/", false }, { "refs//x", false },
    { "refs/", false },          { "refs", false },        { "heads/main", false },
  };
  long page = sysconf (_SC_PAGESIZE);

  for (size_t i = 0; i < sizeof (cases) / sizeof (cases[0]); i++)
    for (int at_end = 0; at_end < 2; at_end++)
      {
        size_t len = strlen (cases[i].name);
        char *map;
        char *name = guarded_copy (cases[i].name, len, at_end, &map);

        ck_assert_msg (sp_git_ref_name_ok (name, len) == cases[i].ok, "%s", cases[i].name);
        munmap (map, 3 * (size_t)page);
      }
}
END_TEST

START_TEST (read_commit_refuses_a_symlinked_ref_file)
{
  cleanup_close int other = fx_mkdirs (fx_fd, "other");

  fx_put (other, "target", C1 "\n", 0644);
  fx_put (git, "HEAD", "ref: refs/heads/main\n", 0644);
  ck_assert_int_eq (symlinkat ("../../../../other/target", git, "refs/heads/main"), 0);
  fails_with ("`refs/heads/main` is or passes through a symlink");
}
END_TEST

START_TEST (read_commit_refuses_a_symlinked_ref_directory)
{
  cleanup_close int other = fx_mkdirs (fx_fd, "other");

  fx_put (other, "heads/main", C1 "\n", 0644);
  fx_put (git, "HEAD", "ref: refs/remotes/main\n", 0644);
  ck_assert_int_eq (symlinkat ("../../../other/heads", git, "refs/remotes"), 0);
  fails_with ("`refs/remotes/main` is or passes through a symlink");
}
END_TEST

START_TEST (read_commit_refuses_a_symlinked_head)
{
  cleanup_close int other = fx_mkdirs (fx_fd, "other");

  fx_put (other, "HEAD", C1 "\n", 0644);
  ck_assert_int_eq (symlinkat ("../../other/HEAD", git, "HEAD"), 0);
  fails_with ("`HEAD` is or passes through a symlink");
}
END_TEST

START_TEST (read_commit_reads_a_sha256_id)
{
  fx_put (git, "HEAD", "ref: refs/heads/main\n", 0644);
  fx_put (git, "refs/heads/main", C256 "\n", 0644);
  commit_is (C256);
  fx_put (git, "HEAD", C256 "\n", 0644);
  commit_is (C256);
}
END_TEST

START_TEST (read_commit_refuses_a_malformed_head)
{
  static const char *bad[] = {
    C1,                                           /* no newline */
    C1 "\n\n",                                    /* two */
    C1 "0\n",                                     /* 41 digits */
    "0123456789ABCDEF0123456789abcdef01234567\n", /* upper case */
    "ref: refs/heads/main",                       /* no newline */
    "ref:refs/heads/main\n",
    "",
  };

  fx_put (git, "refs/heads/main", C1 "\n", 0644);
  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      cleanup_error sp_error_t err = NULL;
      char commit[SP_COMMIT_HEX_MAX + 1];

      fx_put (git, "HEAD", bad[i], 0644);
      ck_assert_msg (sp_git_read_commit (git, commit, &err) == -1, "accepted HEAD %s", bad[i]);
    }
}
END_TEST

START_TEST (read_commit_refuses_a_fifo_head_without_blocking)
{
  ck_assert_int_eq (mkfifoat (git, "HEAD", 0644), 0);
  fails_with ("`HEAD` is not a regular file");
}
END_TEST

START_TEST (open_beneath_by_component_never_follows_a_symlink)
{
  cleanup_close int other = fx_mkdirs (fx_fd, "other");
  cleanup_close int ok = -1;
  int fd;

  fx_put (other, "f", "x", 0644);
  fx_put (git, "refs/heads/real", "x", 0644);
  ck_assert_int_eq (symlinkat ("../../other", git, "refs/link"), 0);
  ck_assert_int_eq (symlinkat ("../../../other/f", git, "refs/heads/flink"), 0);
  ok = sp_open_beneath_by_component (git, "refs/heads/real", O_RDONLY);
  ck_assert_int_ge (ok, 0);
  fd = sp_open_beneath_by_component (git, "refs/link/f", O_RDONLY);
  ck_assert_int_eq (fd, -1);
  ck_assert (errno == ELOOP || errno == ENOTDIR);
  fd = sp_open_beneath_by_component (git, "refs/heads/flink", O_RDONLY);
  ck_assert_int_eq (fd, -1);
  ck_assert_int_eq (errno, ELOOP);
  fd = sp_open_beneath_by_component (git, "refs/../HEAD", O_RDONLY);
  ck_assert_int_eq (fd, -1);
  ck_assert_int_eq (errno, EINVAL);
  fd = sp_open_beneath_by_component (git, "/etc/passwd", O_RDONLY);
  ck_assert_int_eq (fd, -1);
  ck_assert_int_eq (errno, EINVAL);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("seed_git_refs");
  TCase *tc = tcase_create ("refs");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, read_commit_from_a_detached_head);
  tcase_add_test (tc, read_commit_through_a_loose_ref);
  tcase_add_test (tc, read_commit_through_packed_refs);
  tcase_add_test (tc, read_commit_refuses_a_malformed_packed_refs_line);
  tcase_add_test (tc, read_commit_follows_a_symbolic_chain_of_five_levels);
  tcase_add_test (tc, read_commit_detects_a_symbolic_loop);
  tcase_add_test (tc, read_commit_reports_an_unborn_branch);
  tcase_add_test (tc, read_commit_refuses_bad_ref_names);
  tcase_add_test (tc, ref_name_check_reads_only_the_name);
  tcase_add_test (tc, read_commit_refuses_a_symlinked_ref_file);
  tcase_add_test (tc, read_commit_refuses_a_symlinked_ref_directory);
  tcase_add_test (tc, read_commit_refuses_a_symlinked_head);
  tcase_add_test (tc, read_commit_reads_a_sha256_id);
  tcase_add_test (tc, read_commit_refuses_a_malformed_head);
  tcase_add_test (tc, read_commit_refuses_a_fifo_head_without_blocking);
  tcase_add_test (tc, open_beneath_by_component_never_follows_a_symlink);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
