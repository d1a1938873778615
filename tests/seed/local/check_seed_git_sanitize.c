/* Sanitizing a seed's git metadata (git_seed.h): what is removed, rewritten
   and refused.  The fixture repositories are made with the git CLI, and the
   program skips without it; the product never runs git.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "seed/git_seed.h"
#include "tree/copy.h"

#include "seed_fixture.h"
#include "sp_check.h"

static int repo = -1;
static char repo_path[128];

static void
setup (void)
{
  fx_setup ();
  repo = fx_git_repo ("repo", "sha1");
  snprintf (repo_path, sizeof (repo_path), "%s/repo", fx_dir);
}

static void
teardown (void)
{
  sp_closep (&repo);
  fx_teardown ();
}

static void
sanitize_ok (char commit[SP_COMMIT_HEX_MAX + 1])
{
  cleanup_error sp_error_t err = NULL;

  if (sp_git_sanitize (repo, commit, &err) < 0)
    ck_abort_msg ("sp_git_sanitize: %s", sp_error_message (err));
}

static void
sanitize_fails_with (const char *fragment)
{
  cleanup_error sp_error_t err = NULL;
  char commit[SP_COMMIT_HEX_MAX + 1];

  ck_assert_int_eq (sp_git_sanitize (repo, commit, &err), -1);
  ck_assert_msg (strstr (sp_error_message (err), fragment) != NULL, "`%s` is not in the error: %s", fragment,
                 sp_error_message (err));
}

static void
assert_absent_everywhere (const char *needle)
{
  char where[PATH_MAX];

  ck_assert_msg (!fx_tree_holds (repo_path, needle, true, where), "`%s` survives in %s", needle, where);
}

START_TEST (sanitize_removes_hooks)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  struct stat st;

  fx_put (repo, ".git/hooks/post-checkout", "#!/bin/sh\necho HOOK-CANARY\n", 0755);
  sanitize_ok (commit);
  ck_assert_int_eq (fstatat (repo, ".git/hooks", &st, AT_SYMLINK_NOFOLLOW), 0);
  ck_assert (S_ISDIR (st.st_mode));
  ck_assert_int_eq (fx_sh ("test -z \"$(ls -A %s/.git/hooks)\"", repo_path), 0);
  assert_absent_everywhere ("HOOK-CANARY");
}
END_TEST

START_TEST (sanitize_rewrites_the_config_without_credentials_or_commands)
{
  static const char *gone[] = {
    "ghp_SECRET", "[remote",   "[credential", "helper", "[url",       "insteadof",
    "fsmonitor",  "hookspath", "[include",    "origin", "sshCommand",
  };
  char commit[SP_COMMIT_HEX_MAX + 1];
  cleanup_free char *config = NULL;

  fx_append (repo, ".git/config",
             "[remote \"origin\"]\n\turl = https://user:ghp_SECRET@github.com/o/r.git\n"
             "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
             "[credential]\n\thelper = store\n"
             "[url \"https://evil.example/\"]\n\tinsteadOf = https://github.com/\n"
             "[core]\n\tfsmonitor = /tmp/evil-fsmonitor\n\thooksPath = /tmp/evil-hooks\n"
             "\tsshCommand = /tmp/evil-ssh\n"
             "[include]\n\tpath = /tmp/evil-include\n");
  sanitize_ok (commit);
  ck_assert_ptr_nonnull (config = fx_read (repo, ".git/config"));
  ck_assert_str_eq (config, "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n");
  for (size_t i = 0; i < sizeof (gone) / sizeof (gone[0]); i++)
    assert_absent_everywhere (gone[i]);
}
END_TEST

START_TEST (sanitize_removes_logs_with_a_credential_url)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  struct stat st;

  ck_assert_int_eq (fstatat (repo, ".git/logs/HEAD", &st, AT_SYMLINK_NOFOLLOW), 0);
  fx_append (
      repo, ".git/logs/HEAD",
      "0000000000000000000000000000000000000000 1111111111111111111111111111111111111111 t <t@x> 0 +0000\t"
      "clone: from https://user:ghp_LOGSECRET@github.com/o/r.git\n");
  fx_put (repo, ".git/FETCH_HEAD",
          "1111111111111111111111111111111111111111\t\tbranch 'main' of "
          "https://user:ghp_LOGSECRET@github.com/o/r\n",
          0644);
  sanitize_ok (commit);
  ck_assert_int_eq (fstatat (repo, ".git/logs", &st, AT_SYMLINK_NOFOLLOW), -1);
  assert_absent_everywhere ("ghp_LOGSECRET");
}
END_TEST

START_TEST (sanitize_keeps_only_the_allowed_entries_in_git)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  char head[SP_COMMIT_HEX_MAX + 1];

  fx_put (repo, ".git/ORIG_HEAD", "x\n", 0644);
  fx_put (repo, ".git/config.worktree", "[core]\n\tfsmonitor = x\n", 0644);
  fx_put (repo, ".git/packed-refs", "# pack-refs with: peeled\n", 0644);
  fx_git_head ("repo", head);
  sanitize_ok (commit);
  ck_assert_str_eq (commit, head);
  ck_assert_int_eq (fx_sh ("test \"$(ls -A %s/.git | tr '\\n' ' ')\" = "
                           "'HEAD config description hooks index info objects packed-refs refs '",
                           repo_path),
                    0);
}
END_TEST

START_TEST (sanitized_seed_is_still_a_valid_repository)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  char head[SP_COMMIT_HEX_MAX + 1];
  const struct sp_copy_options limits = { 1 << 20, 1000, 32, false, false, NULL, NULL };
  cleanup_error sp_error_t err = NULL;
  cleanup_close int seed = fx_mkdirs (fx_fd, "seed");

  /* The whole local path: copy the clone, then sanitize the copy.  */
  fx_put (repo, ".git/hooks/post-checkout", "#!/bin/sh\necho HOOK-CANARY\n", 0755);
  ck_assert_int_eq (sp_tree_copy (repo, seed, &limits, 0, 0, &err), 0);
  sp_closep (&repo);
  repo = get_and_reset_fd (&seed);
  snprintf (repo_path, sizeof (repo_path), "%s/seed", fx_dir);
  sanitize_ok (commit);
  fx_git_head ("seed", head);
  ck_assert_str_eq (commit, head);
  ck_assert_int_eq (
      fx_sh ("git -C %s fsck --strict >/dev/null && git -C %s diff --quiet HEAD", repo_path, repo_path), 0);
}
END_TEST

START_TEST (sanitize_keeps_a_sha256_repository)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  char head[SP_COMMIT_HEX_MAX + 1];
  cleanup_free char *config = NULL;

  sp_closep (&repo);
  repo = fx_git_repo ("repo256", "sha256");
  snprintf (repo_path, sizeof (repo_path), "%s/repo256", fx_dir);
  fx_git_head ("repo256", head);
  ck_assert_int_eq (strlen (head), 64);
  sanitize_ok (commit);
  ck_assert_str_eq (commit, head);
  ck_assert_ptr_nonnull (config = fx_read (repo, ".git/config"));
  ck_assert_str_eq (config, "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n"
                            "[extensions]\n\tobjectformat = sha256\n");
  ck_assert_int_eq (fx_sh ("git -C %s fsck >/dev/null", repo_path), 0);
}
END_TEST

START_TEST (sanitize_refuses_alternates)
{
  fx_put (repo, ".git/objects/info/alternates", "/srv/other/.git/objects\n", 0644);
  sanitize_fails_with ("`.git/objects/info/alternates` is present");
}
END_TEST

START_TEST (sanitize_refuses_http_alternates)
{
  fx_put (repo, ".git/objects/info/http-alternates", "https://example.com/objects\n", 0644);
  sanitize_fails_with ("`.git/objects/info/http-alternates` is present");
}
END_TEST

START_TEST (sanitize_refuses_a_gitdir_file)
{
  cleanup_close int wt = fx_mkdirs (fx_fd, "worktree");

  sp_closep (&repo);
  fx_put (wt, ".git", "gitdir: ../other\n", 0644);
  repo = get_and_reset_fd (&wt);
  sanitize_fails_with ("`.git` is a file (a worktree or gitdir link)");
}
END_TEST

START_TEST (sanitize_refuses_linked_worktrees)
{
  fx_put (repo, ".git/worktrees/wt/gitdir", "/elsewhere/wt/.git\n", 0644);
  sanitize_fails_with ("`.git/worktrees` is present");
}
END_TEST

START_TEST (sanitize_refuses_a_commondir)
{
  fx_put (repo, ".git/commondir", "../..\n", 0644);
  sanitize_fails_with ("`.git/commondir` is present");
}
END_TEST

/* What the commit's submodules become is the tree writer's, by policy
   (check_seed_git_stage.c): the sanitizer does not judge `.gitmodules`.  */
START_TEST (sanitize_leaves_gitmodules_to_the_tree_writer)
{
  char commit[SP_COMMIT_HEX_MAX + 1];

  fx_put (repo, ".gitmodules", "[submodule \"s\"]\n\tpath = s\n\turl = ../other\n", 0644);
  sanitize_ok (commit);
}
END_TEST

/* The copy never brings `.git/modules` (git_stage.h): one found here was
   put by something else, and is refused.  */
START_TEST (sanitize_refuses_git_modules)
{
  fx_put (repo, ".git/modules/s/HEAD", "ref: refs/heads/main\n", 0644);
  sanitize_fails_with ("`.git/modules` is present: a submodule's repository, which staging never copies");
}
END_TEST

START_TEST (sanitize_refuses_a_nested_git_directory)
{
  close (fx_mkdirs (repo, "sub/.git/objects"));
  sanitize_fails_with ("`sub/.git` is a nested git repository");
}
END_TEST

START_TEST (sanitize_refuses_a_nested_git_file)
{
  fx_put (repo, "vendor/lib/.git", "gitdir: ../../.git/modules/lib\n", 0644);
  sanitize_fails_with ("`vendor/lib/.git` is a nested git repository");
}
END_TEST

START_TEST (sanitize_refuses_a_symlink_inside_git)
{
  ck_assert_int_eq (symlinkat ("/etc/passwd", repo, ".git/refs/heads/evil"), 0);
  sanitize_fails_with ("`.git/refs/heads/evil` is a symlink inside `.git`");
}
END_TEST

START_TEST (sanitize_refuses_unknown_extensions_naming_them)
{
  static const char *ext[] = { "partialclone", "worktreeconfig", "preciousobjects", "refstorage" };

  for (size_t i = 0; i < sizeof (ext) / sizeof (ext[0]); i++)
    {
      char text[256], expected[128];

      snprintf (text, sizeof (text), "[core]\n\trepositoryformatversion = 1\n[extensions]\n\t%s = origin\n",
                ext[i]);
      fx_put (repo, ".git/config", text, 0644);
      snprintf (expected, sizeof (expected), "extensions.%s, which is not supported", ext[i]);
      sanitize_fails_with (expected);
    }
}
END_TEST

START_TEST (sanitize_reports_the_line_of_an_unparseable_config)
{
  fx_put (repo, ".git/config", "[core]\n\tbare = false\n[core\n", 0644);
  sanitize_fails_with ("`.git/config` line 3: bad section header");
  fx_put (repo, ".git/config", "# c\n[core]\n\n\tbare = false\n\tx = \"unterminated\n", 0644);
  sanitize_fails_with ("`.git/config` line 5: unterminated quoted value");
  fx_put (repo, ".git/config", "\tbare = false\n", 0644);
  sanitize_fails_with ("`.git/config` line 1: a key before any section");
  fx_put (repo, ".git/config", "[core]\n\trepositoryformatversion = 2\n", 0644);
  sanitize_fails_with ("`.git/config` line 2: core.repositoryformatversion is neither 0 nor 1");
}
END_TEST

START_TEST (sanitize_parses_the_config_format_git_writes)
{
  char commit[SP_COMMIT_HEX_MAX + 1];
  cleanup_free char *config = NULL;

  /* Comments, quoting, escapes, continuation lines, a subsection with an
     escaped quote, a boolean key without a value, and odd case.  */
  fx_put (repo, ".git/config",
          "; leading comment\n[Core]  # trailing comment\n\tRepositoryFormatVersion = \"1\" ; yes\n"
          "\tbare\n\tlong = a \\\n  b \"c # d\" \\t\\\\ # e\n[branch \"we\\\"ird\"]\n\tremote = origin\n"
          "[section.sub]\n\tkey=value\n",
          0644);
  sanitize_ok (commit);
  ck_assert_ptr_nonnull (config = fx_read (repo, ".git/config"));
  ck_assert_str_eq (config, "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n");
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("seed_git_sanitize");
  TCase *tc = tcase_create ("sanitize");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, sanitize_removes_hooks);
  tcase_add_test (tc, sanitize_rewrites_the_config_without_credentials_or_commands);
  tcase_add_test (tc, sanitize_removes_logs_with_a_credential_url);
  tcase_add_test (tc, sanitize_keeps_only_the_allowed_entries_in_git);
  tcase_add_test (tc, sanitized_seed_is_still_a_valid_repository);
  tcase_add_test (tc, sanitize_keeps_a_sha256_repository);
  tcase_add_test (tc, sanitize_refuses_alternates);
  tcase_add_test (tc, sanitize_refuses_http_alternates);
  tcase_add_test (tc, sanitize_refuses_a_gitdir_file);
  tcase_add_test (tc, sanitize_refuses_linked_worktrees);
  tcase_add_test (tc, sanitize_refuses_a_commondir);
  tcase_add_test (tc, sanitize_leaves_gitmodules_to_the_tree_writer);
  tcase_add_test (tc, sanitize_refuses_git_modules);
  tcase_add_test (tc, sanitize_refuses_a_nested_git_directory);
  tcase_add_test (tc, sanitize_refuses_a_nested_git_file);
  tcase_add_test (tc, sanitize_refuses_a_symlink_inside_git);
  tcase_add_test (tc, sanitize_refuses_unknown_extensions_naming_them);
  tcase_add_test (tc, sanitize_reports_the_line_of_an_unparseable_config);
  tcase_add_test (tc, sanitize_parses_the_config_format_git_writes);
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
