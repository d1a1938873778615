/* The sbx backend's parsers and its command lines (src/runtimes/sbx_cli.h, sbx_plan.h): what it
   reads from the CLI is parsed strictly, and what it execs comes from the
   bundle alone.  */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"

#include "sp_check.h"
#include "sp_tmpdir.h"
#include "runtimes/sbx_cli.h"
#include "runtimes/sbx_plan.h"

#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

START_TEST (names_that_could_be_flags_are_not_names)
{
  static const char *const good[] = { "sp-abc-1.803-2a", "a", "A+b.c-d", NULL };
  static const char *const bad[] = { "-rf", "--all", ".hidden", "", "a b", "a/b", "a\tb", "\xc3\xa9", NULL };

  for (size_t i = 0; good[i]; i++)
    ck_assert_msg (sbx_name_valid (good[i], strlen (good[i])), "refused `%s`", good[i]);
  for (size_t i = 0; bad[i]; i++)
    ck_assert_msg (!sbx_name_valid (bad[i], strlen (bad[i])), "accepted `%s`", bad[i]);
}
END_TEST

START_TEST (a_hostile_listing_is_an_error_naming_the_line)
{
  static const char *const hostile[]
      = { "ok-1\n--all\n", "ok-1\n\nok-2\n", "-rf\n", "ok\n spaced name\n", "ok\r\n" };

  for (size_t i = 0; i < sizeof (hostile) / sizeof (hostile[0]); i++)
    {
      cleanup_error sp_error_t err = NULL;
      char **names = (char **)1;

      ck_assert_int_eq (sbx_list_parse (hostile[i], strlen (hostile[i]), &names, &err), -1);
      ck_assert_ptr_null (names);
      ck_assert_ptr_nonnull (strstr (sp_error_message (err), "is not a sandbox name"));
    }
}
END_TEST

START_TEST (a_listing_gives_every_name)
{
  cleanup_error sp_error_t err = NULL;
  char **names = NULL;

  ck_assert_int_eq (sbx_list_parse ("a-1\nb.2\n", 8, &names, &err), 0);
  ck_assert_str_eq (names[0], "a-1");
  ck_assert_str_eq (names[1], "b.2");
  ck_assert_ptr_null (names[2]);
  sbx_list_free (names);
  ck_assert_int_eq (sbx_list_parse ("", 0, &names, &err), 0);
  ck_assert_ptr_null (names[0]);
  sbx_list_free (names);
}
END_TEST

START_TEST (version_needs_exactly_one_version_line)
{
  char v[64];
  cleanup_error sp_error_t e1 = NULL;
  cleanup_error sp_error_t e2 = NULL;
  cleanup_error sp_error_t e3 = NULL;

  ck_assert_int_eq (sbx_version_parse ("Client:\n Version: v0.37.1\n Built: x\n", v, sizeof (v), &e1), 0);
  ck_assert_str_eq (v, "0.37.1");
  ck_assert_int_eq (sbx_version_parse ("Version: 1\nVersion: 2\n", v, sizeof (v), &e1), -1);
  ck_assert_int_eq (sbx_version_parse ("sbx 1.0\n", v, sizeof (v), &e2), -1);
  ck_assert_int_eq (sbx_version_parse ("Version: 1.0; rm -rf /\n", v, sizeof (v), &e3), -1);
}
END_TEST

START_TEST (only_audited_versions_are_known)
{
  ck_assert_ptr_nonnull (sbx_audited ("0.37.1"));
  ck_assert_ptr_null (sbx_audited ("0.38.0"));
  ck_assert_ptr_null (sbx_audited ("0.37.1 "));
  ck_assert_ptr_null (sbx_audited (""));
}
END_TEST

START_TEST (every_missing_control_is_named)
{
  char missing[1024] = "";
  const char *create_old = "  --name string\n  -t, --template string\n  --cpus int\n  -m, --memory string\n"
                           "  -q, --quiet\n  --network-alias string\n";
  const char *exec_all = "  -u, --user string\n  -w, --workdir string\n  -e, --env list\n";

  ck_assert_uint_eq (sbx_controls_missing (create_old, exec_all, missing, sizeof (missing)), 5);
  ck_assert_ptr_nonnull (strstr (missing, "create --network (no network)"));
  ck_assert_ptr_nonnull (strstr (missing, "create --pids-limit"));
  ck_assert_ptr_nonnull (strstr (missing, "create --disk-limit"));
  ck_assert_ptr_nonnull (strstr (missing, "create --ulimit-fsize"));
  ck_assert_ptr_nonnull (strstr (missing, "create --mount-target"));
  missing[0] = '\0';
  ck_assert_uint_eq (sbx_controls_missing ("", "", missing, sizeof (missing)), 13);
}
END_TEST

START_TEST (templates_must_be_pinned_by_digest)
{
  ck_assert (sbx_template_pinned ("sealed-probe/rootfs@" DIGEST));
  ck_assert (sbx_template_pinned ("registry.example:5000/a/b@" DIGEST));
  ck_assert (!sbx_template_pinned ("sealed-probe/rootfs:latest"));
  ck_assert (!sbx_template_pinned ("sealed-probe/rootfs:1@sha256:abc"));
  ck_assert (!sbx_template_pinned ("@" DIGEST));
  ck_assert (!sbx_template_pinned ("-x@" DIGEST));
  ck_assert (!sbx_template_pinned ("A@" DIGEST));
  ck_assert (
      !sbx_template_pinned ("a@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
}
END_TEST

static const char config_json[]
    = "{\"process\":{\"user\":{\"uid\":65534,\"gid\":65534},\"args\":[\"/usr/bin/"
      "python3\",\"-I\",\"-S\",\"-B\","
      "\"/probe/probe.py\"],\"env\":[\"PATH=/usr/bin\",\"HOME=/tmp\"],\"cwd\":\"/probe/repo\","
      "\"rlimits\":[{\"type\":\"RLIMIT_FSIZE\",\"soft\":67108864,\"hard\":67108864}]},"
      "\"mounts\":[{\"destination\":\"/"
      "tmp\",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"size=16m\"]},"
      "{\"destination\":\"/probe/repo\",\"type\":\"bind\",\"source\":\"@D@/repo\",\"options\":[\"rw\"]},"
      "{\"destination\":\"/probe/probe.py\",\"type\":\"bind\",\"source\":\"@D@/"
      "probe.py\",\"options\":[\"ro\"]},"
      "{\"destination\":\"/probe/out\",\"type\":\"bind\",\"source\":\"@D@/out\",\"options\":[\"rw\"]}],"
      "\"linux\":{\"namespaces\":[{\"type\":\"network\"}],\"resources\":{\"memory\":{\"limit\":268435456},"
      "\"cpu\":{\"quota\":50000,\"period\":100000},\"pids\":{\"limit\":64}}}}";

static const char *const create_want[] = { "/usr/bin/sbx",
                                           "create",
                                           "shell",
                                           "--name",
                                           "vm-1",
                                           "--template",
                                           "t/r@" DIGEST,
                                           "--network=none",
                                           "--cpus",
                                           "0.500",
                                           "--memory",
                                           "268435456",
                                           "--pids-limit",
                                           "64",
                                           "--disk-limit",
                                           "16777216",
                                           "--ulimit-fsize",
                                           "67108864",
                                           "--quiet",
                                           "--mount-target",
                                           "/probe/repo",
                                           "--mount-target",
                                           "/probe/probe.py",
                                           "--mount-target",
                                           "/probe/out",
                                           "--",
                                           NULL };
static const char *const exec_want[] = { "/usr/bin/sbx",
                                         "exec",
                                         "--user",
                                         "65534:65534",
                                         "--workdir",
                                         "/probe/repo",
                                         "--env",
                                         "PATH=/usr/bin",
                                         "--env",
                                         "HOME=/tmp",
                                         "vm-1",
                                         "--",
                                         "/usr/bin/python3",
                                         "-I",
                                         "-S",
                                         "-B",
                                         "/probe/probe.py",
                                         NULL };

/* Writes text to dir/config.json, with dir in place of every @D@.  */
static void
write_config (const char *dir, const char *text)
{
  char path[4096];
  const char *at;
  FILE *f;

  snprintf (path, sizeof (path), "%s/config.json", dir);
  f = fopen (path, "w");
  ck_assert_ptr_nonnull (f);
  while ((at = strstr (text, "@D@")) != NULL)
    {
      fwrite (text, 1, (size_t)(at - text), f);
      fputs (dir, f);
      text = at + 3;
    }
  fputs (text, f);
  fclose (f);
}

START_TEST (the_plan_comes_from_the_bundle)
{
  char dir[] = "/tmp/sp-sbx-XXXXXX";
  cleanup_close int dirfd = sp_tmpdir_make (dir);
  cleanup_error sp_error_t err = NULL;
  struct sbx_plan plan;
  char src[4200];
  size_t i;

  write_config (dir, config_json);
  ck_assert_msg (sbx_plan_build ("/usr/bin/sbx", "t/r@" DIGEST, "vm-1", dir, &plan, &err) == 0, "%s",
                 err ? sp_error_message (err) : "");
  for (i = 0; create_want[i]; i++)
    ck_assert_str_eq (plan.create.words[i], create_want[i]);
  snprintf (src, sizeof (src), "%s/repo", dir);
  ck_assert_str_eq (plan.create.words[i++], src);
  snprintf (src, sizeof (src), "%s/probe.py:ro", dir);
  ck_assert_str_eq (plan.create.words[i++], src);
  snprintf (src, sizeof (src), "%s/out", dir);
  ck_assert_str_eq (plan.create.words[i++], src);
  ck_assert_ptr_null (plan.create.words[i]);
  for (i = 0; exec_want[i]; i++)
    ck_assert_str_eq (plan.exec.words[i], exec_want[i]);
  ck_assert_ptr_null (plan.exec.words[i]);
  ck_assert_str_eq (plan.stop.words[1], "stop");
  ck_assert_str_eq (plan.rm.words[2], "vm-1");
  ck_assert_str_eq (plan.ls.words[1], "ls");
  sbx_plan_release (&plan);
  sp_tmpdir_remove (dir);
}
END_TEST

START_TEST (a_bundle_it_cannot_express_is_refused)
{
  char dir[] = "/tmp/sp-sbx-XXXXXX";
  cleanup_close int dirfd = sp_tmpdir_make (dir);
  cleanup_error sp_error_t e1 = NULL;
  cleanup_error sp_error_t e2 = NULL;
  cleanup_error sp_error_t e3 = NULL;
  struct sbx_plan plan;
  char *text = strdup (config_json);
  char *p;

  /* No network namespace: the VM would be told nothing about its network.  */
  p = strstr (text, "\"network\"");
  memcpy (p, "\"ipc\"    ", 9);
  write_config (dir, text);
  ck_assert_int_eq (sbx_plan_build ("/usr/bin/sbx", "t/r@" DIGEST, "vm-1", dir, &plan, &e1), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (e1), "network"));
  free (text);
  /* An unpinned template, a name that is a flag.  */
  write_config (dir, config_json);
  ck_assert_int_eq (sbx_plan_build ("/usr/bin/sbx", "t/r:latest", "vm-1", dir, &plan, &e2), -1);
  ck_assert_int_eq (sbx_plan_build ("/usr/bin/sbx", "t/r@" DIGEST, "--rm", dir, &plan, &e3), -1);
  sp_tmpdir_remove (dir);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("sbx");
  TCase *tc = tcase_create ("sbx");

  tcase_add_test (tc, names_that_could_be_flags_are_not_names);
  tcase_add_test (tc, a_hostile_listing_is_an_error_naming_the_line);
  tcase_add_test (tc, a_listing_gives_every_name);
  tcase_add_test (tc, version_needs_exactly_one_version_line);
  tcase_add_test (tc, only_audited_versions_are_known);
  tcase_add_test (tc, every_missing_control_is_named);
  tcase_add_test (tc, templates_must_be_pinned_by_digest);
  tcase_add_test (tc, the_plan_comes_from_the_bundle);
  tcase_add_test (tc, a_bundle_it_cannot_express_is_refused);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
