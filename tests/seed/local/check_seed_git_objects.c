/* The walk's own parsing of commits, trees and tags (git_object_parse.h):
   the links it follows, and every malformed form it refuses.  The objects
   are written by hand, as a forged clone would hold them.  */
#define _GNU_SOURCE
#include <string.h>

#include "seed/git_object_parse.h"
#include "sp_check.h"

#define T1 "0123456789abcdef0123456789abcdef01234567"
#define P1 "89abcdef0123456789abcdef0123456789abcdef"
#define P2 "fedcba9876543210fedcba9876543210fedcba98"

static const unsigned char *
u (const char *s)
{
  return (const unsigned char *)s;
}

static void
assert_oid (const git_oid *id, const char *hex)
{
  char got[GIT_OID_HEXSZ + 1];

  ck_assert_str_eq (git_oid_tostr (got, sizeof (got), id), hex);
}

START_TEST (commit_gives_its_tree_then_each_parent_in_order)
{
  const char *c = "tree " T1 "\nparent " P1 "\nparent " P2 "\nauthor a <a> 0 +0000\n\nmsg\n";
  size_t at = 0;
  git_oid id;

  ck_assert_int_eq (sp_git_commit_tree (u (c), strlen (c), &at, &id), 0);
  assert_oid (&id, T1);
  ck_assert_int_eq (sp_git_commit_next_parent (u (c), strlen (c), &at, &id), 1);
  assert_oid (&id, P1);
  ck_assert_int_eq (sp_git_commit_next_parent (u (c), strlen (c), &at, &id), 1);
  assert_oid (&id, P2);
  ck_assert_int_eq (sp_git_commit_next_parent (u (c), strlen (c), &at, &id), 0);
}
END_TEST

START_TEST (a_root_commit_has_no_parent)
{
  const char *c = "tree " T1 "\nauthor a <a> 0 +0000\n\nparent " P1 "\n";
  size_t at = 0;
  git_oid id;

  ck_assert_int_eq (sp_git_commit_tree (u (c), strlen (c), &at, &id), 0);
  /* A "parent" in the message is not a parent.  */
  ck_assert_int_eq (sp_git_commit_next_parent (u (c), strlen (c), &at, &id), 0);
}
END_TEST

START_TEST (malformed_commits_are_refused)
{
  static const char *const bad_tree[] = {
    "",
    "parent " P1 "\ntree " T1 "\n",                    /* the tree is not first */
    "tree " T1,                                        /* no newline */
    "tree 0123456789ABCDEF0123456789abcdef01234567\n", /* uppercase hex */
    "tree 0123456789abcdef\n",                         /* short */
    "tree  " T1 "\n",                                  /* two spaces */
    "tree " T1 "0\n",                                  /* long */
  };
  size_t at;
  git_oid id;

  for (size_t i = 0; i < sizeof (bad_tree) / sizeof (bad_tree[0]); i++)
    {
      at = 0;
      ck_assert_msg (sp_git_commit_tree (u (bad_tree[i]), strlen (bad_tree[i]), &at, &id) < 0, "case %zu", i);
    }
  {
    const char *c = "tree " T1 "\nparent 0123\n";

    at = 0;
    ck_assert_int_eq (sp_git_commit_tree (u (c), strlen (c), &at, &id), 0);
    ck_assert_int_eq (sp_git_commit_next_parent (u (c), strlen (c), &at, &id), -1);
  }
}
END_TEST

START_TEST (tree_entries_and_their_types)
{
  unsigned char t[256];
  size_t len = 0, at = 0;
  struct sp_git_tree_entry e;
  static const struct
  {
    const char *mode, *name;
    git_object_t type;
  } want[] = {
    { "100644", "a.txt", GIT_OBJECT_BLOB }, { "100755", "run", GIT_OBJECT_BLOB },
    { "120000", "link", GIT_OBJECT_BLOB },  { "40000", "dir", GIT_OBJECT_TREE },
    { "160000", "sub", GIT_OBJECT_COMMIT },
  };

  for (size_t i = 0; i < 5; i++)
    {
      len += (size_t)sprintf ((char *)t + len, "%s %s", want[i].mode, want[i].name) + 1;
      memset (t + len, (int)i + 1, GIT_OID_RAWSZ);
      len += GIT_OID_RAWSZ;
    }
  for (size_t i = 0; i < 5; i++)
    {
      ck_assert_int_eq (sp_git_tree_next (t, len, &at, &e), 1);
      ck_assert_uint_eq (e.name_len, strlen (want[i].name));
      ck_assert (memcmp (e.name, want[i].name, e.name_len) == 0);
      ck_assert_int_eq (sp_git_tree_entry_type (e.mode), want[i].type);
      ck_assert_uint_eq (e.id.id[0], i + 1);
      ck_assert_uint_eq (e.id.id[GIT_OID_RAWSZ - 1], i + 1);
    }
  ck_assert_int_eq (sp_git_tree_next (t, len, &at, &e), 0);
}
END_TEST

START_TEST (malformed_trees_are_refused)
{
  static const struct
  {
    const char *text;
    size_t len;
  } bad[] = {
    { "100644 a.txt\0"
      "0123456789",
      23 },                 /* an id cut short */
    { "100644 a.txt", 12 }, /* no NUL */
    { "100644 \0"
      "01234567890123456789",
      28 }, /* an empty name */
    { "1006448 a\0"
      "01234567890123456789",
      30 }, /* a mode over 6 digits */
    { "100694 a\0"
      "01234567890123456789",
      29 }, /* not octal */
    { " a\0"
      "01234567890123456789",
      23 },          /* no mode */
    { "100644", 6 }, /* nothing after the mode */
  };
  struct sp_git_tree_entry e;

  for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++)
    {
      size_t at = 0;

      ck_assert_msg (sp_git_tree_next (u (bad[i].text), bad[i].len, &at, &e) == -1, "case %zu", i);
    }
}
END_TEST

START_TEST (tag_gives_what_it_tags)
{
  const char *t = "object " P1 "\ntype commit\ntag v1\n";
  const char *bad = "type commit\nobject " P1 "\n";
  git_oid id;

  ck_assert_int_eq (sp_git_tag_target (u (t), strlen (t), &id), 0);
  assert_oid (&id, P1);
  ck_assert_int_eq (sp_git_tag_target (u (bad), strlen (bad), &id), -1);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("seed_git_objects");
  TCase *tc = tcase_create ("objects");

  tcase_add_test (tc, commit_gives_its_tree_then_each_parent_in_order);
  tcase_add_test (tc, a_root_commit_has_no_parent);
  tcase_add_test (tc, malformed_commits_are_refused);
  tcase_add_test (tc, tree_entries_and_their_types);
  tcase_add_test (tc, malformed_trees_are_refused);
  tcase_add_test (tc, tag_gives_what_it_tags);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
