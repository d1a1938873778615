/* Staging a clone's commit (git_stage.h): only `.git` is copied, the
   commit's tree is written from the objects, and the tree writer's refusals
   and limits.  Fixture repositories are made with the git CLI (plumbing for
   trees no working tree could hold); the program skips without it.  The
   product never runs git.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "seed/git_seed.h"
#include "seed/git_stage.h"

#include "seed_fixture.h"
#include "sp_check.h"

static const struct sp_copy_options roomy = {
  .max_bytes = 1 << 20,
  .max_entries = 1000,
  .max_depth = 20,
};

static int repo = -1;
static int seed = -1;
static char repo_path[128];
/* The submodules of the last stage; policy is the next one's.  */
static struct sp_git_submodules sub;

static void
setup (void)
{
  fx_setup ();
  repo = fx_git_repo ("repo", "sha1");
  snprintf (repo_path, sizeof (repo_path), "%s/repo", fx_dir);
  seed = fx_mkdirs (fx_fd, "seed");
  sub = (struct sp_git_submodules){ .policy = SP_SUBMODULES_OMIT };
}

static void
teardown (void)
{
  sp_git_submodules_release (&sub);
  sp_closep (&repo);
  sp_closep (&seed);
  fx_teardown ();
}

/* Points main at a commit of the tree that `git mktree` makes from records:
   ls-tree lines, printf-escaped for the shell.  */
static void
plumb (const char *records)
{
  ck_assert_int_eq (fx_sh ("set -e; cd %s; t=$(printf '%s' | git mktree);"
                           " c=$(git -c user.name=t -c user.email=t@example.com commit-tree $t -m plumbed);"
                           " git update-ref refs/heads/main $c",
                           repo_path, records),
                    0);
}

/* A blob of content in the fixture repository; its id into oid.  */
static void
blob (const char *content, char oid[SP_COMMIT_HEX_MAX + 1])
{
  char path[PATH_MAX];
  cleanup_free char *text = NULL;

  ck_assert_int_eq (
      fx_sh ("printf '%s' | git -C %s hash-object -w --stdin > %s/oid.txt", content, repo_path, fx_dir), 0);
  snprintf (path, sizeof (path), "%s/oid.txt", fx_dir);
  text = fx_read (AT_FDCWD, path);
  ck_assert_ptr_nonnull (text);
  text[strcspn (text, "\n")] = '\0';
  snprintf (oid, SP_COMMIT_HEX_MAX + 1, "%s", text);
}

/* Copies `.git` and sanitizes it, then stages the commit with limits.  */
static int
stage (const struct sp_copy_options *limits, sp_error_t *err)
{
  char commit[SP_COMMIT_HEX_MAX + 1];

  if (sp_git_copy_gitdir (repo, seed, &roomy, &sub, err) < 0 || sp_git_sanitize (seed, commit, err) < 0)
    return -1;
  return sp_git_stage_commit (seed, commit, limits, &sub, err);
}

static void
stage_ok (void)
{
  cleanup_error sp_error_t err = NULL;

  if (stage (&roomy, &err) < 0)
    ck_abort_msg ("stage: %s", sp_error_message (err));
}

static void
stage_fails_with (const struct sp_copy_options *limits, const char *fragment)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (stage (limits, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), fragment) != NULL, "`%s` is not in the error: %s", fragment,
                 sp_error_message (err));
  ck_assert_msg (strchr (sp_error_message (err), '\n') == NULL, "a raw newline in: %s",
                 sp_error_message (err));
}

START_TEST (the_commit_lands_and_the_working_tree_does_not)
{
  cleanup_free char *readme = NULL;

  fx_append (repo, "README", "UNCOMMITTED-EDIT\n");
  fx_put (repo, "untracked.txt", "UNTRACKED\n", 0644);
  stage_ok ();
  readme = fx_read (seed, "README");
  ck_assert_ptr_nonnull (readme);
  ck_assert_str_eq (readme, "hello\n");
  ck_assert_int_eq (faccessat (seed, "untracked.txt", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

START_TEST (modes_symlinks_and_gitlinks_are_the_commits)
{
  char text[SP_COMMIT_HEX_MAX + 1], target[SP_COMMIT_HEX_MAX + 1], records[1024];
  char link[64] = { 0 };
  struct stat st;

  blob ("#!/bin/sh\\n", text);
  blob ("../outside", target);
  snprintf (records, sizeof (records),
            "100755 blob %s\\tbin-run\\n120000 blob %s\\tlink\\n160000 commit "
            "1111111111111111111111111111111111111111\\tsub\\n",
            text, target);
  plumb (records);
  stage_ok ();
  ck_assert_int_eq (fstatat (seed, "bin-run", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISREG (st.st_mode) && (st.st_mode & 0777) == 0755);
  ck_assert_int_eq (readlinkat (seed, "link", link, sizeof (link) - 1), 10);
  ck_assert_str_eq (link, "../outside");
  /* A gitlink is an empty directory: no submodule content, and recorded.  */
  ck_assert_int_eq (fstatat (seed, "sub", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISDIR (st.st_mode));
  ck_assert_int_eq (fx_sh ("test -z \"$(ls -A %s/seed/sub)\"", fx_dir), 0);
  ck_assert_uint_eq (sub.n_omitted, 1);
  ck_assert_str_eq (sub.omitted[0], "sub");
}
END_TEST

/* What `git submodule add` would commit for the gitlinks below.  */
#define GITMODULES "[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib\n"

/* Commits, beside README, `.gitmodules` when asked and a gitlink at each
   path, all naming one commit of no repository here.  */
static void
commit_gitlinks (bool gitmodules, const char *const *paths, size_t n)
{
  if (gitmodules)
    {
      fx_put (repo, ".gitmodules", GITMODULES, 0644);
      ck_assert_int_eq (fx_sh ("cd %s && git add .gitmodules", repo_path), 0);
    }
  for (size_t i = 0; i < n; i++)
    ck_assert_int_eq (fx_sh ("cd %s && git update-index --add --cacheinfo "
                             "160000,1111111111111111111111111111111111111111,%s",
                             repo_path, paths[i]),
                      0);
  ck_assert_int_eq (
      fx_sh ("cd %s && git -c user.name=t -c user.email=t@example.com commit -q -m gitlinks", repo_path), 0);
}

/* Plants a submodule's repository in the clone's `.git/modules/lib`: a
   canary file, a FIFO (the copy refuses one it meets) and a hardlink to a
   file outside the clone (refused too, were it copied).  */
static void
plant_modules (void)
{
  fx_put (repo, ".git/modules/lib/HEAD", "ref: refs/heads/main\n", 0644);
  fx_put (repo, ".git/modules/lib/objects/canary", "MODULES-CANARY-31\n", 0644);
  fx_put (fx_fd, "outside", "OUTSIDE\n", 0644);
  ck_assert_int_eq (
      fx_sh ("set -e; cd %s; mkfifo .git/modules/lib/pipe; ln ../outside .git/modules/lib/linked", repo_path),
      0);
}

START_TEST (omit_records_each_gitlink_and_writes_gitmodules_as_committed)
{
  static const char *const paths[] = { "lib", "vendor/sha1" };
  cleanup_free char *gitmodules = NULL;
  char where[PATH_MAX], seed_path[PATH_MAX];
  struct stat st;

  commit_gitlinks (true, paths, 2);
  plant_modules ();
  stage_ok ();
  ck_assert_uint_eq (sub.n_omitted, 2);
  ck_assert_str_eq (sub.omitted[0], "lib");
  ck_assert_str_eq (sub.omitted[1], "vendor/sha1");
  ck_assert (sub.modules_dir);
  for (size_t i = 0; i < 2; i++)
    {
      ck_assert_int_eq (fstatat (seed, paths[i], &st, AT_SYMLINK_NOFOLLOW), 0);
      ck_assert (S_ISDIR (st.st_mode));
      ck_assert_int_eq (fx_sh ("test -z \"$(ls -A %s/seed/%s)\"", fx_dir, paths[i]), 0);
    }
  gitmodules = fx_read (seed, ".gitmodules");
  ck_assert_ptr_nonnull (gitmodules);
  ck_assert_str_eq (gitmodules, GITMODULES);
  /* The submodule's repository never reached the seed; the control finds
     the canary where it was planted.  */
  ck_assert_int_eq (faccessat (seed, ".git/modules", F_OK, AT_SYMLINK_NOFOLLOW), -1);
  snprintf (seed_path, sizeof (seed_path), "%s/seed", fx_dir);
  ck_assert (!fx_tree_holds (seed_path, "MODULES-CANARY-31", false, where));
  ck_assert (fx_tree_holds (repo_path, "MODULES-CANARY-31", false, where));
}
END_TEST

START_TEST (omitted_paths_are_recorded_quoted)
{
  char records[256];

  /* A gitlink named "a<newline><ESC>b" beside README.  */
  snprintf (records, sizeof (records),
            "160000 commit 1111111111111111111111111111111111111111\\ta\\n\\033b\\0");
  ck_assert_int_eq (fx_sh ("set -e; cd %s; t=$(printf '%s' | git mktree -z);"
                           " c=$(git -c user.name=t -c user.email=t@example.com commit-tree $t -m hostile);"
                           " git update-ref refs/heads/main $c",
                           repo_path, records),
                    0);
  stage_ok ();
  ck_assert_uint_eq (sub.n_omitted, 1);
  ck_assert_str_eq (sub.omitted[0], "a\\x0a\\x1bb");
}
END_TEST

START_TEST (reject_names_the_first_gitlink_quoted)
{
  static const char *const paths[] = { "vendor/sha1", "zlib" };

  sub.policy = SP_SUBMODULES_REJECT;
  commit_gitlinks (true, paths, 2);
  plant_modules ();
  /* Before `.gitmodules` and `.git/modules`, though both are there.  */
  stage_fails_with (&roomy, "`vendor/sha1` is a submodule (a gitlink): refused, as "
                            "sealedProbes.submodules.reject lists this repository");
  ck_assert_uint_eq (sub.n_omitted, 0);
  ck_assert_int_eq (faccessat (seed, "vendor/sha1", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

START_TEST (reject_refuses_gitmodules_without_a_gitlink)
{
  sub.policy = SP_SUBMODULES_REJECT;
  commit_gitlinks (true, NULL, 0);
  stage_fails_with (&roomy, "`.gitmodules` is present: the commit declares submodules, refused, as "
                            "sealedProbes.submodules.reject lists this repository");
}
END_TEST

START_TEST (reject_refuses_git_modules_without_a_gitlink)
{
  sub.policy = SP_SUBMODULES_REJECT;
  plant_modules ();
  stage_fails_with (&roomy,
                    "`.git/modules` is present: the clone holds a submodule's repository (never read), "
                    "refused, as sealedProbes.submodules.reject lists this repository");
}
END_TEST

START_TEST (reject_stages_a_clone_without_submodules)
{
  sub.policy = SP_SUBMODULES_REJECT;
  stage_ok ();
  ck_assert_uint_eq (sub.n_omitted, 0);
  ck_assert (!sub.modules_dir);
}
END_TEST

START_TEST (more_submodules_than_a_seed_records_are_refused)
{
  struct sp_copy_options many = roomy;

  many.max_entries = 2 * SP_SEED_SUBMODULES_MAX;
  /* One tree of SP_SEED_SUBMODULES_MAX + 1 gitlinks, made by plumbing.  */
  ck_assert_int_eq (fx_sh ("set -e; cd %s; t=$(for i in $(seq 0 %d); do"
                           " printf '160000 commit 1111111111111111111111111111111111111111\\tm%%04d\\n' $i;"
                           " done | git mktree);"
                           " c=$(git -c user.name=t -c user.email=t@example.com commit-tree $t -m many);"
                           " git update-ref refs/heads/main $c",
                           repo_path, SP_SEED_SUBMODULES_MAX),
                    0);
  stage_fails_with (&many, "`m1000`: the commit has more than 1000 submodules, the most a seed records");
}
END_TEST

START_TEST (a_blob_over_the_byte_budget_is_refused_before_it_is_written)
{
  struct sp_copy_options tight = roomy;
  char big[SP_COMMIT_HEX_MAX + 1], records[256];

  blob ("0123456789abcdef0123456789abcdef", big);
  snprintf (records, sizeof (records), "100644 blob %s\\tbig\\n", big);
  plumb (records);
  tight.max_bytes = 31;
  stage_fails_with (&tight, "`big` is 32 bytes");
  ck_assert_int_eq (faccessat (seed, "big", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

START_TEST (the_entry_and_depth_limits_hold)
{
  struct sp_copy_options tight = roomy;

  ck_assert_int_eq (fx_sh ("set -e; cd %s; mkdir -p a/b/c; echo x > a/b/c/f; git add -A;"
                           " git -c user.name=t -c user.email=t@example.com commit -q -m deep",
                           repo_path),
                    0);
  tight.max_depth = 2;
  stage_fails_with (&tight, "more than 2 directories deep");
}
END_TEST

START_TEST (too_many_entries_are_refused)
{
  struct sp_copy_options tight = roomy;

  ck_assert_int_eq (fx_sh ("set -e; cd %s; for i in 1 2 3 4; do echo $i > f$i; done; git add -A;"
                           " git -c user.name=t -c user.email=t@example.com commit -q -m many",
                           repo_path),
                    0);
  tight.max_entries = 3;
  stage_fails_with (&tight, "more than 3 entries");
}
END_TEST

START_TEST (a_forged_git_entry_is_refused_with_its_name_quoted)
{
  char oid[SP_COMMIT_HEX_MAX + 1], records[512];

  blob ("[core]\\n\\tfsmonitor = evil\\n", oid);
  /* A directory named "a<newline><ESC>[2J" holding a `.Git` file.  */
  ck_assert_int_eq (fx_sh ("set -e; cd %s; t=$(printf '100644 blob %s\\t.Git\\0' | git mktree -z);"
                           " printf \"040000 tree $t\\ta\\n\\033[2J\\0\" | git mktree -z > %s/tree.txt",
                           repo_path, oid, fx_dir),
                    0);
  snprintf (records, sizeof (records), "040000 tree $(cat %s/tree.txt)\\tx\\0", fx_dir);
  ck_assert_int_eq (fx_sh ("set -e; cd %s; t=$(printf \"%s\" | git mktree -z);"
                           " c=$(git -c user.name=t -c user.email=t@example.com commit-tree $t -m forged);"
                           " git update-ref refs/heads/main $c",
                           repo_path, records),
                    0);
  stage_fails_with (&roomy, "`x/a\\x0a\\x1b[2J/.Git` is a `.git` entry");
}
END_TEST

START_TEST (a_symlink_target_holding_a_nul_is_refused)
{
  char oid[SP_COMMIT_HEX_MAX + 1], records[256];

  blob ("a\\000b", oid);
  snprintf (records, sizeof (records), "120000 blob %s\\tlink\\n", oid);
  plumb (records);
  stage_fails_with (&roomy, "`link` is a symlink whose target");
}
END_TEST

START_TEST (a_missing_object_is_an_error)
{
  /* The commit's README blob: remove its loose object.  */
  ck_assert_int_eq (fx_sh ("set -e; cd %s; o=$(git rev-parse HEAD:README);"
                           " rm -f .git/objects/$(echo $o | cut -c1-2)/$(echo $o | cut -c3-)",
                           repo_path),
                    0);
  stage_fails_with (&roomy, "read the blob");
}
END_TEST

START_TEST (a_ref_to_a_missing_object_is_an_error)
{
  fx_put (repo, ".git/refs/heads/broken", "2222222222222222222222222222222222222222\n", 0644);
  stage_fails_with (&roomy, "refs/heads/broken");
}
END_TEST

START_TEST (unreachable_objects_do_not_survive)
{
  char oid[SP_COMMIT_HEX_MAX + 1];

  blob ("UNREACHABLE-BLOB\\n", oid);
  stage_ok ();
  ck_assert_int_eq (
      fx_sh ("test \"$(git -c safe.directory='*' -C %s/seed cat-file -t %s 2>/dev/null)\" = ''", fx_dir, oid),
      0);
  ck_assert_int_eq (
      fx_sh ("test \"$(git -c safe.directory='*' -C %s/seed cat-file -t HEAD:README)\" = blob", fx_dir), 0);
}
END_TEST

START_TEST (a_gitdir_file_is_refused_before_any_copy)
{
  cleanup_error sp_error_t err = NULL;

  ck_assert_int_eq (
      fx_sh ("set -e; cd %s; mv .git ../elsewhere.git; echo 'gitdir: ../elsewhere.git' > .git", repo_path),
      0);
  ck_assert_int_eq (sp_git_copy_gitdir (repo, seed, &roomy, &sub, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "a worktree or gitdir link"));
  ck_assert_int_eq (faccessat (seed, ".git", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}
END_TEST

START_TEST (a_sha256_repository_is_refused_naming_why)
{
  sp_closep (&repo);
  repo = fx_git_repo ("repo256", "sha256");
  stage_fails_with (&roomy, "SHA-256");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("seed_git_stage");
  TCase *tc = tcase_create ("stage");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, the_commit_lands_and_the_working_tree_does_not);
  tcase_add_test (tc, modes_symlinks_and_gitlinks_are_the_commits);
  tcase_add_test (tc, a_blob_over_the_byte_budget_is_refused_before_it_is_written);
  tcase_add_test (tc, the_entry_and_depth_limits_hold);
  tcase_add_test (tc, too_many_entries_are_refused);
  tcase_add_test (tc, a_forged_git_entry_is_refused_with_its_name_quoted);
  tcase_add_test (tc, omit_records_each_gitlink_and_writes_gitmodules_as_committed);
  tcase_add_test (tc, omitted_paths_are_recorded_quoted);
  tcase_add_test (tc, reject_names_the_first_gitlink_quoted);
  tcase_add_test (tc, reject_refuses_gitmodules_without_a_gitlink);
  tcase_add_test (tc, reject_refuses_git_modules_without_a_gitlink);
  tcase_add_test (tc, reject_stages_a_clone_without_submodules);
  tcase_add_test (tc, more_submodules_than_a_seed_records_are_refused);
  tcase_add_test (tc, a_symlink_target_holding_a_nul_is_refused);
  tcase_add_test (tc, a_missing_object_is_an_error);
  tcase_add_test (tc, a_ref_to_a_missing_object_is_an_error);
  tcase_add_test (tc, unreachable_objects_do_not_survive);
  tcase_add_test (tc, a_gitdir_file_is_refused_before_any_copy);
  tcase_add_test (tc, a_sha256_repository_is_refused_naming_why);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  if (!fx_have_git ())
    {
      printf ("1..0 # SKIP the git CLI, which makes the fixture repositories, is not installed\n");
      return 0;
    }
  return sp_check_run (make_suite ());
}
