/* sp_repo_name_check: one named test per row.  A reject row names the
   fragment its message must contain; no message may contain the value.  */
#define _GNU_SOURCE
#include <string.h>

#include "base/bounds.h"
#include "base/repo_name.h"

#include "sp_check.h"

#define A10    "abcdefghij"
#define A39    A10 A10 A10 "abcdefghi"
#define R50    A10 A10 A10 A10 A10
#define CANARY "ghp_CANARY123"

static void
expect_ok (const char *s, size_t len)
{
  sp_error_t err = NULL;
  int ret = sp_repo_name_check (s, len, &err);

  ck_assert_msg (ret == 0, "rejected: %s", err ? sp_error_message (err) : "(no error)");
  ck_assert_ptr_null (err);
}

static void
expect_reject (const char *s, size_t len, const char *fragment)
{
  sp_error_t err = NULL;
  const char *msg;
  int ret = sp_repo_name_check (s, len, &err);

  ck_assert_int_eq (ret, -1);
  ck_assert_ptr_nonnull (err);
  msg = sp_error_message (err);
  ck_assert_msg (strstr (msg, fragment) != NULL, "message \"%s\" lacks \"%s\"", msg, fragment);
  ck_assert_int_eq (err->status, 0);
  /* Never echo the value: short inputs may coincide with the fixed text
     ("r/r" is inside "owner/repo"), so only longer ones are compared.  */
  if (len >= 8 && memchr (s, '\0', len) == NULL)
    ck_assert_msg (strstr (msg, s) == NULL, "message echoes the value: %s", msg);
  ck_assert_msg (strstr (msg, "ghp_") == NULL && strstr (msg, "CANARY") == NULL, "message leaks: %s", msg);
  sp_error_release (&err);
}

/* name, value */
#define ACCEPT_ROWS(X)                                                                                       \
  X (plain_owner_repo_is_accepted, "octo/hello")                                                             \
  X (one_character_parts_are_accepted, "a/b")                                                                \
  X (digits_only_is_accepted, "123/456")                                                                     \
  X (owner_with_single_hyphens_is_accepted, "my-org-1/hello")                                                \
  X (repo_with_dot_underscore_hyphen_is_accepted, "octo/my_repo.v2-x")                                       \
  X (repo_starting_with_dot_is_accepted, "octo/.github")                                                     \
  X (repo_ending_in_git_without_dot_is_accepted, "octo/legit")                                               \
  X (repo_with_git_inside_is_accepted, "octo/x.git.y")                                                       \
  X (repo_named_dot_dot_inside_is_accepted, "octo/a..b")                                                     \
  X (owner_of_39_characters_is_accepted, A39 "/hello")                                                       \
  X (repo_of_100_characters_is_accepted, "octo/" R50 R50)                                                    \
  X (sample_repo_is_accepted, "sample/hello")

/* name, value, fragment of the reason */
#define REJECT_ROWS(X)                                                                                       \
  X (empty_name_is_rejected, "", "found an empty string")                                                    \
  X (repo_with_uppercase_is_rejected, "Octo/hello", "must be lowercase \"owner/repo\" (found an uppercase")  \
  X (repo_with_uppercase_in_repo_part_is_rejected, "octo/Hello", "found an uppercase letter")                \
  X (repo_all_uppercase_is_rejected, "OCTO/HELLO", "found an uppercase letter")                              \
  X (https_url_is_rejected, "https://github.com/octo/hello", "not a URL (found \"://\")")                    \
  X (scheme_with_colon_only_is_rejected, "github:octo/hello", "found \":\"")                                 \
  X (ssh_address_is_rejected, "git@github.com:octo/hello", "found \"@\"")                                    \
  X (bare_at_sign_is_rejected, "octo@hello/x", "found \"@\"")                                                \
  X (credentials_without_scheme_are_rejected, "user:token@github.com/octo/hello", "credentials")             \
  X (url_with_credentials_is_rejected, "https://x-access-token:tok@github.com/octo/hello", "user:token@")    \
  X (host_prefix_is_rejected, "github.com/octo/hello", "host name")                                          \
  X (host_prefix_with_two_parts_is_rejected, "github.com/octo", "host name")                                 \
  X (star_wildcard_is_rejected, "octo/*", "wildcard")                                                        \
  X (star_in_owner_is_rejected, "*/hello", "wildcard")                                                       \
  X (bracket_wildcard_is_rejected, "octo/[ab]c", "wildcard")                                                 \
  X (question_mark_is_rejected, "octo/hel?o", "found \"?\"")                                                 \
  X (url_query_is_rejected, "octo/hello?ref=main", "URL query")                                              \
  X (url_fragment_is_rejected, "octo/hello#readme", "URL fragment")                                          \
  X (dotdot_repo_is_rejected, "octo/..", "traversal")                                                        \
  X (dotdot_owner_is_rejected, "../hello", "traversal")                                                      \
  X (dotdot_in_middle_is_rejected, "octo/../hello", "traversal")                                             \
  X (dot_repo_is_rejected, "octo/.", "\".\" path part")                                                      \
  X (dot_owner_is_rejected, "./hello", "\".\" path part")                                                    \
  X (leading_slash_is_rejected, "/octo/hello", "leading \"/\"")                                              \
  X (space_inside_is_rejected, "octo/hel lo", "whitespace")                                                  \
  X (leading_space_is_rejected, " octo/hello", "whitespace")                                                 \
  X (trailing_newline_is_rejected, "octo/hello\n", "whitespace")                                             \
  X (tab_is_rejected, "octo\t/hello", "whitespace")                                                          \
  X (carriage_return_is_rejected, "octo/hello\r", "whitespace")                                              \
  X (control_character_is_rejected, "octo/hel\001lo", "control character")                                   \
  X (delete_character_is_rejected, "octo/hel\177lo", "control character")                                    \
  X (nul_inside_is_rejected, "octo/hel\0lo", "NUL byte")                                                     \
  X (trailing_nul_is_rejected, "octo/hello\0", "NUL byte")                                                   \
  X (non_ascii_letter_is_rejected, "octo/h\xc3\xa9llo", "non-ASCII")                                         \
  X (cyrillic_homoglyph_is_rejected,                                                                         \
     "\xd0\xbe"                                                                                              \
     "cto/hello",                                                                                            \
     "non-ASCII")                                                                                            \
  X (fullwidth_solidus_is_rejected, "octo\xef\xbc\x8fhello", "non-ASCII")                                    \
  X (git_suffix_is_rejected, "octo/hello.git", "\".git\" suffix")                                            \
  X (repo_named_dot_git_is_rejected, "octo/.git", "\".git\" suffix")                                         \
  X (empty_repo_part_is_rejected, "octo/", "empty part")                                                     \
  X (double_slash_is_rejected, "octo//hello", "empty part: \"//\"")                                          \
  X (trailing_slash_is_rejected, "octo/hello/", "trailing \"/\"")                                            \
  X (extra_slash_is_rejected, "octo/hello/extra", "more than one \"/\"")                                     \
  X (missing_slash_is_rejected, "octohello", "found no \"/\"")                                               \
  X (backslash_separator_is_rejected, "octo\\hello", "found no \"/\"")                                       \
  X (owner_of_40_characters_is_rejected, A39 "x/hello", "at most 39")                                        \
  X (repo_of_101_characters_is_rejected, "octo/" R50 R50 "x", "at most 100")                                 \
  X (owner_with_leading_hyphen_is_rejected, "-octo/hello", "start or end with \"-\"")                        \
  X (owner_with_trailing_hyphen_is_rejected, "octo-/hello", "start or end with \"-\"")                       \
  X (owner_with_double_hyphen_is_rejected, "oc--to/hello", "\"--\"")                                         \
  X (owner_with_underscore_is_rejected, "oc_to/hello", "owner may contain only")                             \
  X (repo_with_plus_is_rejected, "octo/hel+lo", "repository name may contain only")                          \
  X (percent_encoding_is_rejected, "octo/%2e%2e", "repository name may contain only")                        \
  X (backslash_in_repo_is_rejected, "octo/hel\\lo", "repository name may contain only")                      \
  X (tilde_in_repo_is_rejected, "octo/~hello", "repository name may contain only")                           \
  X (canary_in_credential_url_is_not_echoed, "https://x:" CANARY "@github.com/octo/hello", "credentials")    \
  X (canary_as_user_is_not_echoed, CANARY "@github.com/octo/hello", "found \"@\"")                           \
  X (canary_in_query_is_not_echoed, "octo/hello?token=" CANARY, "URL query")                                 \
  X (canary_in_fragment_is_not_echoed, "octo/hello#" CANARY, "URL fragment")                                 \
  X (canary_as_repo_name_is_not_echoed, "octo/" CANARY, "found an uppercase letter")                         \
  X (canary_after_space_is_not_echoed, "octo/hello " CANARY, "whitespace")

#define DEFINE_ACCEPT(name, value)                                                                           \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_ok (value, sizeof (value) - 1);                                                                   \
  }                                                                                                          \
  END_TEST
#define DEFINE_REJECT(name, value, fragment)                                                                 \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_reject (value, sizeof (value) - 1, fragment);                                                     \
  }                                                                                                          \
  END_TEST

ACCEPT_ROWS (DEFINE_ACCEPT)
REJECT_ROWS (DEFINE_REJECT)

/* The length argument is the whole truth: the bytes past it are not read,
   and a NUL before it is not a terminator.  */
START_TEST (length_argument_bounds_the_name)
{
  expect_ok ("octo/hello-and-more", 10);
  expect_reject ("octo/hello", 4, "found no \"/\"");
}
END_TEST

START_TEST (limits_come_from_bounds_h)
{
  ck_assert_int_eq (SP_REPO_OWNER_MAX, 39);
  ck_assert_int_eq (SP_REPO_NAME_MAX, 100);
  ck_assert_int_eq (SP_REPO_MAX_BYTES, 140);
}
END_TEST

/* Case variants are refused, never folded: the lowercase form is the only
   one that may match, so "Octo/Hello" cannot alias "octo/hello".  */
START_TEST (every_uppercase_letter_is_rejected)
{
  char name[] = "octo/hello-x";

  for (char c = 'A'; c <= 'Z'; c++)
    {
      name[5] = c;
      expect_reject (name, strlen (name), "found an uppercase letter");
    }
}
END_TEST

START_TEST (every_ascii_punctuation_outside_the_set_is_rejected)
{
  const char *allowed = "-._/";

  for (int c = 0x21; c < 0x7F; c++)
    {
      char name[] = "octo/hexlo";
      sp_error_t err = NULL;

      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || strchr (allowed, c))
        continue;
      name[7] = (char)c;
      ck_assert_msg (sp_repo_name_check (name, strlen (name), &err) == -1, "accepted byte 0x%02x", c);
      sp_error_release (&err);
    }
}
END_TEST

#define ADD_ROW(name, ...) tcase_add_test (tc, name);

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_repo_name");
  TCase *tc = tcase_create ("repo_name");

  ACCEPT_ROWS (ADD_ROW)
  REJECT_ROWS (ADD_ROW)
  tcase_add_test (tc, length_argument_bounds_the_name);
  tcase_add_test (tc, limits_come_from_bounds_h);
  tcase_add_test (tc, every_uppercase_letter_is_rejected);
  tcase_add_test (tc, every_ascii_punctuation_outside_the_set_is_rejected);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
