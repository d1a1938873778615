/* sp_result_validate against a hand-written table of hostile /probe/out
   contents, one named test per row, plus the size cap, untrusted outcomes
   and the canonical answer (sp_answer_render).  */
#include "sp_check.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/answer.h"
#include "base/bounds.h"
#include "base/error.h"
#include "text/result.h"

#define OUTCOME(s)                                                                                           \
  {                                                                                                          \
    (const uint8_t *)(s), sizeof (s) - 1                                                                     \
  }

/* Outcome sets.  STD is the default; the others exist for rows that need
   non-ASCII, quoting, or an outcome set that must not be trusted.  */
static const struct sp_bytes STD[SP_OUTCOME_COUNT] = { OUTCOME ("YES"), OUTCOME ("NO"), OUTCOME ("MAYBE") };
/* U+1F600, a non-BMP scalar: escaped only as a surrogate pair.  */
static const struct sp_bytes EMOJI[SP_OUTCOME_COUNT]
    = { OUTCOME ("\xF0\x9F\x98\x80"), OUTCOME ("NO"), OUTCOME ("MAYBE") };
/* "café" in NFC, "naïve", and "日本".  */
static const struct sp_bytes UNI[SP_OUTCOME_COUNT]
    = { OUTCOME ("caf\xC3\xA9"), OUTCOME ("na\xC3\xAFve"), OUTCOME ("\xE6\x97\xA5\xE6\x9C\xAC") };
/* a"b, c\d and "\ : the bytes JSON must escape.  */
static const struct sp_bytes QUOTE[SP_OUTCOME_COUNT]
    = { OUTCOME ("a\"b"), OUTCOME ("c\\d"), OUTCOME ("\"\\") };
static const struct sp_bytes SLASH[SP_OUTCOME_COUNT] = { OUTCOME ("a/b"), OUTCOME ("YES"), OUTCOME ("NO") };
/* U+1F441 and "?": what yajl alone decodes "\uD83D\u0041" and a lone
   "\uD83D" to.  Only the pre-pass stops those escapes forging these.  */
static const struct sp_bytes FORGE[SP_OUTCOME_COUNT]
    = { OUTCOME ("\xF0\x9F\x91\x81"), OUTCOME ("?"), OUTCOME ("NO") };
/* Invalid sets: the validator must refuse them whatever the document says.  */
static const struct sp_bytes DUPL[SP_OUTCOME_COUNT] = { OUTCOME ("YES"), OUTCOME ("YES"), OUTCOME ("NO") };
static const struct sp_bytes ERRO[SP_OUTCOME_COUNT] = { OUTCOME ("YES"), OUTCOME ("NO"), OUTCOME ("ERROR") };
static const struct sp_bytes EMPTY[SP_OUTCOME_COUNT] = { OUTCOME ("YES"), OUTCOME (""), OUTCOME ("NO") };
static const struct sp_bytes CTRL[SP_OUTCOME_COUNT] = { OUTCOME ("A\tB"), OUTCOME ("YES"), OUTCOME ("NO") };
static const struct sp_bytes BADUTF8[SP_OUTCOME_COUNT]
    = { OUTCOME ("YES"), OUTCOME ("NO\xC0\xAF"), OUTCOME ("MAYBE") };

/* The table: property, outcome set, input bytes (a literal, so its length
   is explicit and NUL bytes count), and the expected index, 0 for ERROR.  */
// clang-format off
#define RESULT_TABLE(X) \
  /* The accepted form.  */ \
  X (first_outcome_is_index_1,                            STD, "{\"result\":\"YES\"}", 1) \
  X (second_outcome_is_index_2,                           STD, "{\"result\":\"NO\"}", 2) \
  X (third_outcome_is_index_3,                            STD, "{\"result\":\"MAYBE\"}", 3) \
  /* Duplicate keys, plain and through escapes.  */ \
  X (duplicate_key_is_error,                              STD, "{\"result\":\"YES\",\"result\":\"YES\"}", 0) \
  X (duplicate_key_with_other_value_is_error,             STD, "{\"result\":\"YES\",\"result\":\"NO\"}", 0) \
  X (duplicate_key_via_escape_is_error,                   STD, "{\"result\":\"YES\",\"r\\u0065sult\":\"YES\"}", 0) \
  X (duplicate_key_escaped_first_is_error,                STD, "{\"\\u0072esult\":\"NO\",\"result\":\"NO\"}", 0) \
  X (duplicate_key_fully_escaped_is_error,                STD, "{\"result\":\"NO\",\"\\u0072\\u0065\\u0073\\u0075\\u006c\\u0074\":\"NO\"}", 0) \
  /* Escapes that decode to an outcome are the same answer.  */ \
  X (escaped_value_decoding_to_outcome_is_accepted,       STD, "{\"result\":\"\\u0059ES\"}", 1) \
  X (mixed_case_hex_escapes_decoding_to_outcome_are_accepted, STD, "{\"result\":\"\\u004e\\u004F\"}", 2) \
  X (escaped_key_decoding_to_result_is_accepted,          STD, "{\"\\u0072esult\":\"MAYBE\"}", 3) \
  X (fully_escaped_key_is_accepted,                       STD, "{\"\\u0072\\u0065\\u0073\\u0075\\u006C\\u0074\":\"YES\"}", 1) \
  X (escaped_solidus_decoding_to_outcome_is_accepted,     SLASH, "{\"result\":\"a\\/b\"}", 1) \
  X (escaped_value_decoding_to_error_is_error,            STD, "{\"result\":\"\\u0045RROR\"}", 0) \
  X (escaped_key_decoding_to_capitalized_key_is_error,    STD, "{\"\\u0052esult\":\"YES\"}", 0) \
  /* Whitespace: only SP, HT, LF and CR, and only between tokens.  */ \
  X (whitespace_around_every_token_is_accepted,           STD, " \t\r\n{ \"result\" \t:\r\n\"YES\" }\r\n ", 1) \
  X (trailing_newline_is_accepted,                        STD, "{\"result\":\"NO\"}\n", 2) \
  X (tabs_between_tokens_are_accepted,                    STD, "\t{\t\"result\"\t:\t\"MAYBE\"\t}\t", 3) \
  X (vertical_tab_as_whitespace_is_error,                 STD, "\v{\"result\":\"YES\"}", 0) \
  X (form_feed_as_whitespace_is_error,                    STD, "{\"result\":\"YES\"}\f", 0) \
  X (form_feed_between_tokens_is_error,                   STD, "{\"result\":\f\"YES\"}", 0) \
  X (no_break_space_as_whitespace_is_error,               STD, "\xC2\xA0{\"result\":\"YES\"}", 0) \
  X (raw_tab_inside_value_is_error,                       STD, "{\"result\":\"YES\t\"}", 0) \
  X (raw_newline_inside_value_is_error,                   STD, "{\"result\":\"YES\n\"}", 0) \
  /* Encodings other than strict UTF-8.  */ \
  X (byte_order_mark_is_error,                            STD, "\xEF\xBB\xBF{\"result\":\"YES\"}", 0) \
  X (utf16le_document_is_error,                           STD, "{\0\"\0r\0e\0s\0u\0l\0t\0\"\0:\0\"\0Y\0E\0S\0\"\0}\0", 0) \
  X (utf16be_document_with_bom_is_error,                  STD, "\xFE\xFF\0{\0\"\0r\0e\0s\0u\0l\0t\0\"\0:\0\"\0Y\0E\0S\0\"\0}", 0) \
  X (overlong_two_byte_solidus_is_error,                  STD, "{\"result\":\"YES\xC0\xAF\"}", 0) \
  X (overlong_three_byte_solidus_is_error,                STD, "{\"result\":\"\xE0\x80\xAF\"}", 0) \
  X (overlong_encoding_of_outcome_letter_is_error,        STD, "{\"result\":\"\xC1\x99" "ES\"}", 0) \
  X (utf8_encoded_surrogate_is_error,                     STD, "{\"result\":\"\xED\xA0\x80\"}", 0) \
  X (cesu8_surrogate_pair_for_non_bmp_outcome_is_error,   EMOJI, "{\"result\":\"\xED\xA0\xBD\xED\xB8\x80\"}", 0) \
  X (codepoint_above_u10ffff_is_error,                    STD, "{\"result\":\"\xF4\x90\x80\x80\"}", 0) \
  X (five_byte_sequence_is_error,                         STD, "{\"result\":\"\xF8\x88\x80\x80\x80\"}", 0) \
  X (truncated_utf8_sequence_in_value_is_error,           UNI, "{\"result\":\"\xE6\x97\"}", 0) \
  X (truncated_utf8_sequence_at_end_is_error,             STD, "{\"result\":\"YES\"}\xE6", 0) \
  X (lone_continuation_byte_is_error,                     STD, "{\"result\":\"YES\x80\"}", 0) \
  /* NUL, escaped or raw.  */ \
  X (escaped_nul_in_value_is_error,                       STD, "{\"result\":\"YES\\u0000\"}", 0) \
  X (escaped_nul_in_key_is_error,                         STD, "{\"result\\u0000\":\"YES\"}", 0) \
  X (raw_nul_inside_value_is_error,                       STD, "{\"result\":\"YES\0\"}", 0) \
  X (raw_nul_after_document_is_error,                     STD, "{\"result\":\"YES\"}\0", 0) \
  X (raw_nul_before_document_is_error,                    STD, "\0{\"result\":\"YES\"}", 0) \
  /* Surrogate escapes.  */ \
  X (lone_high_surrogate_escape_is_error,                 EMOJI, "{\"result\":\"\\uD83D\"}", 0) \
  X (lone_low_surrogate_escape_is_error,                  EMOJI, "{\"result\":\"\\uDE00\"}", 0) \
  X (high_surrogate_then_non_surrogate_escape_is_error,   STD, "{\"result\":\"\\uD83D\\u0041\"}", 0) \
  X (high_surrogate_then_high_surrogate_is_error,         EMOJI, "{\"result\":\"\\uD83D\\uD83D\"}", 0) \
  X (high_surrogate_then_raw_text_is_error,               STD, "{\"result\":\"\\uD83DNO\"}", 0) \
  X (reversed_surrogate_pair_is_error,                    EMOJI, "{\"result\":\"\\uDE00\\uD83D\"}", 0) \
  X (high_surrogate_then_ascii_escape_cannot_forge_non_bmp_outcome, FORGE, "{\"result\":\"\\uD83D\\u0041\"}", 0) \
  X (lone_high_surrogate_escape_cannot_forge_question_mark, FORGE, "{\"result\":\"\\uD83D\"}", 0) \
  X (surrogate_pair_escape_for_forge_target_is_accepted,  FORGE, "{\"result\":\"\\uD83D\\uDC41\"}", 1) \
  X (surrogate_pair_escape_matching_non_bmp_outcome_is_accepted, EMOJI, "{\"result\":\"\\uD83D\\uDE00\"}", 1) \
  X (lowercase_surrogate_pair_escape_is_accepted,         EMOJI, "{\"result\":\"\\ud83d\\ude00\"}", 1) \
  X (raw_non_bmp_outcome_is_accepted,                     EMOJI, "{\"result\":\"\xF0\x9F\x98\x80\"}", 1) \
  /* Non-ASCII outcomes: bytes, not characters, are compared.  */ \
  X (non_ascii_outcome_matched_exactly_is_accepted,       UNI, "{\"result\":\"caf\xC3\xA9\"}", 1) \
  X (non_ascii_outcome_via_escape_is_accepted,            UNI, "{\"result\":\"caf\\u00e9\"}", 1) \
  X (cjk_outcome_is_accepted,                             UNI, "{\"result\":\"\xE6\x97\xA5\xE6\x9C\xAC\"}", 3) \
  X (nfd_value_for_nfc_outcome_is_error,                  UNI, "{\"result\":\"cafe\xCC\x81\"}", 0) \
  X (nfd_escaped_value_for_nfc_outcome_is_error,          UNI, "{\"result\":\"cafe\\u0301\"}", 0) \
  X (fullwidth_letters_are_error,                         STD, "{\"result\":\"\xEF\xBC\xB9\xEF\xBC\xA5\xEF\xBC\xB3\"}", 0) \
  /* Near misses of an outcome.  */ \
  X (case_mismatch_is_error,                              STD, "{\"result\":\"yes\"}", 0) \
  X (trailing_space_in_value_is_error,                    STD, "{\"result\":\"YES \"}", 0) \
  X (leading_space_in_value_is_error,                     STD, "{\"result\":\" YES\"}", 0) \
  X (escaped_newline_after_outcome_is_error,              STD, "{\"result\":\"YES\\n\"}", 0) \
  X (prefix_of_outcome_is_error,                          STD, "{\"result\":\"YE\"}", 0) \
  X (outcome_with_suffix_is_error,                        STD, "{\"result\":\"YESS\"}", 0) \
  X (two_outcomes_concatenated_is_error,                  STD, "{\"result\":\"YESNO\"}", 0) \
  X (raw_delete_byte_after_outcome_is_error,              STD, "{\"result\":\"YES\x7F\"}", 0) \
  X (value_error_is_error,                                STD, "{\"result\":\"ERROR\"}", 0) \
  X (empty_string_value_is_error,                         STD, "{\"result\":\"\"}", 0) \
  /* Keys and members.  */ \
  X (extra_field_is_error,                                STD, "{\"result\":\"YES\",\"extra\":1}", 0) \
  X (extra_field_before_result_is_error,                  STD, "{\"extra\":\"x\",\"result\":\"YES\"}", 0) \
  X (missing_field_is_error,                              STD, "{}", 0) \
  X (other_key_only_is_error,                             STD, "{\"answer\":\"YES\"}", 0) \
  X (capitalized_key_is_error,                            STD, "{\"Result\":\"YES\"}", 0) \
  X (key_with_trailing_space_is_error,                    STD, "{\"result \":\"YES\"}", 0) \
  X (empty_key_is_error,                                  STD, "{\"\":\"YES\"}", 0) \
  X (number_key_is_error,                                 STD, "{1:\"YES\"}", 0) \
  /* Values that are not strings.  */ \
  X (integer_value_is_error,                              STD, "{\"result\":1}", 0) \
  X (float_value_is_error,                                STD, "{\"result\":1.5e3}", 0) \
  X (overflowing_integer_value_is_error,                  STD, "{\"result\":99999999999999999999999}", 0) \
  X (true_value_is_error,                                 STD, "{\"result\":true}", 0) \
  X (false_value_is_error,                                STD, "{\"result\":false}", 0) \
  X (null_value_is_error,                                 STD, "{\"result\":null}", 0) \
  X (nan_value_is_error,                                  STD, "{\"result\":NaN}", 0) \
  X (array_value_is_error,                                STD, "{\"result\":[\"YES\"]}", 0) \
  X (empty_array_value_is_error,                          STD, "{\"result\":[]}", 0) \
  X (object_value_is_error,                               STD, "{\"result\":{\"result\":\"YES\"}}", 0) \
  /* Roots other than an object, and depth.  */ \
  X (array_root_is_error,                                 STD, "[\"YES\"]", 0) \
  X (array_root_holding_the_object_is_error,              STD, "[{\"result\":\"YES\"}]", 0) \
  X (string_root_is_error,                                STD, "\"YES\"", 0) \
  X (number_root_is_error,                                STD, "1", 0) \
  X (null_root_is_error,                                  STD, "null", 0) \
  X (true_root_is_error,                                  STD, "true", 0) \
  X (nested_depth_3_is_error,                             STD, "{\"result\":{\"a\":[\"YES\"]}}", 0) \
  X (deep_nesting_is_error,                               STD, "[[[[[[[[[[[[[[[[\"YES\"]]]]]]]]]]]]]]]]", 0) \
  /* Anything after the one value.  */ \
  X (trailing_garbage_is_error,                           STD, "{\"result\":\"YES\"}x", 0) \
  X (trailing_closing_brace_is_error,                     STD, "{\"result\":\"YES\"}}", 0) \
  X (two_objects_is_error,                                STD, "{\"result\":\"YES\"}{\"result\":\"YES\"}", 0) \
  X (two_objects_on_two_lines_is_error,                   STD, "{\"result\":\"YES\"}\n{\"result\":\"NO\"}\n", 0) \
  X (second_value_after_object_is_error,                  STD, "{\"result\":\"YES\"} \"NO\"", 0) \
  X (trailing_comma_in_object_is_error,                   STD, "{\"result\":\"YES\",}", 0) \
  X (leading_comma_in_object_is_error,                    STD, "{,\"result\":\"YES\"}", 0) \
  /* Syntax that lax parsers accept.  */ \
  X (block_comment_is_error,                              STD, "{/**/\"result\":\"YES\"}", 0) \
  X (block_comment_after_document_is_error,               STD, "{\"result\":\"YES\"}/* done */", 0) \
  X (line_comment_is_error,                               STD, "{\"result\":\"YES\"}// done\n", 0) \
  X (single_quoted_value_is_error,                        STD, "{\"result\":'YES'}", 0) \
  X (single_quoted_key_is_error,                          STD, "{'result':\"YES\"}", 0) \
  X (unquoted_key_is_error,                               STD, "{result:\"YES\"}", 0) \
  X (missing_colon_is_error,                              STD, "{\"result\" \"YES\"}", 0) \
  X (equals_sign_for_colon_is_error,                      STD, "{\"result\"=\"YES\"}", 0) \
  X (invalid_escape_x_is_error,                           STD, "{\"result\":\"\\x59ES\"}", 0) \
  X (invalid_escape_apostrophe_is_error,                  STD, "{\"result\":\"YES\\'\"}", 0) \
  X (uppercase_u_escape_is_error,                         STD, "{\"result\":\"\\U0059ES\"}", 0) \
  X (short_unicode_escape_is_error,                       STD, "{\"result\":\"\\u005\"}", 0) \
  /* Truncation and emptiness.  */ \
  X (truncated_document_is_error,                         STD, "{\"result\":\"YES\"", 0) \
  X (truncated_after_colon_is_error,                      STD, "{\"result\":", 0) \
  X (unterminated_value_is_error,                         STD, "{\"result\":\"YES", 0) \
  X (lone_open_brace_is_error,                            STD, "{", 0) \
  X (lone_close_brace_is_error,                           STD, "}", 0) \
  X (empty_input_is_error,                                STD, "", 0) \
  X (whitespace_only_is_error,                            STD, "  \t\r\n ", 0) \
  /* Outcomes holding bytes that JSON must escape.  */ \
  X (outcome_with_quote_matched_via_escape_is_accepted,   QUOTE, "{\"result\":\"a\\\"b\"}", 1) \
  X (outcome_with_backslash_matched_via_escape_is_accepted, QUOTE, "{\"result\":\"c\\\\d\"}", 2) \
  X (quote_and_backslash_via_unicode_escapes_are_accepted, QUOTE, "{\"result\":\"\\u0022\\u005c\"}", 3) \
  X (unescaped_backslash_before_outcome_letter_is_error,  QUOTE, "{\"result\":\"c\\d\"}", 0) \
  /* Outcome sets that must not be trusted: every answer is ERROR.  */ \
  X (value_matching_duplicated_outcomes_is_error,         DUPL, "{\"result\":\"YES\"}", 0) \
  X (duplicated_outcomes_refuse_even_a_unique_match,      DUPL, "{\"result\":\"NO\"}", 0) \
  X (declared_error_outcome_is_still_error,               ERRO, "{\"result\":\"ERROR\"}", 0) \
  X (outcome_set_holding_error_refuses_everything,        ERRO, "{\"result\":\"YES\"}", 0) \
  X (outcome_set_holding_empty_outcome_refuses_everything, EMPTY, "{\"result\":\"YES\"}", 0) \
  X (outcome_set_holding_control_byte_refuses_everything, CTRL, "{\"result\":\"YES\"}", 0) \
  X (outcome_set_holding_invalid_utf8_refuses_everything, BADUTF8, "{\"result\":\"YES\"}", 0)
// clang-format on

struct row
{
  const char *name;
  const struct sp_bytes *outcomes;
  const char *input;
  size_t len;
  int expected; /* 1..3, or 0 for ERROR */
};

enum row_id
{
#define ROW_ID(name, set, input, expected) ROW_##name,
  RESULT_TABLE (ROW_ID)
#undef ROW_ID
      ROW_COUNT
};

static const struct row rows[] = {
#define ROW_INIT(name, set, input, expected) { #name, set, input, sizeof (input) - 1, expected },
  RESULT_TABLE (ROW_INIT)
#undef ROW_INIT
};

/* Hex of the first bytes of a row, for failure messages.  */
static const char *
hex_prefix (const char *s, size_t len, char *out, size_t cap)
{
  size_t used = 0;

  out[0] = '\0';
  for (size_t i = 0; i < len && used + 4 < cap; i++)
    used += (size_t)snprintf (out + used, cap - used, "%02x", (unsigned)(uint8_t)s[i]);
  return out;
}

static void
check_row (const struct row *r)
{
  sp_error_t err = NULL;
  char hex[256];
  int got = sp_result_validate (r->input, r->len, r->outcomes, &err);
  int want = r->expected == 0 ? -1 : r->expected;

  ck_assert_msg (got == want, "%s: got %d, want %d (input %s; reason: %s)", r->name, got, want,
                 hex_prefix (r->input, r->len, hex, sizeof (hex)), err ? sp_error_message (err) : "none");
  /* An error value comes with a reason, and only then.  */
  ck_assert_msg ((got < 0) == (err != NULL), "%s: error value and reason disagree", r->name);
  if (err)
    ck_assert_msg (err->msg != NULL && err->msg[0] != '\0', "%s: empty reason", r->name);
  sp_error_release (&err);

  /* An accepted answer's canonical form is accepted as the same answer.  */
  if (got > 0)
    {
      char canonical[SP_ANSWER_MAX_BYTES];
      ssize_t n = sp_answer_render (&r->outcomes[got - 1], canonical, sizeof (canonical));

      ck_assert_msg (n > 0, "%s: canonical render failed", r->name);
      ck_assert_msg (sp_result_validate (canonical, (size_t)n, r->outcomes, &err) == got,
                     "%s: canonical form is not the same answer", r->name);
      sp_error_release (&err);
    }
}

#define ROW_TEST(name, set, input, expected)                                                                 \
  START_TEST (name)                                                                                          \
  {                                                                                                          \
    check_row (&rows[ROW_##name]);                                                                           \
  }                                                                                                          \
  END_TEST
RESULT_TABLE (ROW_TEST)
#undef ROW_TEST

/* Fills buf with {"result":"YES"} followed by spaces up to len bytes.  */
static void
padded_document (char *buf, size_t len)
{
  static const char doc[] = "{\"result\":\"YES\"}";

  memset (buf, ' ', len);
  memcpy (buf, doc, sizeof (doc) - 1);
}

START_TEST (document_of_exactly_4096_bytes_is_accepted)
{
  char buf[SP_RESULT_MAX_BYTES];
  sp_error_t err = NULL;

  ck_assert_int_eq (SP_RESULT_MAX_BYTES, 4096);
  padded_document (buf, sizeof (buf));
  ck_assert_int_eq (sp_result_validate (buf, sizeof (buf), STD, &err), 1);
  ck_assert_ptr_null (err);
}
END_TEST

START_TEST (document_of_4097_bytes_is_error)
{
  char buf[SP_RESULT_MAX_BYTES + 1];
  sp_error_t err = NULL;

  padded_document (buf, sizeof (buf));
  ck_assert_int_eq (sp_result_validate (buf, sizeof (buf), STD, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "4096"));
  sp_error_release (&err);
}
END_TEST

START_TEST (document_of_4097_bytes_with_leading_padding_is_error)
{
  char buf[SP_RESULT_MAX_BYTES + 1];
  static const char doc[] = "{\"result\":\"NO\"}";
  sp_error_t err = NULL;

  memset (buf, ' ', sizeof (buf));
  memcpy (buf + sizeof (buf) - (sizeof (doc) - 1), doc, sizeof (doc) - 1);
  ck_assert_int_eq (sp_result_validate (buf, sizeof (buf), STD, &err), -1);
  sp_error_release (&err);
}
END_TEST

/* The cap is checked before any byte is read: a NULL buffer with an
   oversized length must not be touched.  */
START_TEST (length_cap_is_checked_before_reading_the_buffer)
{
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_result_validate (NULL, SP_RESULT_MAX_BYTES + 1, STD, &err), -1);
  ck_assert_ptr_nonnull (strstr (sp_error_message (err), "more than"));
  sp_error_release (&err);
  ck_assert_int_eq (sp_result_validate (NULL, SIZE_MAX, STD, &err), -1);
  sp_error_release (&err);
}
END_TEST

START_TEST (null_buffer_is_error)
{
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_result_validate (NULL, 0, STD, &err), -1);
  sp_error_release (&err);
}
END_TEST

START_TEST (null_outcomes_are_error)
{
  static const char doc[] = "{\"result\":\"YES\"}";
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_result_validate (doc, sizeof (doc) - 1, NULL, &err), -1);
  sp_error_release (&err);
}
END_TEST

/* An outcome of SP_OUTCOME_MAX_BYTES is fine; one byte more is refused.  */
START_TEST (outcome_length_is_bounded_by_outcome_max_bytes)
{
  char value[SP_OUTCOME_MAX_BYTES + 1];
  char doc[64 + SP_OUTCOME_MAX_BYTES];
  struct sp_bytes outcomes[SP_OUTCOME_COUNT] = { OUTCOME ("YES"), OUTCOME ("NO"), { NULL, 0 } };
  sp_error_t err = NULL;
  int n;

  memset (value, 'x', sizeof (value));
  outcomes[2].data = (const uint8_t *)value;

  outcomes[2].len = SP_OUTCOME_MAX_BYTES;
  n = snprintf (doc, sizeof (doc), "{\"result\":\"%.*s\"}", SP_OUTCOME_MAX_BYTES, value);
  ck_assert_int_eq (sp_result_validate (doc, (size_t)n, outcomes, &err), 3);
  ck_assert_ptr_null (err);

  outcomes[2].len = SP_OUTCOME_MAX_BYTES + 1;
  n = snprintf (doc, sizeof (doc), "{\"result\":\"%.*s\"}", SP_OUTCOME_MAX_BYTES + 1, value);
  ck_assert_int_eq (sp_result_validate (doc, (size_t)n, outcomes, &err), -1);
  sp_error_release (&err);
}
END_TEST

/* The value is compared by length as well as bytes: a NUL-terminated
   comparison would let "YES" match an outcome "YES\0..." or the reverse.  */
START_TEST (outcome_compared_by_length_not_by_terminator)
{
  static const char doc[] = "{\"result\":\"YES\"}";
  const struct sp_bytes outcomes[SP_OUTCOME_COUNT]
      = { { (const uint8_t *)"YESX", 3 }, OUTCOME ("NO"), OUTCOME ("MAYBE") };
  const struct sp_bytes longer[SP_OUTCOME_COUNT]
      = { { (const uint8_t *)"YES", 4 }, OUTCOME ("NO"), OUTCOME ("MAYBE") };
  sp_error_t err = NULL;

  ck_assert_int_eq (sp_result_validate (doc, sizeof (doc) - 1, outcomes, &err), 1);
  /* "YES\0" holds a control byte, so the whole set is refused.  */
  ck_assert_int_eq (sp_result_validate (doc, sizeof (doc) - 1, longer, &err), -1);
  sp_error_release (&err);
}
END_TEST

/* The validator never keeps state between calls.  */
START_TEST (repeated_calls_give_the_same_answer)
{
  static const char yes[] = "{\"result\":\"YES\"}";
  static const char bad[] = "{\"result\":\"YES\",\"result\":\"YES\"}";
  sp_error_t err = NULL;

  for (int i = 0; i < 100; i++)
    {
      ck_assert_int_eq (sp_result_validate (yes, sizeof (yes) - 1, STD, &err), 1);
      ck_assert_int_eq (sp_result_validate (bad, sizeof (bad) - 1, STD, &err), -1);
      sp_error_release (&err);
    }
}
END_TEST

/* Every outcome of every valid set renders to a form that validates back to
   itself, and nothing else.  */
START_TEST (canonical_render_of_each_outcome_validates_to_its_index)
{
  const struct sp_bytes *sets[] = { STD, EMOJI, UNI, QUOTE, SLASH };

  for (size_t s = 0; s < sizeof (sets) / sizeof (sets[0]); s++)
    for (int i = 0; i < SP_OUTCOME_COUNT; i++)
      {
        char buf[SP_ANSWER_MAX_BYTES];
        sp_error_t err = NULL;
        ssize_t n = sp_answer_render (&sets[s][i], buf, sizeof (buf));

        ck_assert_int_gt (n, 0);
        ck_assert_int_eq (sp_result_validate (buf, (size_t)n, sets[s], &err), i + 1);
        ck_assert_ptr_null (err);
      }
}
END_TEST

/* sp_answer_render: the only bytes the agent ever sees.  */

START_TEST (render_of_error_is_the_canonical_error_bytes)
{
  char buf[SP_ANSWER_MAX_BYTES];
  ssize_t n = sp_answer_render (NULL, buf, sizeof (buf));

  ck_assert_int_eq (n, (ssize_t)strlen ("{\"result\":\"ERROR\"}"));
  ck_assert_mem_eq (buf, "{\"result\":\"ERROR\"}", (size_t)n);
}
END_TEST

START_TEST (render_of_plain_outcome_is_canonical)
{
  char buf[SP_ANSWER_MAX_BYTES];
  const struct sp_bytes o = OUTCOME ("MAYBE");
  ssize_t n = sp_answer_render (&o, buf, sizeof (buf));

  ck_assert_int_eq (n, (ssize_t)strlen ("{\"result\":\"MAYBE\"}"));
  ck_assert_mem_eq (buf, "{\"result\":\"MAYBE\"}", (size_t)n);
}
END_TEST

START_TEST (render_escapes_only_quote_and_backslash)
{
  char buf[SP_ANSWER_MAX_BYTES];
  const struct sp_bytes o = OUTCOME ("a\"b\\c/\xC3\xA9");
  static const char want[] = "{\"result\":\"a\\\"b\\\\c/\xC3\xA9\"}";
  ssize_t n = sp_answer_render (&o, buf, sizeof (buf));

  ck_assert_int_eq (n, (ssize_t)(sizeof (want) - 1));
  ck_assert_mem_eq (buf, want, (size_t)n);
}
END_TEST

START_TEST (render_of_outcome_with_control_byte_is_error)
{
  char buf[SP_ANSWER_MAX_BYTES];
  const struct sp_bytes tab = OUTCOME ("A\tB");
  const struct sp_bytes nul = { (const uint8_t *)"A\0B", 3 };

  ck_assert_int_eq (sp_answer_render (&tab, buf, sizeof (buf)), -1);
  ck_assert_int_eq (sp_answer_render (&nul, buf, sizeof (buf)), -1);
}
END_TEST

START_TEST (render_into_too_small_buffer_is_error)
{
  char buf[SP_ANSWER_MAX_BYTES];
  const struct sp_bytes o = OUTCOME ("a\"b");
  size_t need = strlen ("{\"result\":\"a\\\"b\"}");

  ck_assert_int_eq (sp_answer_render (&o, buf, need - 1), -1);
  ck_assert_int_eq (sp_answer_render (&o, buf, 0), -1);
  ck_assert_int_eq (sp_answer_render (NULL, buf, strlen (SP_ANSWER_ERROR) - 1), -1);
  ck_assert_int_eq (sp_answer_render (&o, buf, need), (ssize_t)need);
}
END_TEST

/* The worst case, 64 quotes, fits SP_ANSWER_MAX_BYTES exactly.  */
START_TEST (render_of_longest_escaped_outcome_fits_answer_max_bytes)
{
  char value[SP_OUTCOME_MAX_BYTES];
  char buf[SP_ANSWER_MAX_BYTES];
  struct sp_bytes o = { (const uint8_t *)value, sizeof (value) };

  memset (value, '"', sizeof (value));
  ck_assert_int_eq (sp_answer_render (&o, buf, sizeof (buf)), SP_ANSWER_MAX_BYTES);
}
END_TEST

/* A script that writes {"result":"ERROR"} gets exactly what a crash gets.  */
START_TEST (script_writing_error_is_indistinguishable_from_failure)
{
  static const char written[] = "{\"result\":\"ERROR\"}";
  static const char garbage[] = "Traceback";
  char from_script[SP_ANSWER_MAX_BYTES], from_crash[SP_ANSWER_MAX_BYTES];
  sp_error_t err = NULL;
  int a, b;
  ssize_t na, nb;

  a = sp_result_validate (written, sizeof (written) - 1, STD, &err);
  sp_error_release (&err);
  b = sp_result_validate (garbage, sizeof (garbage) - 1, STD, &err);
  sp_error_release (&err);
  ck_assert_int_eq (a, -1);
  ck_assert_int_eq (b, -1);
  na = sp_answer_render (a > 0 ? &STD[a - 1] : NULL, from_script, sizeof (from_script));
  nb = sp_answer_render (b > 0 ? &STD[b - 1] : NULL, from_crash, sizeof (from_crash));
  ck_assert_int_eq (na, nb);
  ck_assert_mem_eq (from_script, from_crash, (size_t)na);
  ck_assert_mem_eq (from_script, SP_ANSWER_ERROR, (size_t)na);
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_result");
  TCase *table = tcase_create ("table");
  TCase *bounds = tcase_create ("bounds");
  TCase *answer = tcase_create ("answer");

#define ROW_ADD(name, set, input, expected) tcase_add_test (table, name);
  RESULT_TABLE (ROW_ADD)
#undef ROW_ADD
  suite_add_tcase (s, table);

  tcase_add_test (bounds, document_of_exactly_4096_bytes_is_accepted);
  tcase_add_test (bounds, document_of_4097_bytes_is_error);
  tcase_add_test (bounds, document_of_4097_bytes_with_leading_padding_is_error);
  tcase_add_test (bounds, length_cap_is_checked_before_reading_the_buffer);
  tcase_add_test (bounds, null_buffer_is_error);
  tcase_add_test (bounds, null_outcomes_are_error);
  tcase_add_test (bounds, outcome_length_is_bounded_by_outcome_max_bytes);
  tcase_add_test (bounds, outcome_compared_by_length_not_by_terminator);
  tcase_add_test (bounds, repeated_calls_give_the_same_answer);
  suite_add_tcase (s, bounds);

  tcase_add_test (answer, canonical_render_of_each_outcome_validates_to_its_index);
  tcase_add_test (answer, render_of_error_is_the_canonical_error_bytes);
  tcase_add_test (answer, render_of_plain_outcome_is_canonical);
  tcase_add_test (answer, render_escapes_only_quote_and_backslash);
  tcase_add_test (answer, render_of_outcome_with_control_byte_is_error);
  tcase_add_test (answer, render_into_too_small_buffer_is_error);
  tcase_add_test (answer, render_of_longest_escaped_outcome_fits_answer_max_bytes);
  tcase_add_test (answer, script_writing_error_is_indistinguishable_from_failure);
  suite_add_tcase (s, answer);
  return s;
}

SP_CHECK_MAIN (make_suite)
