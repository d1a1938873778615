/* The strict YAML reader (yaml_tree.h) and YAML configs (config.h): one
   named test per refused YAML feature, asserting the exact message; the
   accepted forms, which must build the very tree the JSON twin builds; and
   the syntax choice (by name, and JSON first then YAML on stdin).  No
   message may echo a value: every document here that plants one plants
   ghp_CANARY.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "text/config.h"
#include "text/json.h"
#include "text/yaml_tree.h"

#include "sp_check.h"

#define MAX_DEPTH SP_CONFIG_MAX_DEPTH

static void
assert_no_canary (const char *msg)
{
  ck_assert_msg (strstr (msg, "CANARY") == NULL, "message echoes a value: %s", msg);
}

static struct sp_json *
yaml_ok (const char *text, size_t len)
{
  sp_error_t err = NULL;
  struct sp_json *v = NULL;
  bool not_yaml = true;
  int ret = sp_yaml_tree_parse (text, len, MAX_DEPTH, &v, &not_yaml, &err);

  ck_assert_msg (ret == 0, "rejected: %s", sp_error_message (err));
  ck_assert_ptr_nonnull (v);
  ck_assert (!not_yaml);
  return v;
}

/* The reader refuses text with exactly message; not_yaml says whether
   libyaml itself refused the syntax.  */
static void
expect_yaml_error (const char *text, size_t len, unsigned depth, const char *message, bool want_not_yaml)
{
  sp_error_t err = NULL;
  struct sp_json *v = (struct sp_json *)1;
  bool not_yaml = !want_not_yaml;
  const char *msg;

  ck_assert_int_eq (sp_yaml_tree_parse (text, len, depth, &v, &not_yaml, &err), -1);
  ck_assert_ptr_null (v);
  msg = sp_error_message (err);
  ck_assert_msg (strcmp (msg, message) == 0, "message\n  \"%s\"\nwanted\n  \"%s\"", msg, message);
  ck_assert_msg (not_yaml == want_not_yaml, "not_yaml is %d for \"%s\"", not_yaml, msg);
  ck_assert_int_eq (err->status, 0);
  assert_no_canary (msg);
  sp_error_release (&err);
}

/* ---- refused YAML features, each with its exact message ------------------ */

#define BOOL11(word, key)                                                                                    \
  "sealedProbes." key ": \"" word "\" is a YAML 1.1 boolean; write true or false, or quote it for a string"
#define OCTAL0                                                                                               \
  "an integer with a leading zero is octal in YAML 1.1; write it without leading zeros, or quote it for a "  \
  "string"
#define OCTAL0O                                                                                              \
  "a 0o integer is octal in YAML 1.2 but a string in YAML 1.1; write a decimal integer, or quote it for a "  \
  "string"
#define HEX                                                                                                  \
  "a 0x integer is hexadecimal, which JSON cannot write; write a decimal integer, or quote it for a string"
#define BINARY                                                                                               \
  "a 0b integer is binary in YAML 1.1 but a string in YAML 1.2; write a decimal integer, or quote it for a " \
  "string"
#define UNDERSC                                                                                              \
  "digits with \"_\" are a number in YAML 1.1 but a string in YAML 1.2; write the number without \"_\", or " \
  "quote it for a string"
#define SEXAGES                                                                                              \
  "digits with \":\" (as in 1:30) are a base-60 number in YAML 1.1 but a string in YAML 1.2; quote it for "  \
  "a string"
#define TIMESTMP "a date is a timestamp in YAML 1.1 but a string in YAML 1.2; quote it for a string"
#define INFNAN                                                                                               \
  ".inf and .nan are YAML floats that JSON cannot write; write a number, or quote it for a string"
#define NONJSON                                                                                              \
  "a YAML 1.2 number not written as JSON writes one (as +1, .5 or 1. are); write it as JSON does, or quote " \
  "it for a string"
#define SP "sealedProbes:\n  "

/* name, text, exact message, whether libyaml refused the syntax */
#define REJECT_ROWS(X)                                                                                       \
  X (anchor_on_a_scalar_is_refused, SP "enabled: &flag true\n",                                              \
     "sealedProbes.enabled: anchors (&name) are not allowed", false)                                         \
  X (anchor_on_a_mapping_is_refused, "sealedProbes: &block\n  enabled: false\n",                             \
     "sealedProbes: anchors (&name) are not allowed", false)                                                 \
  X (anchor_on_a_sequence_is_refused, SP "privateRepos: &repos [octo/hello]\n",                              \
     "sealedProbes.privateRepos: anchors (&name) are not allowed", false)                                    \
  X (anchor_on_a_key_is_refused, SP "&k timeout: 30\n", "sealedProbes: anchors (&name) are not allowed",     \
     false)                                                                                                  \
  X (alias_is_refused, "host: &token ghp_CANARY\n" SP "runtime: *token\n",                                   \
     "host: anchors (&name) are not allowed", false)                                                         \
  X (alias_of_an_undefined_anchor_is_refused, SP "runtime: *token\n",                                        \
     "sealedProbes.runtime: aliases (*name) are not allowed", false)                                         \
  X (alias_as_a_key_is_refused, SP "*k : 30\n", "sealedProbes: aliases (*name) are not allowed", false)      \
  X (merge_key_is_refused, SP "<<: {timeout: 30}\n", "sealedProbes: merge keys (<<) are not allowed", false) \
  X (merge_key_in_flow_is_refused, "host: {<<: [a]}\n", "host: merge keys (<<) are not allowed", false)      \
  X (merge_spelling_as_a_value_is_refused, "host: <<\n",                                                     \
     "host: \"<<\" is a YAML 1.1 merge key, and merging is not allowed; quote it for a string", false)       \
  X (tag_is_refused, SP "timeout: !!int 30\n",                                                               \
     "sealedProbes.timeout: tags (!tag) are not allowed, !!str included; quote a string instead", false)     \
  X (str_tag_is_refused, SP "runtime: !!str runc\n",                                                         \
     "sealedProbes.runtime: tags (!tag) are not allowed, !!str included; quote a string instead", false)     \
  X (non_specific_tag_is_refused, SP "runtime: ! runc\n",                                                    \
     "sealedProbes.runtime: tags (!tag) are not allowed, !!str included; quote a string instead", false)     \
  X (local_tag_on_a_mapping_is_refused, "sealedProbes: !probes\n  enabled: false\n",                         \
     "sealedProbes: tags (!tag) are not allowed, !!str included; quote a string instead", false)             \
  X (yaml_directive_is_refused, "%YAML 1.1\n---\nsealedProbes: {}\n",                                        \
     "(document): %YAML and %TAG directives are not allowed", false)                                         \
  X (tag_directive_is_refused, "%TAG !e! tag:example.com,2000:\n---\nsealedProbes: {}\n",                    \
     "(document): %YAML and %TAG directives are not allowed", false)                                         \
  X (two_documents_are_refused, "sealedProbes: {enabled: false}\n---\nsealedProbes: {enabled: true}\n",      \
     "(document): more than one document (a second one starts at line 2)", false)                            \
  X (document_after_an_end_marker_is_refused, "a: 1\n...\n---\nb: 2\n",                                      \
     "(document): more than one document (a second one starts at line 3)", false)                            \
  X (duplicate_key_is_refused, SP "timeout: 30\n  timeout: 60\n", "sealedProbes: duplicate key \"timeout\"", \
     false)                                                                                                  \
  X (duplicate_key_quoted_and_plain_is_refused, SP "enabled: false\n  \"enabled\": false\n",                 \
     "sealedProbes: duplicate key \"enabled\"", false)                                                       \
  X (duplicate_key_at_root_is_refused, "sealedProbes: {}\nsealedProbes: {}\n",                               \
     "(document): duplicate key \"sealedProbes\"", false)                                                    \
  X (duplicate_key_in_host_section_is_refused, "host:\n  a:\n    - x: 1\n      x: 2\n",                      \
     "host.a[0]: duplicate key \"x\"", false)                                                                \
  X (mapping_key_is_refused, "? {a: 1}\n: x\n", "(document): a key must be a string, not a mapping", false)  \
  X (sequence_key_is_refused, SP "? [timeout]\n  : 30\n",                                                    \
     "sealedProbes: a key must be a string, not a sequence", false)                                          \
  X (integer_key_is_refused, "host:\n  1: x\n", "host: plain key \"1\" is a number, not a string; quote it", \
     false)                                                                                                  \
  X (boolean_key_is_refused, "true: x\n",                                                                    \
     "(document): plain key \"true\" is a boolean, not a string; quote it", false)                           \
  X (null_key_is_refused, "null: x\n", "(document): plain key \"null\" is null, not a string; quote it",     \
     false)                                                                                                  \
  X (tilde_key_is_refused, "~: x\n", "(document): plain key \"~\" is null, not a string; quote it", false)   \
  X (empty_key_is_refused, "? \n: x\n", "(document): plain key \"\" is null, not a string; quote it", false) \
  X (yaml11_boolean_key_is_refused, "on: push\n",                                                            \
     "(document): plain key \"on\" is a boolean in YAML 1.1, not a string; quote it", false)                 \
  X (octal_key_is_refused, "host: {017: x}\n",                                                               \
     "host: plain key \"017\" is an octal integer in YAML 1.1, not a string; quote it", false)               \
  X (yes_is_refused, SP "enabled: yes\n", BOOL11 ("yes", "enabled"), false)                                  \
  X (no_is_refused, SP "enabled: no\n", BOOL11 ("no", "enabled"), false)                                     \
  X (on_is_refused, SP "enabled: on\n", BOOL11 ("on", "enabled"), false)                                     \
  X (off_is_refused, SP "enabled: off\n", BOOL11 ("off", "enabled"), false)                                  \
  X (y_is_refused, SP "enabled: y\n", BOOL11 ("y", "enabled"), false)                                        \
  X (n_is_refused, SP "enabled: n\n", BOOL11 ("n", "enabled"), false)                                        \
  X (yes_in_capitals_is_refused, SP "enabled: YES\n", BOOL11 ("YES", "enabled"), false)                      \
  X (off_in_mixed_case_is_refused, SP "enabled: oFf\n", BOOL11 ("oFf", "enabled"), false)                    \
  X (yaml11_boolean_in_a_list_is_refused, SP "privateRepos: [octo/a, No]\n",                                 \
     "sealedProbes.privateRepos[1]: \"No\" is a YAML 1.1 boolean; write true or false, or quote it for a "   \
     "string",                                                                                               \
     false)                                                                                                  \
  X (yaml11_boolean_in_host_section_is_refused, "host:\n  country: NO\n",                                    \
     "host.country: \"NO\" is a YAML 1.1 boolean; write true or false, or quote it for a string", false)     \
  X (octal_0o_is_refused, SP "timeout: 0o17\n", "sealedProbes.timeout: " OCTAL0O, false)                     \
  X (hexadecimal_is_refused, SP "timeout: 0x1f\n", "sealedProbes.timeout: " HEX, false)                      \
  X (binary_is_refused, SP "timeout: 0b101\n", "sealedProbes.timeout: " BINARY, false)                       \
  X (leading_zero_octal_is_refused, SP "timeout: 017\n", "sealedProbes.timeout: " OCTAL0, false)             \
  X (leading_zero_with_eight_is_refused, SP "timeout: 019\n", "sealedProbes.timeout: " OCTAL0, false)        \
  X (negative_leading_zero_is_refused, SP "timeout: -017\n", "sealedProbes.timeout: " OCTAL0, false)         \
  X (underscore_digits_are_refused, SP "maxInvocations: 1_000\n", "sealedProbes.maxInvocations: " UNDERSC,   \
     false)                                                                                                  \
  X (sexagesimal_is_refused, SP "timeout: 1:30\n", "sealedProbes.timeout: " SEXAGES, false)                  \
  X (sexagesimal_float_is_refused, "host: 190:20:30.15\n", "host: " SEXAGES, false)                          \
  X (date_is_refused, "host: 2001-12-14\n", "host: " TIMESTMP, false)                                        \
  X (timestamp_is_refused, "host: 2001-12-14t21:59:43.10-05:00\n", "host: " TIMESTMP, false)                 \
  X (inf_is_refused, SP "timeout: .inf\n", "sealedProbes.timeout: " INFNAN, false)                           \
  X (negative_inf_is_refused, SP "timeout: -.Inf\n", "sealedProbes.timeout: " INFNAN, false)                 \
  X (nan_is_refused, SP "timeout: .NaN\n", "sealedProbes.timeout: " INFNAN, false)                           \
  X (plus_sign_is_refused, SP "timeout: +30\n", "sealedProbes.timeout: " NONJSON, false)                     \
  X (bare_fraction_is_refused, "host: .5\n", "host: " NONJSON, false)                                        \
  X (trailing_dot_is_refused, "host: 1.\n", "host: " NONJSON, false)                                         \
  X (nesting_deeper_than_64_is_refused,                                                                      \
     "a: "                                                                                                   \
     "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]" \
     "]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",                                                                        \
     "(document): nesting deeper than 64 at line 1, column 67", false)                                       \
  X (byte_order_mark_is_refused,                                                                             \
     "\xef\xbb\xbf"                                                                                          \
     "a: 1\n",                                                                                               \
     "(document): byte order mark at byte 0", false)                                                         \
  X (byte_order_mark_inside_is_refused, "a: \"x\xef\xbb\xbf\"\n", "(document): byte order mark at byte 5",   \
     false)                                                                                                  \
  X (invalid_utf8_is_refused, "a: \"ghp_CANARY\xc0\xaf\"\n", "(document): invalid UTF-8 at byte 14", false)  \
  X (surrogate_utf8_is_refused, "a: \xed\xa0\x80\n", "(document): invalid UTF-8 at byte 3", false)           \
  X (control_character_is_refused, "a: ghp_CANARY\x01\n", "(document): control character U+0001 at byte 13", \
     false)                                                                                                  \
  X (delete_character_is_refused, "a: x\x7f\n", "(document): control character U+007F at byte 4", false)     \
  X (c1_control_is_refused, "a: x\xc2\x80\n", "(document): control character U+0080 at byte 4", false)       \
  X (next_line_is_refused, "a: x\xc2\x85y\n",                                                                \
     "(document): U+0085 at byte 4 is a line break in YAML 1.1 but not in YAML 1.2; write it as an escape "  \
     "in a double-quoted string",                                                                            \
     false)                                                                                                  \
  X (line_separator_is_refused, "a: \"x\xe2\x80\xa8y\"\n",                                                   \
     "(document): U+2028 at byte 5 is a line break in YAML 1.1 but not in YAML 1.2; write it as an escape "  \
     "in a double-quoted string",                                                                            \
     false)                                                                                                  \
  X (nul_escape_is_refused, SP "runtime: \"ghp_CANARY\\0\"\n",                                               \
     "sealedProbes.runtime: escape decodes to NUL at line 2, column 12", false)                              \
  X (nul_escape_in_a_key_is_refused, "\"a\\x00b\": 1\n",                                                     \
     "(document): escape decodes to NUL at line 1, column 1", false)                                         \
  X (empty_text_is_refused, "", "(document): empty document", false)                                         \
  X (comments_only_are_refused, "# nothing here\n\n", "(document): empty document", false)                   \
  X (syntax_error_names_line_and_column, SP "timeout: 30\n runtime: runc\n",                                 \
     "(document): invalid YAML at line 3, column 2 (did not find expected key, while parsing a block "       \
     "mapping)",                                                                                             \
     true)                                                                                                   \
  X (syntax_error_in_a_flow_names_its_path, SP "privateRepos: [ghp_CANARY\n",                                \
     "sealedProbes.privateRepos[1]: invalid YAML at line 3, column 1 (did not find expected ',' or ']', "    \
     "while parsing a flow sequence)",                                                                       \
     true)                                                                                                   \
  X (unknown_escape_is_a_syntax_error, "a: \"\\q\"\n",                                                       \
     "a: invalid YAML at line 1, column 5 (found unknown escape character, while parsing a quoted scalar)",  \
     true)                                                                                                   \
  X (tab_indentation_is_a_syntax_error, "a:\n\tb: 1\n",                                                      \
     "a: invalid YAML at line 2, column 1 (found character that cannot start any token, while scanning for " \
     "the next token)",                                                                                      \
     true)

#define DEFINE_REJECT(name, text, message, not_yaml)                                                         \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_yaml_error (text, sizeof (text) - 1, MAX_DEPTH, message, not_yaml);                               \
  }                                                                                                          \
  END_TEST
REJECT_ROWS (DEFINE_REJECT)

START_TEST (nul_byte_is_refused_not_a_terminator)
{
  static const char text[] = "a: ghp_CANARY\0b: 1\n";
  expect_yaml_error (text, sizeof (text) - 1, MAX_DEPTH, "(document): control character U+0000 at byte 13",
                     false);
}
END_TEST

START_TEST (nesting_at_64_is_accepted)
{
  char text[256];
  size_t used = (size_t)snprintf (text, sizeof text, "a: ");
  cleanup_json struct sp_json *v = NULL;

  /* The root mapping is level 1, so 63 sequences make 64 levels.  */
  for (int i = 0; i < 63; i++)
    text[used++] = '[';
  for (int i = 0; i < 63; i++)
    text[used++] = ']';
  text[used] = '\0';
  v = yaml_ok (text, used);
  ck_assert_int_eq (v->type, SP_JSON_OBJECT);
}
END_TEST

START_TEST (nesting_in_block_style_is_capped_too)
{
  char *text = NULL;
  size_t cap = 70 * 70 * 2, used = 0;

  text = malloc (cap);
  ck_assert_ptr_nonnull (text);
  /* 65 nested block mappings, each one level further in.  */
  for (int i = 0; i < 65; i++)
    used += (size_t)snprintf (text + used, cap - used, "%*sk:\n", i, "");
  expect_yaml_error (text, used, MAX_DEPTH, "(document): nesting deeper than 64 at line 65, column 65",
                     false);
  free (text);
}
END_TEST

START_TEST (huge_max_depth_is_capped)
{
  size_t n = SP_JSON_DEPTH_LIMIT + 1;
  cleanup_free char *text = malloc (2 * n + 1);

  ck_assert_ptr_nonnull (text);
  memset (text, '[', n);
  memset (text + n, ']', n);
  expect_yaml_error (text, 2 * n, 100000, "(document): nesting deeper than 1024 at line 1, column 1025",
                     false);
}
END_TEST

/* A billion-laughs document: refused at its first anchor, before anything grows.  */
START_TEST (billion_laughs_is_refused_at_the_first_anchor)
{
  static const char text[] = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                             "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                             "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                             "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n";
  expect_yaml_error (text, sizeof (text) - 1, MAX_DEPTH, "a: anchors (&name) are not allowed", false);
}
END_TEST

/* ---- accepted forms: the same tree as the JSON twin ---------------------- */

static bool
trees_equal (const struct sp_json *a, const struct sp_json *b)
{
  if (a->type != b->type)
    return false;
  switch (a->type)
    {
    case SP_JSON_NULL:
      return true;
    case SP_JSON_BOOL:
      return a->u.boolean == b->u.boolean;
    case SP_JSON_NUMBER:
      return strcmp (a->u.number, b->u.number) == 0;
    case SP_JSON_STRING:
      return a->u.string.len == b->u.string.len
             && memcmp (a->u.string.data, b->u.string.data, a->u.string.len) == 0;
    case SP_JSON_ARRAY:
      if (a->u.array.len != b->u.array.len)
        return false;
      for (size_t i = 0; i < a->u.array.len; i++)
        if (!trees_equal (a->u.array.items[i], b->u.array.items[i]))
          return false;
      return true;
    case SP_JSON_OBJECT:
      if (a->u.object.len != b->u.object.len)
        return false;
      for (size_t i = 0; i < a->u.object.len; i++)
        if (strcmp (a->u.object.members[i].key, b->u.object.members[i].key) != 0
            || !trees_equal (a->u.object.members[i].value, b->u.object.members[i].value))
          return false;
      return true;
    default:
      return false;
    }
}

static void
expect_same_tree (const char *yaml, const char *json)
{
  sp_error_t err = NULL;
  cleanup_json struct sp_json *y = yaml_ok (yaml, strlen (yaml));
  cleanup_json struct sp_json *j = NULL;

  ck_assert_msg (sp_json_parse (json, strlen (json), MAX_DEPTH, &j, &err) == 0, "JSON twin: %s",
                 sp_error_message (err));
  ck_assert_msg (trees_equal (y, j), "the YAML tree differs from the JSON tree of %s", json);
}

/* name, YAML, its JSON twin */
#define SAME_TREE_ROWS(X)                                                                                    \
  X (block_style_builds_the_json_tree,                                                                       \
     SP "enabled: true\n  privateRepos:\n    - sample/hello\n  runtime: runc\n  timeout: 30\n"               \
        "  memoryLimit: 512m\n",                                                                             \
     "{\"sealedProbes\":{\"enabled\":true,\"privateRepos\":[\"sample/hello\"],\"runtime\":\"runc\","         \
     "\"timeout\":30,\"memoryLimit\":\"512m\"}}")                                                            \
  X (flow_style_builds_the_json_tree, "{sealedProbes: {enabled: false, privateRepos: [a/b, c/d]}}",          \
     "{\"sealedProbes\":{\"enabled\":false,\"privateRepos\":[\"a/b\",\"c/d\"]}}")                            \
  X (json_text_read_as_yaml_builds_the_json_tree,                                                            \
     "{\"a\": [1, -2.5, 1e400, true, null, \"x\\/y\"], \"b\": {}}",                                          \
     "{\"a\": [1, -2.5, 1e400, true, null, \"x\\/y\"], \"b\": {}}")                                          \
  X (comments_are_ignored, "# top\nsealedProbes:   # the block\n  enabled: false # off\n# end\n",            \
     "{\"sealedProbes\":{\"enabled\":false}}")                                                               \
  X (explicit_document_markers_are_accepted, "---\na: 1\n...\n", "{\"a\":1}")                                \
  X (quoted_strings_stay_strings,                                                                            \
     "a: \"true\"\nb: 'null'\nc: \"30\"\nd: 'yes'\ne: \"0o17\"\nf: '1:30'\ng: \"<<\"\n",                     \
     "{\"a\":\"true\",\"b\":\"null\",\"c\":\"30\",\"d\":\"yes\",\"e\":\"0o17\",\"f\":\"1:30\",\"g\":\"<<"    \
     "\"}")                                                                                                  \
  X (quoted_keys_are_strings, "\"1\": a\n'true': b\n\"\": c\n\"on\": d\n",                                   \
     "{\"1\":\"a\",\"true\":\"b\",\"\":\"c\",\"on\":\"d\"}")                                                 \
  X (escapes_decode, "a: \"caf\\u00e9 \\U0001F600 \\t\"\nb: 'it''s'\n",                                      \
     "{\"a\":\"caf\\u00e9 \\ud83d\\ude00 \\t\",\"b\":\"it's\"}")                                             \
  X (block_scalars_are_strings, "a: |\n  line 1\n  line 2\nb: >\n  folded\n  text\n",                        \
     "{\"a\":\"line 1\\nline 2\\n\",\"b\":\"folded text\\n\"}")                                              \
  X (core_schema_scalars_map_as_json,                                                                        \
     "[true, True, TRUE, false, False, FALSE, null, Null, NULL, ~, 0, -0, 7, -12, 2.5, 1e3, 1E-3]",          \
     "[true,true,true,false,false,false,null,null,null,null,0,-0,7,-12,2.5,1e3,1E-3]")                       \
  X (empty_value_is_null, "a:\nb: ~\n", "{\"a\":null,\"b\":null}")                                           \
  X (other_plain_scalars_are_strings, "[512m, python3, sample/hello, 1.2.3, tRUE, yess, 0X1F, 1-2]",         \
     "[\"512m\",\"python3\",\"sample/hello\",\"1.2.3\",\"tRUE\",\"yess\",\"0X1F\",\"1-2\"]")                 \
  X (fraction_stays_a_number_that_is_not_an_integer, "a: 30.0\n", "{\"a\":30.0}")                            \
  X (crlf_line_ends_are_accepted, "a: 1\r\nb:\r\n  - x\r\n", "{\"a\":1,\"b\":[\"x\"]}")                      \
  X (escaped_line_separator_is_accepted, "a: \"x\\Ly\"\n", "{\"a\":\"x\\u2028y\"}")

#define DEFINE_SAME_TREE(name, yaml, json)                                                                   \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_same_tree (yaml, json);                                                                           \
  }                                                                                                          \
  END_TEST
SAME_TREE_ROWS (DEFINE_SAME_TREE)

START_TEST (scalar_and_sequence_roots_are_trees_too)
{
  cleanup_json struct sp_json *s = yaml_ok ("hello", 5);
  cleanup_json struct sp_json *q = yaml_ok ("- a\n- b\n", 8);

  ck_assert_int_eq (s->type, SP_JSON_STRING);
  ck_assert_str_eq (s->u.string.data, "hello");
  ck_assert_int_eq (q->type, SP_JSON_ARRAY);
  ck_assert_uint_eq (q->u.array.len, 2);
}
END_TEST

/* ---- YAML configs: the same validation, the same messages ---------------- */

static void
expect_config_error (const char *text, enum sp_config_syntax syntax, const char *message)
{
  sp_error_t err = NULL;
  struct sp_config *c = (struct sp_config *)1;
  const char *msg;

  ck_assert_int_eq (sp_config_parse_syntax (text, strlen (text), syntax, &c, &err), -1);
  ck_assert_ptr_null (c);
  msg = sp_error_message (err);
  ck_assert_msg (strcmp (msg, message) == 0, "message\n  \"%s\"\nwanted\n  \"%s\"", msg, message);
  assert_no_canary (msg);
  sp_error_release (&err);
}

static struct sp_config *
config_ok (const char *text, enum sp_config_syntax syntax)
{
  sp_error_t err = NULL;
  struct sp_config *c = NULL;

  ck_assert_msg (sp_config_parse_syntax (text, strlen (text), syntax, &c, &err) == 0, "rejected: %s",
                 sp_error_message (err));
  return c;
}

#define Y SP_CONFIG_SYNTAX_YAML
#define S SP_CONFIG_SYNTAX_SNIFF
/* The message for a misspelt block, as in JSON (check_config.c).  */
#define MISSPELT(quoted)                                                                                     \
  "(document): key " quoted " is refused as a misspelling: did you mean \"sealedProbes\"?"
#define AMBIGUOUS " (the document holds \"sealedProbes\" too, so which block counts is ambiguous)"

/* name, text, syntax, exact message */
#define CONFIG_REJECT_ROWS(X)                                                                                \
  X (yaml_config_timeout_out_of_range_reads_as_in_json, SP "timeout: 0\n", Y,                                \
     "sealedProbes.timeout: must be an integer from 1 to 300")                                               \
  X (yaml_config_fraction_is_not_an_integer, SP "timeout: 30.0\n", Y,                                        \
     "sealedProbes.timeout: must be an integer from 1 to 300")                                               \
  X (yaml_config_quoted_number_is_a_string, SP "timeout: \"30\"\n", Y,                                       \
     "sealedProbes.timeout: must be an integer from 1 to 300")                                               \
  X (yaml_config_quoted_true_is_not_a_boolean, SP "enabled: 'true'\n", Y,                                    \
     "sealedProbes.enabled: must be true or false")                                                          \
  X (yaml_config_unknown_key_is_named, SP "timout: 30\n", Y, "sealedProbes: unknown key \"timout\"")         \
  X (yaml_config_null_block_is_refused, "sealedProbes:\n", Y, "sealedProbes: must be an object")             \
  X (yaml_config_scalar_root_is_refused, "ghp_CANARY\n", Y, "(document): must be an object")                 \
  X (yaml_config_repo_value_is_not_echoed,                                                                   \
     SP "enabled: true\n  privateRepos: [\"https://x:ghp_CANARY@github.com/o/r\"]\n", Y,                     \
     "sealedProbes.privateRepos[0]: must be \"owner/repo\", not a URL with credentials (found "              \
     "\"user:token@\"); "                                                                                    \
     "the credential must not be in the config")                                                             \
  X (yaml_config_runtime_value_is_not_echoed, SP "runtime: ghp_CANARY\n", Y,                                 \
     "sealedProbes.runtime: must be one of \"docker\", \"gvisor\", \"sbx\", \"runc\"")                       \
  X (yaml_config_duplicate_repo_is_named, SP "privateRepos:\n    - a/b\n    - 'a/b'\n", Y,                   \
     "sealedProbes.privateRepos[1]: duplicate of sealedProbes.privateRepos[0]")                              \
  X (sniffed_json_error_is_final, "{\"a\":1,\"a\":2,\"b\":\"\xe2\x80\xa8\"}", S,                             \
     "(document): duplicate key \"a\"")                                                                      \
  X (sniffed_json_config_error_is_final, "{\"sealedProbes\":{\"timeout\":0}}", S,                            \
     "sealedProbes.timeout: must be an integer from 1 to 300")                                               \
  X (sniffed_yaml_refusal_is_final, SP "enabled: yes\n", S, BOOL11 ("yes", "enabled"))                       \
  X (sniffed_yaml_config_error_is_final, SP "timeout: 301\n", S,                                             \
     "sealedProbes.timeout: must be at most 300 seconds: this proxy's bound, tighter than the firewall's, "  \
     "because a probe holds a sandbox slot for its whole timeout")                                           \
  X (sniffed_text_that_is_neither_names_both, SP "timeout: [ghp_CANARY\n", S,                                \
     "(document): neither JSON ((document): invalid JSON at byte 1 (lexical error: invalid char in json "    \
     "text)) nor YAML (sealedProbes.timeout[1]: invalid YAML at line 3, column 1 (did not find expected "    \
     "',' "                                                                                                  \
     "or ']', while parsing a flow sequence))")                                                              \
  X (sniffed_bad_utf8_reads_as_in_json, "{\"a\":\"\xff\"}", S, "(document): invalid UTF-8 at byte 6")        \
  X (sniffed_byte_order_mark_reads_as_in_json, "\xef\xbb\xbf{}", S, "(document): byte order mark at byte 0") \
  X (sniffed_empty_text_reads_as_in_json, "", S, "(document): empty document")                               \
  X (yaml_syntax_is_not_json, SP "enabled: false\n", SP_CONFIG_SYNTAX_JSON,                                  \
     "(document): invalid JSON at byte 1 (lexical error: invalid char in json text)")                        \
  X (yaml_config_misspelt_block_is_named, "sealedprobes:\n  enabled: true\n  privateRepos: [octo/hello]\n",  \
     Y, MISSPELT ("\"sealedprobes\""))                                                                       \
  X (yaml_config_quoted_misspelt_block_is_named, "host: {}\n'sealedProbe': {}\n", Y,                         \
     MISSPELT ("\"sealedProbe\""))                                                                           \
  X (yaml_config_escaped_misspelt_block_is_quoted_safely, "\"sealedProbe\\e\": {}\n", Y,                     \
     MISSPELT ("\"sealedProbe\\u001B\""))                                                                    \
  X (yaml_config_misspelt_block_beside_the_block_is_ambiguous, "sealedProbes: {}\nSealedProbes: {}\n", Y,    \
     MISSPELT ("\"SealedProbes\"") AMBIGUOUS)                                                                \
  X (sniffed_yaml_misspelt_block_is_named, "sealedProbe:\n  enabled: true\n", S,                             \
     MISSPELT ("\"sealedProbe\""))                                                                           \
  X (sniffed_json_misspelt_block_is_named, "{\"sealedProbe\": {\"enabled\": true}}", S,                      \
     MISSPELT ("\"sealedProbe\""))

#define DEFINE_CONFIG_REJECT(name, text, syntax, message)                                                    \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    expect_config_error (text, syntax, message);                                                             \
  }                                                                                                          \
  END_TEST
CONFIG_REJECT_ROWS (DEFINE_CONFIG_REJECT)

START_TEST (yaml_config_applies_every_key)
{
  cleanup_config struct sp_config *c = config_ok (SP "enabled: true\n  privateRepos:\n    - octo/hello\n"
                                                     "    - 'octo/world'\n  runtime: gvisor\n  timeout: 60\n"
                                                     "  memoryLimit: 2g\n  interpreter: python3\n"
                                                     "  maxInvocations: 500\n",
                                                  Y);

  ck_assert (c->enabled);
  ck_assert_uint_eq (c->n_private_repos, 2);
  ck_assert_str_eq (c->private_repos[1], "octo/world");
  ck_assert_int_eq (c->runtime, SP_RUNTIME_GVISOR);
  ck_assert_uint_eq (c->timeout_seconds, 60);
  ck_assert_uint_eq (c->memory_limit_bytes, 2ULL << 30);
  ck_assert_uint_eq (c->max_invocations, 500);
}
END_TEST

START_TEST (yaml_config_absent_block_is_told_from_a_disabled_one)
{
  cleanup_config struct sp_config *absent = config_ok ("agentFirewall: {mode: enforce}\nsealedProb: 1\n", Y);
  cleanup_config struct sp_config *off = config_ok (SP "enabled: false\n", Y);

  ck_assert (!absent->has_block && !absent->enabled);
  ck_assert (off->has_block && !off->enabled);
}
END_TEST

START_TEST (sniffed_json_is_read_as_json)
{
  /* A raw U+2028 is fine in a JSON string and refused in YAML text: the
     text is JSON, so it is read as JSON only.  */
  cleanup_config struct sp_config *c
      = config_ok ("{\"host\":\"\xe2\x80\xa8\",\"sealedProbes\":{\"timeout\":7}}", S);

  ck_assert_uint_eq (c->timeout_seconds, 7);
}
END_TEST

START_TEST (sniffed_yaml_is_read_as_yaml)
{
  cleanup_config struct sp_config *c = config_ok (SP "enabled: true\n  privateRepos: [octo/hello]\n", S);

  ck_assert (c->enabled);
  ck_assert_str_eq (c->private_repos[0], "octo/hello");
}
END_TEST

START_TEST (sniffed_json_syntax_error_goes_on_to_yaml)
{
  /* Not JSON (a trailing comma), but a YAML flow mapping.  */
  cleanup_config struct sp_config *c = config_ok ("{\"sealedProbes\": {\"timeout\": 9,}}", S);

  ck_assert_uint_eq (c->timeout_seconds, 9);
}
END_TEST

START_TEST (json_text_is_yaml_too)
{
  cleanup_config struct sp_config *c = config_ok ("{\"sealedProbes\": {\"timeout\": 9}}", Y);

  ck_assert_uint_eq (c->timeout_seconds, 9);
}
END_TEST

START_TEST (syntax_follows_the_name)
{
  ck_assert_int_eq (sp_config_syntax_for_path ("a.json"), SP_CONFIG_SYNTAX_JSON);
  ck_assert_int_eq (sp_config_syntax_for_path ("/etc/x/config.yaml"), SP_CONFIG_SYNTAX_YAML);
  ck_assert_int_eq (sp_config_syntax_for_path ("c.yml"), SP_CONFIG_SYNTAX_YAML);
  ck_assert_int_eq (sp_config_syntax_for_path ("-"), SP_CONFIG_SYNTAX_SNIFF);
  ck_assert_int_eq (sp_config_syntax_for_path ("config"), SP_CONFIG_SYNTAX_SNIFF);
  ck_assert_int_eq (sp_config_syntax_for_path ("c.JSON"), SP_CONFIG_SYNTAX_SNIFF);
  ck_assert_int_eq (sp_config_syntax_for_path ("c.yaml.bak"), SP_CONFIG_SYNTAX_SNIFF);
  ck_assert_int_eq (sp_config_syntax_for_path (".yml"), SP_CONFIG_SYNTAX_YAML);
}
END_TEST

/* Writes text to a fresh file named /tmp/check_yaml_XXXXXX<suffix>.  */
static char *
temp_file (const char *suffix, const char *text, size_t len)
{
  char *path = NULL;
  int fd;

  ck_assert (asprintf (&path, "/tmp/check_yaml_XXXXXX%s", suffix) > 0);
  fd = mkstemps (path, (int)strlen (suffix));
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (write (fd, text, len), (ssize_t)len);
  close (fd);
  return path;
}

static char *
load_error (const char *path)
{
  struct sp_config *c = NULL;
  sp_error_t err = NULL;
  char *msg;

  ck_assert_int_eq (sp_config_load (path, &c, &err), -1);
  ck_assert_ptr_null (c);
  msg = strdup (sp_error_message (err));
  sp_error_release (&err);
  return msg;
}

START_TEST (load_reads_by_extension)
{
  static const char yaml[] = SP "timeout: 0\n";
  cleanup_free char *as_yaml = temp_file (".yaml", yaml, sizeof yaml - 1);
  cleanup_free char *as_yml = temp_file (".yml", yaml, sizeof yaml - 1);
  cleanup_free char *as_json = temp_file (".json", yaml, sizeof yaml - 1);
  cleanup_free char *as_other = temp_file (".conf", yaml, sizeof yaml - 1);
  cleanup_free char *e_yaml = load_error (as_yaml);
  cleanup_free char *e_yml = load_error (as_yml);
  cleanup_free char *e_json = load_error (as_json);
  cleanup_free char *e_other = load_error (as_other);

  unlink (as_yaml), unlink (as_yml), unlink (as_json), unlink (as_other);
  ck_assert_str_eq (e_yaml, "sealedProbes.timeout: must be an integer from 1 to 300");
  ck_assert_str_eq (e_yml, e_yaml);
  ck_assert_str_eq (e_other, e_yaml);
  ck_assert_str_eq (e_json, "(document): invalid JSON at byte 1 (lexical error: invalid char in json text)");
}
END_TEST

START_TEST (yaml_file_past_the_size_cap_is_refused)
{
  char tmpl[] = "/tmp/check_yaml_XXXXXX.yaml";
  int fd = mkstemps (tmpl, 5);
  cleanup_free char *msg = NULL;

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (ftruncate (fd, SP_CONFIG_MAX_BYTES + 1), 0);
  close (fd);
  msg = load_error (tmpl);
  unlink (tmpl);
  ck_assert_ptr_nonnull (strstr (msg, "input larger than 1048576 bytes"));
}
END_TEST

START_TEST (yaml_example_loads_as_its_json_twin)
{
  cleanup_free char *yaml_path = sp_check_data_path ("../../examples/sealed-probes.yaml");
  cleanup_free char *json_path = sp_check_data_path ("../../examples/sealed-probes.json");
  cleanup_config struct sp_config *y = NULL;
  cleanup_config struct sp_config *j = NULL;
  sp_error_t err = NULL;

  ck_assert_msg (sp_config_load (yaml_path, &y, &err) == 0, "%s", sp_error_message (err));
  ck_assert_msg (sp_config_load (json_path, &j, &err) == 0, "%s", sp_error_message (err));
  ck_assert (y->enabled && j->enabled);
  ck_assert_uint_eq (y->n_private_repos, j->n_private_repos);
  ck_assert_str_eq (y->private_repos[0], j->private_repos[0]);
  ck_assert_int_eq (y->runtime, j->runtime);
  ck_assert_uint_eq (y->timeout_seconds, j->timeout_seconds);
  ck_assert_str_eq (y->memory_limit, j->memory_limit);
  ck_assert_uint_eq (y->memory_limit_bytes, j->memory_limit_bytes);
  ck_assert_int_eq (y->interpreter, j->interpreter);
  ck_assert_uint_eq (y->max_invocations, j->max_invocations);
}
END_TEST

#define ADD_ROW(name, ...) tcase_add_test (tc, name);

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_yaml_tree");
  TCase *tc = tcase_create ("yaml");

  REJECT_ROWS (ADD_ROW)
  tcase_add_test (tc, nul_byte_is_refused_not_a_terminator);
  tcase_add_test (tc, nesting_at_64_is_accepted);
  tcase_add_test (tc, nesting_in_block_style_is_capped_too);
  tcase_add_test (tc, huge_max_depth_is_capped);
  tcase_add_test (tc, billion_laughs_is_refused_at_the_first_anchor);
  SAME_TREE_ROWS (ADD_ROW)
  tcase_add_test (tc, scalar_and_sequence_roots_are_trees_too);
  CONFIG_REJECT_ROWS (ADD_ROW)
  tcase_add_test (tc, yaml_config_applies_every_key);
  tcase_add_test (tc, yaml_config_absent_block_is_told_from_a_disabled_one);
  tcase_add_test (tc, sniffed_json_is_read_as_json);
  tcase_add_test (tc, sniffed_yaml_is_read_as_yaml);
  tcase_add_test (tc, sniffed_json_syntax_error_goes_on_to_yaml);
  tcase_add_test (tc, json_text_is_yaml_too);
  tcase_add_test (tc, syntax_follows_the_name);
  tcase_add_test (tc, load_reads_by_extension);
  tcase_add_test (tc, yaml_file_past_the_size_cap_is_refused);
  tcase_add_test (tc, yaml_example_loads_as_its_json_twin);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
