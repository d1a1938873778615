/* staged.json (seed_store.h): version 2 records the submodules each seed
   omits, quoted; version 1, from before the policy, still reads, as "not
   known"; anything else is refused, never guessed.  */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "stage/seed_store.h"

#include "sp_check.h"

#define RUN    "stage-0123456789ab"
#define COMMIT "0123456789abcdef0123456789abcdef01234567"
#define DIGEST "sha256:89abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234567"
/* One seed's members, before `omitted_submodules`.  */
#define SEED(repo, index, source)                                                                            \
  "{\"repo\":\"" repo "\",\"index\":" #index ",\"source\":\"" source "\",\"commit\":\"" COMMIT               \
  "\",\"digest\":\"" DIGEST "\""
#define DOC(version, seeds) "{\"version\":" #version ",\"run\":\"" RUN "\",\"seeds\":[" seeds "]}"

static void
parse_ok (const char *text, struct sp_staged *out)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_staged_parse (text, strlen (text), out, &err) < 0)
    ck_abort_msg ("sp_staged_parse: %s", sp_error_message (err));
}

static void
parse_fails_with (const char *text, const char *fragment)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_staged out;

  ck_assert_int_eq (sp_staged_parse (text, strlen (text), &out, &err), -1);
  ck_assert (out.n == 0 && out.seeds == NULL);
  ck_assert_msg (strstr (sp_error_message (err), fragment) != NULL, "`%s` is not in the error: %s", fragment,
                 sp_error_message (err));
}

START_TEST (version_2_keeps_each_local_seeds_omitted_paths)
{
  struct sp_staged staged;

  parse_ok (
      DOC (2, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[\"lib\",\"a\\\\x0ab\"]}," SEED (
                  "acme/none", 1,
                  "local") ",\"omitted_submodules\":[]}," SEED ("acme/remote", 2,
                                                                "github") ",\"omitted_submodules\":null}"),
      &staged);
  ck_assert_uint_eq (staged.n, 3);
  ck_assert (staged.seeds[0].omitted_known && staged.seeds[0].n_omitted == 2);
  ck_assert_str_eq (staged.seeds[0].omitted[0], "lib");
  ck_assert_str_eq (staged.seeds[0].omitted[1], "a\\x0ab");
  ck_assert (staged.seeds[1].omitted_known && staged.seeds[1].n_omitted == 0);
  ck_assert (!staged.seeds[2].omitted_known && staged.seeds[2].n_omitted == 0);
  sp_staged_release (&staged);
}
END_TEST

START_TEST (version_1_reads_with_its_omitted_submodules_not_known)
{
  struct sp_staged staged;

  parse_ok (DOC (1, SEED ("acme/app", 0, "local") "}"), &staged);
  ck_assert_uint_eq (staged.n, 1);
  ck_assert (!staged.seeds[0].omitted_known && staged.seeds[0].n_omitted == 0);
  sp_staged_release (&staged);
}
END_TEST

static const void *
has (const char *text, size_t len, const char *needle)
{
  return memmem (text, len, needle, strlen (needle));
}

START_TEST (a_render_parses_back_to_the_same_record_as_version_2)
{
  char *paths[] = { "lib", "vendor/sha1" };
  struct sp_seed seeds[] = {
    { .repo = "acme/app",
      .index = 0,
      .source = SP_SEED_LOCAL,
      .commit = COMMIT,
      .digest = DIGEST,
      .omitted_known = true,
      .omitted = paths,
      .n_omitted = 2,
      .clone = (char *)"/srv/clones/app" },
    { .repo = "acme/remote", .index = 1, .source = SP_SEED_GITHUB, .commit = COMMIT, .digest = DIGEST },
  };
  struct sp_staged staged = { .run = RUN, .seeds = seeds, .n = 2 }, again;
  cleanup_error sp_error_t err = NULL;
  cleanup_free char *text = NULL;
  size_t len;

  ck_assert_int_eq (sp_staged_render (&staged, &text, &len, &err), 0);
  ck_assert_ptr_nonnull (has (text, len, "\"version\":3"));
  ck_assert_ptr_nonnull (has (text, len, "\"omitted_submodules\":[\"lib\",\"vendor/sha1\"]"));
  ck_assert_ptr_nonnull (has (text, len, "\"omitted_submodules\":null"));
  ck_assert_int_eq (sp_staged_parse (text, len, &again, &err), 0);
  ck_assert (again.seeds[0].omitted_known && again.seeds[0].n_omitted == 2);
  ck_assert_str_eq (again.seeds[0].omitted[1], "vendor/sha1");
  ck_assert (!again.seeds[1].omitted_known);
  ck_assert_str_eq (again.seeds[0].clone, "/srv/clones/app");
  ck_assert_ptr_null (again.seeds[1].clone);
  sp_staged_release (&again);
}
END_TEST

START_TEST (a_version_2_seed_without_the_member_is_refused)
{
  parse_fails_with (DOC (2, SEED ("acme/app", 0, "local") "}"),
                    "seeds[0]: must be an object of exactly six members");
  parse_fails_with (DOC (2, SEED ("acme/app", 0, "local") ",\"omitted\":[]}"),
                    "seeds[0].omitted_submodules: is missing");
  parse_fails_with (DOC (1, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[]}"),
                    "seeds[0]: must be an object of exactly five members");
  parse_fails_with (DOC (3, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[]}"),
                    "seeds[0]: must be an object of exactly seven members");
  parse_fails_with (DOC (3, SEED ("acme/app", 0, "github") ",\"omitted_submodules\":null,\"clone\":\"/c\"}"),
                    "seeds[0].clone: must be null, or for a local seed an absolute path");
  parse_fails_with (DOC (3, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[],\"clone\":\"c\"}"),
                    "seeds[0].clone: must be null, or for a local seed an absolute path");
  parse_fails_with (DOC (4, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[]}"),
                    "must be a version 1 to 3 object");
}
END_TEST

START_TEST (omitted_paths_must_be_quoted_as_stage_quotes_them)
{
  parse_fails_with (DOC (2, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[\"a\\nb\"]}"),
                    "seeds[0].omitted_submodules[0]: must be a path quoted as stage quotes it");
  parse_fails_with (
      DOC (2, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[\"lib\",\"\\u001b[2J\"]}"),
      "seeds[0].omitted_submodules[1]: must be a path quoted");
  parse_fails_with (DOC (2, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[\"\"]}"),
                    "seeds[0].omitted_submodules[0]: must be a path quoted");
  parse_fails_with (DOC (2, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":[1]}"),
                    "seeds[0].omitted_submodules[0]: must be a path quoted");
}
END_TEST

START_TEST (a_github_seed_records_no_paths)
{
  parse_fails_with (DOC (2, SEED ("acme/app", 0, "github") ",\"omitted_submodules\":[\"lib\"]}"),
                    "seeds[0].omitted_submodules: must be null, or for a local seed an array");
  parse_fails_with (DOC (2, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":\"lib\"}"),
                    "seeds[0].omitted_submodules: must be null, or for a local seed an array");
}
END_TEST

/* A document of one local seed omitting n submodules "mNNNN".  */
static char *
omitting (size_t n)
{
  size_t cap = 1024 + n * 16;
  char *doc = malloc (cap);
  size_t used;

  ck_assert_ptr_nonnull (doc);
  used
      = (size_t)snprintf (doc, cap, "%s", DOC (2, SEED ("acme/app", 0, "local") ",\"omitted_submodules\":["));
  used -= 2; /* the "]}" DOC closes the document with */
  for (size_t i = 0; i < n; i++)
    used += (size_t)snprintf (doc + used, cap - used, "%s\"m%04zu\"", i ? "," : "", i);
  snprintf (doc + used, cap - used, "]}]}");
  return doc;
}

START_TEST (more_omitted_paths_than_a_seed_records_are_refused)
{
  cleanup_free char *at_max = omitting (SP_SEED_SUBMODULES_MAX);
  cleanup_free char *over = omitting (SP_SEED_SUBMODULES_MAX + 1);
  struct sp_staged staged;

  parse_ok (at_max, &staged);
  ck_assert_uint_eq (staged.seeds[0].n_omitted, SP_SEED_SUBMODULES_MAX);
  sp_staged_release (&staged);
  parse_fails_with (over, "an array of at most 1000 paths");
}
END_TEST

START_TEST (a_record_over_the_readers_bound_is_not_rendered)
{
  /* 256 seeds omitting 1000 submodules each, every path quoted to 515
     bytes: far over what a reader takes.  */
  static char path[SP_QUOTE_BUF_SIZE];
  char **paths = calloc (SP_SEED_SUBMODULES_MAX, sizeof (*paths));
  struct sp_seed *seeds = calloc (SP_CONFIG_MAX_REPOS, sizeof (*seeds));
  struct sp_staged staged = { .run = RUN, .seeds = seeds, .n = SP_CONFIG_MAX_REPOS };
  cleanup_error sp_error_t err = NULL;
  char *text = NULL;
  size_t len = 0;

  ck_assert (paths != NULL && seeds != NULL);
  memset (path, 'p', sizeof (path) - 1);
  for (size_t k = 0; k < SP_SEED_SUBMODULES_MAX; k++)
    paths[k] = path;
  for (size_t i = 0; i < SP_CONFIG_MAX_REPOS; i++)
    seeds[i] = (struct sp_seed){ .repo = "acme/app",
                                 .index = (unsigned)i,
                                 .commit = COMMIT,
                                 .digest = DIGEST,
                                 .omitted_known = true,
                                 .omitted = paths,
                                 .n_omitted = SP_SEED_SUBMODULES_MAX };
  ck_assert_int_eq (sp_staged_render (&staged, &text, &len, &err), -1);
  ck_assert_ptr_null (text);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "more than the 4194304 a reader takes"));
  free (paths);
  free (seeds);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_seed_store");
  TCase *tc = tcase_create ("staged");

  tcase_add_test (tc, version_2_keeps_each_local_seeds_omitted_paths);
  tcase_add_test (tc, version_1_reads_with_its_omitted_submodules_not_known);
  tcase_add_test (tc, a_render_parses_back_to_the_same_record_as_version_2);
  tcase_add_test (tc, a_version_2_seed_without_the_member_is_refused);
  tcase_add_test (tc, omitted_paths_must_be_quoted_as_stage_quotes_them);
  tcase_add_test (tc, a_github_seed_records_no_paths);
  tcase_add_test (tc, more_omitted_paths_than_a_seed_records_are_refused);
  tcase_add_test (tc, a_record_over_the_readers_bound_is_not_rendered);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
