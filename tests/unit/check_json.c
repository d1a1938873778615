/* The strict JSON tree (json.h): duplicate keys anywhere, error paths, and
   sp_json_integer's edge cases.  Table rows become one named test each.  */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "os/fileio.h"
#include "text/json.h"

#include "sp_check.h"

#define MAX_DEPTH 64

static struct sp_json *
parse_ok (const char *text)
{
  sp_error_t err = NULL;
  struct sp_json *v = NULL;
  int ret = sp_json_parse (text, strlen (text), MAX_DEPTH, &v, &err);

  ck_assert_msg (ret == 0, "rejected: %s", sp_error_message (err));
  ck_assert_ptr_nonnull (v);
  return v;
}

/* The message must start with `path: ` and contain fragment.  */
static void
expect_error (const char *text, size_t len, unsigned depth, const char *path, const char *fragment)
{
  sp_error_t err = NULL;
  struct sp_json *v = (struct sp_json *)1;
  const char *msg;
  size_t plen = strlen (path);

  ck_assert_int_eq (sp_json_parse (text, len, depth, &v, &err), -1);
  ck_assert_ptr_null (v);
  msg = sp_error_message (err);
  ck_assert_msg (strncmp (msg, path, plen) == 0 && strncmp (msg + plen, ": ", 2) == 0,
                 "message \"%s\" does not start with path \"%s\"", msg, path);
  ck_assert_msg (strstr (msg, fragment) != NULL, "message \"%s\" lacks \"%s\"", msg, fragment);
  ck_assert_msg (strstr (msg, "CANARY") == NULL, "message echoes a value: %s", msg);
  sp_error_release (&err);
}

/* name, text, path, fragment */
#define REJECT_ROWS(X)                                                                                       \
  X (duplicate_key_at_root_is_error, "{\"a\":1,\"a\":2}", "(document)", "duplicate key \"a\"")               \
  X (duplicate_key_with_same_value_is_error, "{\"a\":1,\"a\":1}", "(document)", "duplicate key \"a\"")       \
  X (duplicate_key_nested_is_error, "{\"x\":{\"y\":{\"k\":1,\"z\":0,\"k\":2}}}", "x.y",                      \
     "duplicate key \"k\"")                                                                                  \
  X (duplicate_key_in_array_of_objects_is_error, "{\"list\":[{\"a\":1},{\"b\":1,\"b\":2}]}", "list[1]",      \
     "duplicate key \"b\"")                                                                                  \
  X (duplicate_key_in_root_array_is_error, "[{\"a\":1,\"a\":null}]", "(document)[0]", "duplicate key")       \
  X (duplicate_key_deep_in_arrays_is_error, "{\"a\":[[{}],[{},{\"q\":[],\"q\":{}}]]}", "a[1][1]",            \
     "duplicate key \"q\"")                                                                                  \
  X (escaped_duplicate_key_is_error, "{\"a\":1,\"\\u0061\":2}", "(document)", "duplicate key \"a\"")         \
  X (escaped_surrogate_pair_duplicate_key_is_error, "{\"\xf0\x9f\x98\x80\":1,\"\\ud83d\\ude00\":2}",         \
     "(document)", "duplicate key \"\\uD83D\\uDE00\"")                                                       \
  X (escaped_solidus_duplicate_key_is_error, "{\"a/b\":1,\"a\\/b\":2}", "(document)", "duplicate key")       \
  X (first_duplicate_in_document_order_is_named, "{\"b\":1,\"a\":1,\"a\":2,\"b\":2}", "(document)",          \
     "duplicate key \"a\"")                                                                                  \
  X (duplicate_key_with_control_character_is_escaped, "{\"a\\nb\":1,\"a\\nb\":2}", "(document)",             \
     "duplicate key \"a\\u000Ab\"")                                                                          \
  X (error_inside_member_names_its_path, "{\"sealedProbes\":{\"timeout\": }}", "sealedProbes.timeout",       \
     "invalid JSON")                                                                                         \
  X (error_inside_array_names_its_index, "{\"sealedProbes\":{\"privateRepos\":[\"a\",\"b\",]}}",             \
     "sealedProbes.privateRepos[2]", "invalid JSON")                                                         \
  X (error_under_odd_key_brackets_it, "{\"a b\":{\"c\":[1,}}", "[\"a b\"].c[1]", "invalid JSON")             \
  X (error_at_root_names_document, "nul", "(document)", "invalid JSON")                                      \
  X (empty_document_is_error, "", "(document)", "empty document")                                            \
  X (whitespace_only_document_is_error, "  \n", "(document)", "invalid JSON")                                \
  X (comment_is_error, "{\"a\":1 /* c */}", "(document)", "invalid JSON")                                    \
  X (line_comment_is_error, "{\"a\":1}\n// c\n", "(document)", "invalid JSON")                               \
  X (trailing_garbage_is_error, "{} x", "(document)", "invalid JSON")                                        \
  X (second_value_is_error, "{} {}", "(document)", "invalid JSON")                                           \
  X (truncated_object_is_error, "{\"a\":", "a", "invalid JSON")                                              \
  X (truncated_array_is_error, "[1,[2", "(document)[1][1]", "invalid JSON")                                  \
  X (trailing_comma_in_object_is_error, "{\"a\":1,}", "(document)", "invalid JSON")                          \
  X (single_quotes_are_error, "{'a':1}", "(document)", "invalid JSON")                                       \
  X (nan_is_error, "[NaN]", "(document)[0]", "invalid JSON")                                                 \
  X (infinity_is_error, "[-Infinity]", "(document)[0]", "invalid JSON")                                      \
  X (leading_zero_number_is_error, "[01]", "(document)[1]", "invalid JSON")                                  \
  X (plus_sign_is_error, "[+1]", "(document)[0]", "invalid JSON")                                            \
  X (bare_fraction_is_error, "[.5]", "(document)[0]", "invalid JSON")                                        \
  X (nul_escape_is_error, "{\"a\":\"x\\u0000\"}", "(document)", "NUL")                                       \
  X (lone_high_surrogate_is_error, "[\"\\ud800\"]", "(document)", "surrogate")                               \
  X (lone_low_surrogate_is_error, "[\"\\udc00\"]", "(document)", "surrogate")                                \
  X (byte_order_mark_is_error, "\xef\xbb\xbf{}", "(document)", "byte order mark")                            \
  X (invalid_utf8_is_error, "[\"\xc0\xaf\"]", "(document)", "UTF-8")                                         \
  X (raw_control_in_string_is_error, "[\"a\tb\"]", "(document)", "control")                                  \
  X (vertical_tab_whitespace_is_error, "[1,\v2]", "(document)", "outside a string")                          \
  X (bad_escape_is_error, "[\"\\x41\"]", "(document)", "escape")                                             \
  X (string_value_is_not_echoed, "{\"k\":\"ghp_CANARY\" \"x\"}", "(document)", "invalid JSON")               \
  X (string_value_before_bad_byte_is_not_echoed, "{\"k\":\"ghp_CANARY\x01\"}", "(document)", "control")

#define DEFINE_REJECT(name, text, path, fragment)                                                            \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_error (text, sizeof (text) - 1, MAX_DEPTH, path, fragment);                                       \
  }                                                                                                          \
  END_TEST
REJECT_ROWS (DEFINE_REJECT)

START_TEST (nul_byte_in_buffer_is_error_not_terminator)
{
  static const char text[] = "{\"a\":1}\0{\"a\":1}";
  expect_error (text, sizeof (text) - 1, MAX_DEPTH, "(document)", "outside a string");
}
END_TEST

START_TEST (nesting_at_the_limit_is_accepted)
{
  sp_error_t err = NULL;
  cleanup_json struct sp_json *v = NULL;

  ck_assert_int_eq (sp_json_parse ("[[[1]]]", 7, 3, &v, &err), 0);
  ck_assert_ptr_null (err);
}
END_TEST

START_TEST (nesting_past_the_limit_is_error)
{
  expect_error ("[[[[1]]]]", 9, 3, "(document)", "nesting deeper than 3");
}
END_TEST

START_TEST (huge_max_depth_is_capped)
{
  enum
  {
    N = 5000
  };
  cleanup_free char *text = malloc (2 * N + 1);

  memset (text, '[', N);
  memset (text + N, ']', N);
  text[2 * N] = '\0';
  expect_error (text, 2 * N, UINT_MAX, "(document)", "nesting deeper than 1024");
}
END_TEST

START_TEST (same_key_in_sibling_objects_is_not_duplicate)
{
  cleanup_json struct sp_json *v = parse_ok ("{\"a\":{\"a\":1},\"b\":{\"a\":2},\"c\":[{\"a\":3},{\"a\":4}]}");
  ck_assert_int_eq (v->u.object.len, 3);
}
END_TEST

START_TEST (keys_differing_only_in_case_are_not_duplicates)
{
  cleanup_json struct sp_json *v = parse_ok ("{\"a\":1,\"A\":2}");
  ck_assert_int_eq (v->u.object.len, 2);
}
END_TEST

START_TEST (tree_keeps_document_order_and_types)
{
  cleanup_json struct sp_json *v = parse_ok ("{\"z\":null,\"y\":true,\"x\":false,\"w\":-1.50e+3,\"v\":\"s\","
                                             "\"u\":[1,{}],\"t\":{}}");
  const struct sp_json_member *m;

  ck_assert_int_eq (v->type, SP_JSON_OBJECT);
  ck_assert_int_eq (v->u.object.len, 7);
  m = v->u.object.members;
  ck_assert_str_eq (m[0].key, "z");
  ck_assert_int_eq (m[0].value->type, SP_JSON_NULL);
  ck_assert_int_eq (m[1].value->type, SP_JSON_BOOL);
  ck_assert (m[1].value->u.boolean);
  ck_assert (!m[2].value->u.boolean);
  ck_assert_int_eq (m[3].value->type, SP_JSON_NUMBER);
  ck_assert_str_eq (m[3].value->u.number, "-1.50e+3"); /* the text exactly as written */
  ck_assert_int_eq (m[4].value->type, SP_JSON_STRING);
  ck_assert_str_eq (m[4].value->u.string.data, "s");
  ck_assert_int_eq (m[5].value->type, SP_JSON_ARRAY);
  ck_assert_int_eq (m[5].value->u.array.len, 2);
  ck_assert_int_eq (m[5].value->u.array.items[1]->type, SP_JSON_OBJECT);
  ck_assert_int_eq (m[6].value->u.object.len, 0);
}
END_TEST

START_TEST (scalar_root_is_accepted)
{
  cleanup_json struct sp_json *a = parse_ok ("\"x\"");
  cleanup_json struct sp_json *b = parse_ok (" 7 ");
  cleanup_json struct sp_json *c = parse_ok ("null");

  ck_assert_int_eq (a->type, SP_JSON_STRING);
  ck_assert_str_eq (b->u.number, "7");
  ck_assert_int_eq (c->type, SP_JSON_NULL);
}
END_TEST

START_TEST (strings_are_decoded)
{
  cleanup_json struct sp_json *v = parse_ok ("[\"a\\n\\\"\\\\\\/\\u00e9\\ud83d\\ude00\"]");
  const struct sp_json *s = v->u.array.items[0];

  ck_assert_uint_eq (s->u.string.len, 1 + 1 + 1 + 1 + 1 + 2 + 4);
  ck_assert_mem_eq (s->u.string.data, "a\n\"\\/\xc3\xa9\xf0\x9f\x98\x80", s->u.string.len);
  ck_assert_int_eq (s->u.string.data[s->u.string.len], '\0');
}
END_TEST

START_TEST (object_get_finds_members_only_in_objects)
{
  cleanup_json struct sp_json *v = parse_ok ("{\"a\":1,\"b\":[2]}");

  ck_assert_str_eq (sp_json_object_get (v, "a")->u.number, "1");
  ck_assert_ptr_null (sp_json_object_get (v, "c"));
  ck_assert_ptr_null (sp_json_object_get (sp_json_object_get (v, "b"), "a"));
  ck_assert_ptr_null (sp_json_object_get (NULL, "a"));
}
END_TEST

/* A 1 MiB config can hold some 100 000 keys: a quadratic duplicate check
   would take minutes here, the sorted one takes well under a second.  */
static char *
many_keys (size_t n, bool duplicate_last, size_t *len)
{
  size_t cap = n * 16 + 16;
  char *text = malloc (cap);
  size_t used = 0;

  ck_assert_ptr_nonnull (text);
  text[used++] = '{';
  for (size_t i = 0; i < n; i++)
    used += (size_t)snprintf (text + used, cap - used, "%s\"k%zu\":0", i ? "," : "",
                              duplicate_last && i == n - 1 ? (size_t)0 : i);
  text[used++] = '}';
  text[used] = '\0';
  *len = used;
  return text;
}

START_TEST (object_with_200k_keys_parses_without_quadratic_time)
{
  size_t len;
  cleanup_free char *text = many_keys (200000, false, &len);
  cleanup_json struct sp_json *v = NULL;
  sp_error_t err = NULL;
  struct timespec t0, t1;

  clock_gettime (CLOCK_MONOTONIC, &t0);
  ck_assert_int_eq (sp_json_parse (text, len, MAX_DEPTH, &v, &err), 0);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  ck_assert_int_eq (v->u.object.len, 200000);
  ck_assert_msg (t1.tv_sec - t0.tv_sec < 10, "took %ld s", (long)(t1.tv_sec - t0.tv_sec));
}
END_TEST

START_TEST (duplicate_among_200k_keys_is_found)
{
  size_t len;
  cleanup_free char *text = many_keys (200000, true, &len);
  expect_error (text, len, MAX_DEPTH, "(document)", "duplicate key \"k0\"");
}
END_TEST

START_TEST (long_key_is_truncated_in_messages)
{
  char text[512];
  char key[201];
  sp_error_t err = NULL;
  struct sp_json *v = NULL;

  memset (key, 'k', 200);
  key[200] = '\0';
  snprintf (text, sizeof text, "{\"%s\":1,\"%s\":2}", key, key);
  ck_assert_int_eq (sp_json_parse (text, strlen (text), MAX_DEPTH, &v, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "...\""));
  ck_assert_ptr_null (strstr (sp_error_message (err), key + 100)); /* not all 200 */
  sp_error_release (&err);
}
END_TEST

START_TEST (quote_escapes_to_printable_ascii)
{
  cleanup_free char *a = sp_json_quote ("a\"b\\c", 5);
  cleanup_free char *b = sp_json_quote ("\xc3\xa9\x1b[31m\xe2\x80\xae", 10);
  cleanup_free char *c = sp_json_quote ("\xf0\x9f\x98\x80", 4);
  cleanup_free char *d = sp_json_quote ("", 0);

  ck_assert_str_eq (a, "\"a\\\"b\\\\c\"");
  ck_assert_str_eq (b, "\"\\u00E9\\u001B[31m\\u202E\"");
  ck_assert_str_eq (c, "\"\\uD83D\\uDE00\"");
  ck_assert_str_eq (d, "\"\"");
}
END_TEST

START_TEST (paths_render_keys_and_indexes)
{
  cleanup_free char *a = sp_json_path_key (SP_JSON_ROOT_PATH, "sealedProbes");
  cleanup_free char *b = sp_json_path_key ("sealedProbes", "timeout");
  cleanup_free char *c = sp_json_path_index ("sealedProbes.privateRepos", 2);
  cleanup_free char *d = sp_json_path_index (NULL, 0);
  cleanup_free char *e = sp_json_path_key (NULL, "a.b");
  cleanup_free char *f = sp_json_path_key ("x", "");

  ck_assert_str_eq (a, "sealedProbes");
  ck_assert_str_eq (b, "sealedProbes.timeout");
  ck_assert_str_eq (c, "sealedProbes.privateRepos[2]");
  ck_assert_str_eq (d, "(document)[0]");
  ck_assert_str_eq (e, "[\"a.b\"]");
  ck_assert_str_eq (f, "x[\"\"]");
}
END_TEST

/* sp_json_integer on a hand-made node, so that texts yajl would never hand
   over (a leading zero, a plus sign) are covered too.
   name, text, min, max, expected return, expected value.  */
#define INTEGER_ROWS(X)                                                                                      \
  X (integer_zero_is_read, "0", -5, 5, 0, 0)                                                                 \
  X (integer_negative_zero_is_zero, "-0", -5, 5, 0, 0)                                                       \
  X (integer_negative_is_read, "-5", -5, 5, 0, -5)                                                           \
  X (integer_at_max_is_read, "300", 1, 300, 0, 300)                                                          \
  X (integer_at_min_is_read, "1", 1, 300, 0, 1)                                                              \
  X (integer_above_max_is_rejected, "301", 1, 300, -1, 0)                                                    \
  X (integer_below_min_is_rejected, "0", 1, 300, -1, 0)                                                      \
  X (negative_zero_below_min_is_rejected, "-0", 1, 300, -1, 0)                                               \
  X (integer_with_leading_zero_is_rejected, "030", 0, 300, -1, 0)                                            \
  X (integer_with_leading_zeros_is_rejected, "00", 0, 300, -1, 0)                                            \
  X (negative_with_leading_zero_is_rejected, "-01", -5, 5, -1, 0)                                            \
  X (integer_with_fraction_is_rejected, "30.0", 1, 300, -1, 0)                                               \
  X (zero_with_fraction_is_rejected, "0.0", -1, 1, -1, 0)                                                    \
  X (integer_with_exponent_is_rejected, "3e1", 1, 300, -1, 0)                                                \
  X (integer_with_capital_exponent_is_rejected, "3E1", 1, 300, -1, 0)                                        \
  X (zero_with_exponent_is_rejected, "0e0", -1, 1, -1, 0)                                                    \
  X (integer_with_plus_is_rejected, "+1", -5, 5, -1, 0)                                                      \
  X (lone_minus_is_rejected, "-", -5, 5, -1, 0)                                                              \
  X (empty_number_text_is_rejected, "", -5, 5, -1, 0)                                                        \
  X (integer_with_space_is_rejected, " 1", -5, 5, -1, 0)                                                     \
  X (int64_max_is_read, "9223372036854775807", INT64_MIN, INT64_MAX, 0, INT64_MAX)                           \
  X (int64_max_plus_one_overflows, "9223372036854775808", INT64_MIN, INT64_MAX, -1, 0)                       \
  X (int64_min_is_read, "-9223372036854775808", INT64_MIN, INT64_MAX, 0, INT64_MIN)                          \
  X (int64_min_minus_one_overflows, "-9223372036854775809", INT64_MIN, INT64_MAX, -1, 0)                     \
  X (twenty_digit_integer_overflows, "99999999999999999999", INT64_MIN, INT64_MAX, -1, 0)                    \
  X (int64_max_times_ten_overflows, "92233720368547758070", INT64_MIN, INT64_MAX, -1, 0)

#define DEFINE_INTEGER(name, text, min, max, want_ret, want_value)                                           \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    struct sp_json n = { .type = SP_JSON_NUMBER, .u.number = (char *)text };                                 \
    int64_t out = 42;                                                                                        \
    ck_assert_int_eq (sp_json_integer (&n, min, max, &out), want_ret);                                       \
    ck_assert_int_eq (out, want_ret == 0 ? (int64_t)want_value : 42); /* untouched on failure */             \
  }                                                                                                          \
  END_TEST
INTEGER_ROWS (DEFINE_INTEGER)

START_TEST (integer_of_non_number_is_rejected)
{
  struct sp_json s = { .type = SP_JSON_STRING, .u.string = { (char *)"30", 2 } };
  struct sp_json b = { .type = SP_JSON_BOOL, .u.boolean = true };
  int64_t out;

  ck_assert_int_eq (sp_json_integer (&s, 0, 100, &out), -1);
  ck_assert_int_eq (sp_json_integer (&b, 0, 100, &out), -1);
  ck_assert_int_eq (sp_json_integer (NULL, 0, 100, &out), -1);
}
END_TEST

START_TEST (parsed_numbers_keep_fraction_and_exponent_so_they_are_not_integers)
{
  cleanup_json struct sp_json *v = parse_ok ("[30.0,3e1,-0,30]");
  int64_t out;

  ck_assert_int_eq (sp_json_integer (v->u.array.items[0], 1, 300, &out), -1);
  ck_assert_int_eq (sp_json_integer (v->u.array.items[1], 1, 300, &out), -1);
  ck_assert_int_eq (sp_json_integer (v->u.array.items[2], -1, 1, &out), 0);
  ck_assert_int_eq (out, 0);
  ck_assert_int_eq (sp_json_integer (v->u.array.items[3], 1, 300, &out), 0);
  ck_assert_int_eq (out, 30);
}
END_TEST

/* JSONTestSuite, read in place: every n_ file is rejected, and every y_ file
   is accepted except those our stricter rules refuse on purpose.  */
static const char *const y_refused[] = {
  "y_object_duplicated_key.json",           /* duplicate keys */
  "y_object_duplicated_key_and_value.json", /* duplicate keys */
  "y_string_null_escape.json",              /* \u0000 */
  "y_object_escaped_null_in_key.json",      /* \u0000 */
};

static bool
is_refused (const char *name)
{
  for (size_t i = 0; i < sizeof (y_refused) / sizeof (y_refused[0]); i++)
    if (strcmp (name, y_refused[i]) == 0)
      return true;
  return false;
}

static void
run_corpus (char prefix)
{
  const char *data = getenv ("SP_TEST_DATA");
  cleanup_free char *dir_path = NULL;
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;
  size_t seen = 0;
  size_t refused_seen = 0;

  ck_assert_msg (data != NULL, "SP_TEST_DATA is not set");
  ck_assert (asprintf (&dir_path, "%s/../../../shared/testdata/json-test-suite/test_parsing", data) > 0);
  dir = opendir (dir_path);
  ck_assert_msg (dir != NULL, "JSONTestSuite missing at %s", dir_path);
  while ((de = readdir (dir)) != NULL)
    {
      cleanup_free char *path = NULL;
      cleanup_free char *buf = NULL;
      cleanup_json struct sp_json *v = NULL;
      sp_error_t err = NULL;
      size_t len;
      int ret;

      if (de->d_name[0] != prefix || de->d_name[1] != '_')
        continue;
      ck_assert (asprintf (&path, "%s/%s", dir_path, de->d_name) > 0);
      ck_assert_int_eq (sp_read_path_capped (path, 1 << 20, &buf, &len, &err), 0);
      ret = sp_json_parse (buf, len, MAX_DEPTH, &v, &err);
      if (prefix == 'n' || is_refused (de->d_name))
        ck_assert_msg (ret == -1, "%s was accepted", de->d_name);
      else
        ck_assert_msg (ret == 0, "%s was rejected: %s", de->d_name, sp_error_message (err));
      sp_error_release (&err);
      if (is_refused (de->d_name))
        refused_seen++;
      seen++;
    }
  ck_assert_uint_gt (seen, 90);
  /* The exception list names real files, so it cannot go stale unnoticed.  */
  if (prefix == 'y')
    ck_assert_uint_eq (refused_seen, sizeof (y_refused) / sizeof (y_refused[0]));
}

START_TEST (json_test_suite_n_files_are_all_rejected)
{
  run_corpus ('n');
}
END_TEST

START_TEST (json_test_suite_y_files_are_accepted_unless_strictly_refused)
{
  run_corpus ('y');
}
END_TEST

#define ADD_ROW(name, ...) tcase_add_test (tc, name);

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_json");
  TCase *tc = tcase_create ("json");

  tcase_set_timeout (tc, 60);
  REJECT_ROWS (ADD_ROW)
  INTEGER_ROWS (ADD_ROW)
  tcase_add_test (tc, nul_byte_in_buffer_is_error_not_terminator);
  tcase_add_test (tc, nesting_at_the_limit_is_accepted);
  tcase_add_test (tc, nesting_past_the_limit_is_error);
  tcase_add_test (tc, huge_max_depth_is_capped);
  tcase_add_test (tc, same_key_in_sibling_objects_is_not_duplicate);
  tcase_add_test (tc, keys_differing_only_in_case_are_not_duplicates);
  tcase_add_test (tc, tree_keeps_document_order_and_types);
  tcase_add_test (tc, scalar_root_is_accepted);
  tcase_add_test (tc, strings_are_decoded);
  tcase_add_test (tc, object_get_finds_members_only_in_objects);
  tcase_add_test (tc, object_with_200k_keys_parses_without_quadratic_time);
  tcase_add_test (tc, duplicate_among_200k_keys_is_found);
  tcase_add_test (tc, long_key_is_truncated_in_messages);
  tcase_add_test (tc, quote_escapes_to_printable_ascii);
  tcase_add_test (tc, paths_render_keys_and_indexes);
  tcase_add_test (tc, integer_of_non_number_is_rejected);
  tcase_add_test (tc, parsed_numbers_keep_fraction_and_exponent_so_they_are_not_integers);
  tcase_add_test (tc, json_test_suite_n_files_are_all_rejected);
  tcase_add_test (tc, json_test_suite_y_files_are_accepted_unless_strictly_refused);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
