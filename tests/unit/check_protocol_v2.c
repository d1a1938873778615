/* Wire protocol v2 framing (docs/protocol.md, "Protocol v2"): a request of
   REPO, SCHEMA and SCRIPT, a response of a status byte and the canonical
   value.  As in check_protocol.c, frames are built here byte by byte, not
   with the encoder, so that encoder and decoder are each held to the
   documented bytes; and v1 stays what check_protocol.c holds it to, which
   this file checks only where the two versions meet.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/protocol.h"
#include "base/request.h"

#include "sp_check.h"

_Static_assert(SP_REQUEST_V2_BODY_MAX_BYTES == 3 * 5 + 140 + 4096 + 65536, "documented v2 body bound");
_Static_assert(SP_REQUEST_V2_BODY_MIN_BYTES == 3 * 6, "documented smallest v2 body");
_Static_assert(SP_REQUEST_V2_FRAME_MAX_BYTES == 69797, "documented v2 frame bound");
_Static_assert(SP_REQUEST_ANY_BODY_MAX_BYTES == SP_REQUEST_V2_BODY_MAX_BYTES, "serve reads up to v2's bound");
_Static_assert(SP_RESPONSE_V2_FRAME_MAX_BYTES == 10 + 1 + 8192, "documented v2 response bound");

#define CANARY "CANARY_SECRET_7d1e"

/* Room for the largest v2 request plus stray fields.  */
#define FRAME_CAP (SP_REQUEST_V2_FRAME_MAX_BYTES + 256)

static uint8_t f[FRAME_CAP];
static size_t f_len;

static void
put (const void *p, size_t n)
{
  ck_assert_uint_le (f_len + n, FRAME_CAP);
  memcpy (f + f_len, p, n);
  f_len += n;
}

static void
put_u32_at (size_t off, uint32_t v)
{
  f[off] = (uint8_t)(v >> 24);
  f[off + 1] = (uint8_t)(v >> 16);
  f[off + 2] = (uint8_t)(v >> 8);
  f[off + 3] = (uint8_t)v;
}

/* A header of version and kind whose body_length sync_length() fills in.  */
static void
start (uint8_t version, uint8_t kind)
{
  const uint8_t hdr[] = { 'S', 'P', 'R', 'B', version, kind, 0, 0, 0, 0 };

  f_len = 0;
  put (hdr, sizeof (hdr));
}

static void
field (uint8_t tag, const void *v, size_t n)
{
  const uint8_t h[5] = { tag, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };

  put (h, sizeof (h));
  put (v, n);
}

static void
sync_length (void)
{
  put_u32_at (6, (uint32_t)(f_len - 10));
}

#define SCHEMA_TEXT "{\"type\":\"boolean\"}"

static const char *const v2_text[] = { "acme/widgets", SCHEMA_TEXT, "print(1)\n" };
static const uint8_t v2_tag[] = { 0x01, 0x04, 0x03 };

/* The documented v2 request with field [skip] left out and a field of
   extra_tag inserted before field [insert_at] (3 = after the script).  */
static void
build_v2 (int skip, int insert_at, uint8_t extra_tag, const char *extra_value)
{
  start (0x02, 0x01);
  for (int i = 0; i <= 3; i++)
    {
      if (i == insert_at)
        field (extra_tag, extra_value, strlen (extra_value));
      if (i < 3 && i != skip)
        field (v2_tag[i], v2_text[i], strlen (v2_text[i]));
    }
  sync_length ();
}

/* Decodes f from an exactly sized heap copy, so that ASan catches a read
   past the end; returns the message, which never echoes the canary.  */
static char *
decode_fails (void)
{
  cleanup_free uint8_t *copy = malloc (f_len ? f_len : 1);
  cleanup_error sp_error_t err = NULL;
  struct sp_request req = { 0 };

  memcpy (copy, f, f_len);
  ck_assert_int_eq (sp_request_decode (copy, f_len, &req, &err), -1);
  ck_assert_ptr_nonnull (err);
  ck_assert_ptr_null (strstr (sp_error_message (err), CANARY));
  ck_assert_ptr_null (strstr (sp_error_message (err), "boolean"));
  return strdup (sp_error_message (err));
}

static void
rejected_because (const char *why)
{
  cleanup_free char *msg = decode_fails ();
  ck_assert_msg (strstr (msg, why) != NULL, "message `%s` lacks `%s`", msg, why);
}

static void
decode_ok (struct sp_request *req)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_request_decode (f, f_len, req, &err) < 0)
    ck_abort_msg ("decode: %s", sp_error_message (err));
}

static bool
bytes_are (struct sp_bytes b, const char *s)
{
  return b.len == strlen (s) && memcmp (b.data, s, b.len) == 0;
}

/* The docs' hex example, byte for byte.  */
/* clang-format off */
static const uint8_t documented_v2_request[] = {
  0x53, 0x50, 0x52, 0x42, 0x02, 0x01, 0x00, 0x00, 0x00, 0x36,                   /* header, v2, body 54 */
  0x01, 0x00, 0x00, 0x00, 0x0c, 'a', 'c', 'm', 'e', '/', 'w', 'i', 'd', 'g', 'e', 't', 's', /* repo */
  0x04, 0x00, 0x00, 0x00, 0x12, '{', '"', 't', 'y', 'p', 'e', '"', ':', '"', 'b', 'o', 'o', 'l', 'e', 'a',
  'n', '"', '}',                                                                /* schema */
  0x03, 0x00, 0x00, 0x00, 0x09, 'p', 'r', 'i', 'n', 't', '(', '1', ')', '\n',   /* script */
};
static const uint8_t documented_v2_answer[] = {
  0x53, 0x50, 0x52, 0x42, 0x02, 0x02, 0x00, 0x00, 0x00, 0x05, 0x01, 't', 'r', 'u', 'e',
};
static const uint8_t documented_v2_error[] = {
  0x53, 0x50, 0x52, 0x42, 0x02, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00,
};
/* clang-format on */

/* ---- requests ------------------------------------------------------------ */

START_TEST (v2_frame_decodes_to_its_fields)
{
  struct sp_request req;

  build_v2 (-1, -1, 0, NULL);
  memset (&req, 0xAA, sizeof (req));
  decode_ok (&req);
  ck_assert_uint_eq (req.version, SP_FRAME_VERSION_V2);
  ck_assert (bytes_are (req.repo, "acme/widgets"));
  ck_assert (bytes_are (req.schema, SCHEMA_TEXT));
  ck_assert (bytes_are (req.script, "print(1)\n"));
  for (int i = 0; i < SP_OUTCOME_COUNT; i++)
    ck_assert_uint_eq (req.outcomes[i].len, 0);
}
END_TEST

START_TEST (documented_v2_example_is_what_the_encoder_writes)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_request req;
  uint8_t out[256];
  size_t len = 0;

  build_v2 (-1, -1, 0, NULL);
  ck_assert_uint_eq (f_len, sizeof (documented_v2_request));
  ck_assert_int_eq (memcmp (f, documented_v2_request, f_len), 0);
  decode_ok (&req);
  ck_assert_uint_eq (sp_request_frame_size (&req), sizeof (documented_v2_request));
  ck_assert_int_eq (sp_request_encode (&req, out, sizeof (out), &len, &err), 0);
  ck_assert_uint_eq (len, sizeof (documented_v2_request));
  ck_assert_int_eq (memcmp (out, documented_v2_request, len), 0);
}
END_TEST

/* A v1 frame decodes as v1 and re-encodes byte for byte: v2 moved nothing.  */
START_TEST (v1_frame_still_decodes_as_v1_with_no_schema)
{
  /* clang-format off */
  static const uint8_t v1[] = {
    0x53, 0x50, 0x52, 0x42, 0x01, 0x01, 0x00, 0x00, 0x00, 0x1e,
    0x01, 0x00, 0x00, 0x00, 0x01, 'r', 0x02, 0x00, 0x00, 0x00, 0x01, 'a', 0x02, 0x00, 0x00, 0x00, 0x01, 'b',
    0x02, 0x00, 0x00, 0x00, 0x01, 'c', 0x03, 0x00, 0x00, 0x00, 0x01, 's',
  };
  /* clang-format on */
  cleanup_error sp_error_t err = NULL;
  struct sp_request req;
  uint8_t out[sizeof (v1)];
  size_t len = 0;

  ck_assert_int_eq (sp_request_decode (v1, sizeof (v1), &req, &err), 0);
  ck_assert_uint_eq (req.version, SP_FRAME_VERSION_V1);
  ck_assert_uint_eq (req.schema.len, 0);
  ck_assert (bytes_are (req.outcomes[2], "c"));
  ck_assert_int_eq (sp_request_encode (&req, out, sizeof (out), &len, &err), 0);
  ck_assert_uint_eq (len, sizeof (v1));
  ck_assert_int_eq (memcmp (out, v1, len), 0);
}
END_TEST

static void
round_trip (const struct sp_request *req, size_t want_len)
{
  cleanup_free uint8_t *out = malloc (FRAME_CAP);
  cleanup_error sp_error_t err = NULL;
  struct sp_request back;
  size_t len = 0;

  if (sp_request_encode (req, out, FRAME_CAP, &len, &err) < 0)
    ck_abort_msg ("encode: %s", sp_error_message (err));
  ck_assert_uint_eq (len, want_len);
  ck_assert_uint_eq (sp_request_frame_size (req), want_len);
  if (sp_request_decode (out, len, &back, &err) < 0)
    ck_abort_msg ("decode: %s", sp_error_message (err));
  ck_assert_uint_eq (back.version, SP_FRAME_VERSION_V2);
  ck_assert (sp_bytes_equal (back.repo, req->repo));
  ck_assert (sp_bytes_equal (back.schema, req->schema));
  ck_assert (sp_bytes_equal (back.script, req->script));
}

START_TEST (v2_round_trip_at_every_maximum_and_minimum_length)
{
  static uint8_t big[SP_SCRIPT_MAX_BYTES];
  struct sp_request req = { .version = SP_FRAME_VERSION_V2 };

  for (size_t i = 0; i < sizeof (big); i++)
    big[i] = (uint8_t)(i * 13);
  req.repo = (struct sp_bytes){ big, SP_REPO_MAX_BYTES };
  req.schema = (struct sp_bytes){ big + 1, SP_ANSWER_SCHEMA_MAX_BYTES };
  req.script = (struct sp_bytes){ big, SP_SCRIPT_MAX_BYTES };
  round_trip (&req, SP_REQUEST_V2_FRAME_MAX_BYTES);

  req.repo = (struct sp_bytes){ big, 1 };
  req.schema = (struct sp_bytes){ big + 1, 1 };
  req.script = (struct sp_bytes){ big + 2, 1 };
  round_trip (&req, SP_FRAME_HEADER_BYTES + SP_REQUEST_V2_BODY_MIN_BYTES);
}
END_TEST

static char *
header_fails (uint8_t version, uint8_t kind, uint32_t body_len)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t hdr[SP_FRAME_HEADER_BYTES] = { 'S', 'P', 'R', 'B', version, kind };
  size_t got = 12345;

  hdr[6] = (uint8_t)(body_len >> 24);
  hdr[7] = (uint8_t)(body_len >> 16);
  hdr[8] = (uint8_t)(body_len >> 8);
  hdr[9] = (uint8_t)body_len;
  if (sp_frame_header_decode (hdr, kind, &got, &err) == 0)
    {
      ck_assert_uint_eq (got, body_len);
      return NULL;
    }
  ck_assert_uint_eq (got, 12345); /* untouched */
  return strdup (sp_error_message (err));
}

static bool
header_refused (uint8_t version, uint8_t kind, uint32_t body_len)
{
  cleanup_free char *msg = header_fails (version, kind, body_len);

  return msg != NULL;
}

/* Each version's bounds from the header alone: v2's is larger, and v1's did
   not move with it.  */
START_TEST (header_bounds_are_each_versions_own)
{
  static const uint32_t v2_bad[]
      = { 0, SP_REQUEST_V2_BODY_MIN_BYTES - 1, SP_REQUEST_V2_BODY_MAX_BYTES + 1, 0xFFFFFFFF };
  for (size_t i = 0; i < sizeof (v2_bad) / sizeof (v2_bad[0]); i++)
    {
      cleanup_free char *msg = header_fails (0x02, SP_FRAME_KIND_REQUEST, v2_bad[i]);
      ck_assert_ptr_nonnull (msg);
      ck_assert_msg (strstr (msg, "request of v2"), "%s", msg);
    }
  ck_assert (!header_refused (0x02, SP_FRAME_KIND_REQUEST, SP_REQUEST_V2_BODY_MIN_BYTES));
  ck_assert (!header_refused (0x02, SP_FRAME_KIND_REQUEST, SP_REQUEST_V2_BODY_MAX_BYTES));
  /* A v1 header may not announce v2's larger body, nor less than its own
     five fields.  */
  ck_assert (header_refused (0x01, SP_FRAME_KIND_REQUEST, SP_REQUEST_BODY_MAX_BYTES + 1));
  ck_assert (header_refused (0x01, SP_FRAME_KIND_REQUEST, SP_REQUEST_V2_BODY_MIN_BYTES));
  ck_assert (!header_refused (0x01, SP_FRAME_KIND_REQUEST, SP_REQUEST_BODY_MAX_BYTES));
  /* Responses: v2 from 1 to 1 + 8192, v1 exactly 1.  */
  ck_assert (!header_refused (0x02, SP_FRAME_KIND_RESPONSE, 1));
  ck_assert (!header_refused (0x02, SP_FRAME_KIND_RESPONSE, SP_RESPONSE_V2_BODY_MAX_BYTES));
  ck_assert (header_refused (0x02, SP_FRAME_KIND_RESPONSE, 0));
  ck_assert (header_refused (0x02, SP_FRAME_KIND_RESPONSE, SP_RESPONSE_V2_BODY_MAX_BYTES + 1));
  ck_assert (header_refused (0x01, SP_FRAME_KIND_RESPONSE, 2));
  /* The handshake stays in v1 framing; no version 3 of anything.  */
  ck_assert (header_refused (0x02, SP_FRAME_KIND_HELLO, 0));
  ck_assert (header_refused (0x02, SP_FRAME_KIND_HELLO_REPLY, 1));
  ck_assert (header_refused (0x03, SP_FRAME_KIND_REQUEST, SP_REQUEST_V2_BODY_MIN_BYTES));
}
END_TEST

START_TEST (v2_frame_truncated_anywhere_or_with_trailing_bytes_is_rejected)
{
  size_t whole;

  build_v2 (-1, -1, 0, NULL);
  whole = f_len;
  for (size_t n = 0; n < whole; n++)
    {
      f_len = n;
      free (decode_fails ());
    }
  f_len = whole;
  put ("x", 1);
  rejected_because ("trailing");
}
END_TEST

START_TEST (v2_body_length_disagreeing_with_the_fields_is_rejected)
{
  build_v2 (-1, -1, 0, NULL);
  put ("x", 1);
  sync_length (); /* a stray byte inside the announced body */
  rejected_because ("after the script field");
  build_v2 (-1, -1, 0, NULL);
  put_u32_at (6, (uint32_t)(f_len - 10 - 1));
  f_len--; /* the script's last byte cut by the body length */
  rejected_because ("runs past the body");
}
END_TEST

/* Exactly REPO, SCHEMA and SCRIPT: a fourth field is refused, whatever its
   tag (unknown, a launch control's under any tag, v1's outcome, or one of
   the three again) and wherever it stands.  */
START_TEST (v2_frame_with_a_fourth_field_of_any_tag_anywhere_is_rejected)
{
  for (unsigned tag = 0x00; tag <= 0xFF; tag++)
    for (int at = 0; at <= 3; at++)
      {
        build_v2 (-1, at, (uint8_t)tag, "timeout=86400 " CANARY);
        free (decode_fails ());
      }
  build_v2 (-1, 1, SP_TAG_OUTCOME, "YES");
  rejected_because ("unknown tag 0x02 (outcome is no field of a v2 request)");
}
END_TEST

START_TEST (v2_frame_with_outcomes_instead_of_a_schema_is_rejected)
{
  start (0x02, 0x01);
  field (0x01, "acme/widgets", 12);
  field (0x02, "YES", 3);
  field (0x02, "NO", 2);
  field (0x02, "UNKNOWN", 7);
  field (0x03, "print(1)\n", 9);
  sync_length ();
  rejected_because ("outcome is no field of a v2 request");
}
END_TEST

START_TEST (v1_frame_carrying_a_schema_is_rejected)
{
  static const char *const v1_text[] = { "acme/widgets", "YES", "NO", "UNKNOWN", "print(1)\n" };
  static const uint8_t v1_tag[] = { 0x01, 0x02, 0x02, 0x02, 0x03 };

  /* A schema in place of each v1 field, and one added at each position.  */
  for (int replace = 0; replace < 5; replace++)
    for (int add = 0; add < 2; add++)
      {
        start (0x01, 0x01);
        for (int i = 0; i < 5; i++)
          {
            if (i == replace)
              field (0x04, SCHEMA_TEXT, strlen (SCHEMA_TEXT));
            if (i != replace || add)
              field (v1_tag[i], v1_text[i], strlen (v1_text[i]));
          }
        sync_length ();
        free (decode_fails ());
      }
  start (0x01, 0x01);
  field (0x01, "acme/widgets", 12);
  field (0x04, SCHEMA_TEXT, strlen (SCHEMA_TEXT));
  field (0x03, "print(1)\n", 9);
  sync_length ();
  rejected_because ("unknown tag 0x04 (schema is no field of a v1 request)");
}
END_TEST

START_TEST (v2_missing_duplicate_or_reordered_fields_are_rejected)
{
  /* Each field left out.  */
  for (int skip = 0; skip < 3; skip++)
    {
      build_v2 (skip, -1, 0, NULL);
      free (decode_fails ());
    }
  /* Each field twice, before itself and after the script.  */
  for (int i = 0; i < 3; i++)
    for (int at = 0; at <= 3; at++)
      {
        build_v2 (-1, at, v2_tag[i], v2_text[i]);
        free (decode_fails ());
      }
  /* Every other order of the three.  */
  static const int orders[][3] = { { 0, 2, 1 }, { 1, 0, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
  for (size_t o = 0; o < sizeof (orders) / sizeof (orders[0]); o++)
    {
      start (0x02, 0x01);
      for (int i = 0; i < 3; i++)
        field (v2_tag[orders[o][i]], v2_text[orders[o][i]], strlen (v2_text[orders[o][i]]));
      sync_length ();
      free (decode_fails ());
    }
  build_v2 (-1, 1, 0x01, "acme/widgets");
  rejected_because ("tag repo where schema is required");
}
END_TEST

START_TEST (v2_empty_or_oversized_fields_are_rejected)
{
  static char big[SP_SCRIPT_MAX_BYTES + 2];
  static const size_t over[]
      = { SP_REPO_MAX_BYTES + 1, SP_ANSWER_SCHEMA_MAX_BYTES + 1, SP_SCRIPT_MAX_BYTES + 1 };

  memset (big, 'x', sizeof (big));
  for (int at = 0; at < 3; at++)
    {
      start (0x02, 0x01);
      for (int i = 0; i < 3; i++)
        field (v2_tag[i], v2_text[i], i == at ? 0 : strlen (v2_text[i]));
      sync_length ();
      rejected_because ("empty");

      start (0x02, 0x01);
      for (int i = 0; i < 3; i++)
        {
          if (i == at)
            field (v2_tag[i], big, over[i]);
          else
            field (v2_tag[i], v2_text[i], strlen (v2_text[i]));
        }
      sync_length ();
      if (f_len - 10 > SP_REQUEST_V2_BODY_MAX_BYTES)
        rejected_because ("above the largest request of v2");
      else
        rejected_because ("above its bound");
    }
}
END_TEST

START_TEST (v2_encoder_refuses_what_the_decoder_would)
{
  static const uint8_t x[SP_ANSWER_SCHEMA_MAX_BYTES + 1];
  const struct sp_bytes one = { x, 1 };
  struct sp_request base = { .version = SP_FRAME_VERSION_V2, .repo = one, .schema = one, .script = one };
  struct sp_request bad[8];
  uint8_t out[SP_FRAME_HEADER_BYTES + SP_REQUEST_V2_BODY_MIN_BYTES];
  size_t n = 0;

  for (size_t i = 0; i < 8; i++)
    bad[i] = base;
  bad[n++].version = 0;
  bad[n++].version = 3;
  bad[n++].outcomes[0] = one;                           /* an outcome in v2 */
  bad[n++].schema = (struct sp_bytes){ x, 0 };          /* no schema */
  bad[n++].schema = (struct sp_bytes){ x, sizeof (x) }; /* schema above its bound */
  bad[n++].schema = (struct sp_bytes){ NULL, 1 };       /* no bytes */
  bad[n].version = SP_FRAME_VERSION_V1;                 /* a schema in v1 */
  for (int i = 0; i < SP_OUTCOME_COUNT; i++)
    bad[n].outcomes[i] = one;
  n++;
  for (size_t i = 0; i < n; i++)
    {
      cleanup_error sp_error_t err = NULL;
      size_t len = 0;

      ck_assert_msg (sp_request_frame_size (&bad[i]) == 0, "case %zu", i);
      ck_assert_int_eq (sp_request_encode (&bad[i], out, sizeof (out), &len, &err), -1);
      ck_assert_uint_eq (len, 0);
    }
  {
    cleanup_error sp_error_t err = NULL;
    size_t len = 0;

    ck_assert_int_eq (sp_request_encode (&base, out, sizeof (out) - 1, &len, &err), -1);
    ck_assert_int_eq (sp_request_encode (&base, out, sizeof (out), &len, &err), 0);
    ck_assert_uint_eq (len, sizeof (out));
  }
}
END_TEST

/* ---- validation ---------------------------------------------------------- */

static char *const allowlist[] = { "acme/widgets" };

static int
validate (const struct sp_request *req, char **msg)
{
  cleanup_error sp_error_t err = NULL;
  int ret = sp_request_validate (req, allowlist, 1, &err);

  *msg = ret < 0 ? strdup (sp_error_message (err)) : NULL;
  return ret;
}

START_TEST (v2_validation_checks_repo_schema_bound_and_script)
{
  static const char schema[SP_ANSWER_SCHEMA_MAX_BYTES + 1] = CANARY;
  struct sp_request req = { .version = SP_FRAME_VERSION_V2 };
  char *msg = NULL;

  req.repo = (struct sp_bytes){ (const uint8_t *)"acme/widgets", 12 };
  req.schema = (struct sp_bytes){ (const uint8_t *)schema, SP_ANSWER_SCHEMA_MAX_BYTES };
  req.script = (struct sp_bytes){ (const uint8_t *)"print(1)\n", 9 };
  /* Structural only: a schema that is no JSON passes here; serve parses it.  */
  ck_assert_int_eq (validate (&req, &msg), 0);

  req.schema.len = SP_ANSWER_SCHEMA_MAX_BYTES + 1;
  ck_assert_int_eq (validate (&req, &msg), -1);
  ck_assert_ptr_nonnull (strstr (msg, "schema: 4097 bytes, not 1..4096"));
  ck_assert_ptr_null (strstr (msg, CANARY));
  free (msg);
  req.schema.len = 0;
  ck_assert_int_eq (validate (&req, &msg), -1);
  free (msg);
  req.schema.len = 18;

  req.outcomes[1] = (struct sp_bytes){ (const uint8_t *)CANARY, strlen (CANARY) };
  ck_assert_int_eq (validate (&req, &msg), -1);
  ck_assert_ptr_nonnull (strstr (msg, "outcome 2: present in a v2 request"));
  ck_assert_ptr_null (strstr (msg, CANARY));
  free (msg);
  req.outcomes[1].len = 0;

  req.repo = (struct sp_bytes){ (const uint8_t *)"acme/" CANARY, 5 + strlen (CANARY) };
  ck_assert_int_eq (validate (&req, &msg), SP_REQUEST_REPO_UNKNOWN);
  ck_assert_ptr_null (strstr (msg, CANARY));
  free (msg);
  req.repo = (struct sp_bytes){ (const uint8_t *)"acme/widgets", 12 };

  req.script.len = 0;
  ck_assert_int_eq (validate (&req, &msg), -1);
  free (msg);
  req.script.len = 9;

  req.version = SP_FRAME_VERSION_V1; /* a schema, and no outcomes */
  ck_assert_int_eq (validate (&req, &msg), -1);
  ck_assert_ptr_nonnull (strstr (msg, "schema: present in a v1 request"));
  free (msg);
  req.version = 3;
  ck_assert_int_eq (validate (&req, &msg), -1);
  free (msg);
}
END_TEST

/* ---- responses ----------------------------------------------------------- */

static char *
response_fails (const uint8_t *buf, size_t len)
{
  cleanup_free uint8_t *copy = malloc (len ? len : 1);
  cleanup_error sp_error_t err = NULL;
  struct sp_bytes answer = { (const uint8_t *)"untouched", 9 };

  memcpy (copy, buf, len);
  ck_assert_int_eq (sp_response_v2_decode (copy, len, &answer, &err), -1);
  ck_assert_uint_eq (answer.len, 9);
  return strdup (sp_error_message (err));
}

START_TEST (documented_v2_responses_are_what_the_encoder_writes)
{
  cleanup_error sp_error_t err = NULL;
  const struct sp_bytes value = { (const uint8_t *)"true", 4 };
  uint8_t buf[SP_RESPONSE_V2_FRAME_MAX_BYTES];
  struct sp_bytes back;
  size_t len = 0;

  ck_assert_int_eq (sp_response_v2_encode (&value, buf, sizeof (buf), &len, &err), 0);
  ck_assert_uint_eq (len, sizeof (documented_v2_answer));
  ck_assert_int_eq (memcmp (buf, documented_v2_answer, len), 0);
  ck_assert_int_eq (sp_response_v2_decode (buf, len, &back, &err), 0);
  ck_assert (bytes_are (back, "true"));

  ck_assert_int_eq (sp_response_v2_encode (NULL, buf, sizeof (buf), &len, &err), 0);
  ck_assert_uint_eq (len, sizeof (documented_v2_error));
  ck_assert_int_eq (memcmp (buf, documented_v2_error, len), 0);
  back.len = 99;
  ck_assert_int_eq (sp_response_v2_decode (buf, len, &back, &err), 0);
  ck_assert_uint_eq (back.len, 0);
}
END_TEST

START_TEST (v2_response_round_trips_at_either_bound)
{
  static uint8_t value[SP_ANSWER_OUTPUT_MAX_BYTES + 1];
  static uint8_t buf[SP_RESPONSE_V2_FRAME_MAX_BYTES + 1];
  static const size_t ok[] = { 1, SP_ANSWER_OUTPUT_MAX_BYTES };

  for (size_t i = 0; i < sizeof (value); i++)
    value[i] = (uint8_t)i; /* any byte: the decoder does not judge them */
  for (size_t i = 0; i < 2; i++)
    {
      cleanup_error sp_error_t err = NULL;
      const struct sp_bytes v = { value, ok[i] };
      struct sp_bytes back;
      size_t len = 0;

      ck_assert_int_eq (sp_response_v2_encode (&v, buf, sizeof (buf), &len, &err), 0);
      ck_assert_uint_eq (len, SP_FRAME_HEADER_BYTES + 1 + ok[i]);
      ck_assert_int_eq (sp_response_v2_decode (buf, len, &back, &err), 0);
      ck_assert (sp_bytes_equal (back, v));
      ck_assert (back.data == buf + SP_FRAME_HEADER_BYTES + 1); /* a view, no copy */
    }
}
END_TEST

START_TEST (v2_response_encoder_refuses_empty_or_long_answers_and_small_buffers)
{
  static uint8_t value[SP_ANSWER_OUTPUT_MAX_BYTES + 1];
  static uint8_t buf[SP_RESPONSE_V2_FRAME_MAX_BYTES + 16];
  const struct sp_bytes empty = { value, 0 }, over = { value, sizeof (value) }, four = { value, 4 };
  cleanup_error sp_error_t err = NULL;
  size_t len = 0;

  ck_assert_int_eq (sp_response_v2_encode (&empty, buf, sizeof (buf), &len, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_response_v2_encode (&over, buf, sizeof (buf), &len, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_response_v2_encode (&four, buf, SP_FRAME_HEADER_BYTES + 4, &len, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_response_v2_encode (NULL, buf, SP_FRAME_HEADER_BYTES, &len, &err), -1);
  ck_assert_uint_eq (len, 0);
}
END_TEST

START_TEST (malformed_v2_responses_are_rejected)
{
  uint8_t b[sizeof (documented_v2_answer) + 1];
  char *msg;

  /* Truncated anywhere, or a byte more.  */
  for (size_t n = 0; n < sizeof (documented_v2_answer); n++)
    free (response_fails (documented_v2_answer, n));
  memcpy (b, documented_v2_answer, sizeof (documented_v2_answer));
  b[sizeof (documented_v2_answer)] = 'x';
  free (response_fails (b, sizeof (b)));
  /* Every status but 0 and 1.  */
  for (unsigned s = 2; s <= 0xFF; s++)
    {
      memcpy (b, documented_v2_answer, sizeof (documented_v2_answer));
      b[10] = (uint8_t)s;
      free (response_fails (b, sizeof (documented_v2_answer)));
    }
  /* ERROR with bytes after it; an answer status with none.  */
  memcpy (b, documented_v2_answer, sizeof (documented_v2_answer));
  b[10] = 0x00;
  msg = response_fails (b, sizeof (documented_v2_answer));
  ck_assert_ptr_nonnull (strstr (msg, "after an ERROR status"));
  ck_assert_ptr_null (strstr (msg, "true"));
  free (msg);
  memcpy (b, documented_v2_error, sizeof (documented_v2_error));
  b[10] = 0x01;
  free (response_fails (b, sizeof (documented_v2_error)));
  /* Bad magic, a version other than 2, a kind other than response.  */
  for (size_t at = 0; at < 6; at++)
    {
      memcpy (b, documented_v2_answer, sizeof (documented_v2_answer));
      b[at] ^= at == 4 ? 0x03 : 0x01; /* version 2 becomes 1 */
      free (response_fails (b, sizeof (documented_v2_answer)));
    }
  /* A body length above the bound, from the header.  */
  memcpy (b, documented_v2_error, sizeof (documented_v2_error));
  b[6] = 0x01;
  free (response_fails (b, sizeof (documented_v2_error)));
}
END_TEST

/* Neither version's response decodes as the other's: a v1 answer index is
   no v2 value, and a v2 ERROR (also 11 bytes) is no v1 index.  */
START_TEST (responses_of_one_version_never_decode_as_the_other)
{
  cleanup_error sp_error_t err = NULL;
  uint8_t v1[SP_RESPONSE_FRAME_BYTES];
  uint8_t index = 0xAA;

  ck_assert_int_eq (sp_response_encode (2, v1, &err), 0);
  free (response_fails (v1, sizeof (v1)));
  ck_assert_int_eq (sp_response_encode (SP_RESPONSE_ERROR, v1, &err), 0);
  free (response_fails (v1, sizeof (v1)));
  ck_assert_int_eq (sp_response_decode (documented_v2_error, sizeof (documented_v2_error), &index, &err), -1);
  sp_error_release (&err);
  ck_assert_int_eq (sp_response_decode (documented_v2_answer, SP_RESPONSE_FRAME_BYTES, &index, &err), -1);
  ck_assert_uint_eq (index, 0xAA);
  /* Nor is a v2 request a v2 response.  */
  free (response_fails (documented_v2_request, sizeof (documented_v2_request)));
}
END_TEST

static Suite *
make_suite (void)
{
  Suite *s = suite_create ("check_protocol_v2");
  TCase *tc = tcase_create ("request");

  tcase_add_test (tc, v2_frame_decodes_to_its_fields);
  tcase_add_test (tc, documented_v2_example_is_what_the_encoder_writes);
  tcase_add_test (tc, v1_frame_still_decodes_as_v1_with_no_schema);
  tcase_add_test (tc, v2_round_trip_at_every_maximum_and_minimum_length);
  tcase_add_test (tc, header_bounds_are_each_versions_own);
  tcase_add_test (tc, v2_frame_truncated_anywhere_or_with_trailing_bytes_is_rejected);
  tcase_add_test (tc, v2_body_length_disagreeing_with_the_fields_is_rejected);
  tcase_add_test (tc, v2_frame_with_a_fourth_field_of_any_tag_anywhere_is_rejected);
  tcase_add_test (tc, v2_frame_with_outcomes_instead_of_a_schema_is_rejected);
  tcase_add_test (tc, v1_frame_carrying_a_schema_is_rejected);
  tcase_add_test (tc, v2_missing_duplicate_or_reordered_fields_are_rejected);
  tcase_add_test (tc, v2_empty_or_oversized_fields_are_rejected);
  tcase_add_test (tc, v2_encoder_refuses_what_the_decoder_would);
  tcase_add_test (tc, v2_validation_checks_repo_schema_bound_and_script);
  suite_add_tcase (s, tc);

  tc = tcase_create ("response");
  tcase_add_test (tc, documented_v2_responses_are_what_the_encoder_writes);
  tcase_add_test (tc, v2_response_round_trips_at_either_bound);
  tcase_add_test (tc, v2_response_encoder_refuses_empty_or_long_answers_and_small_buffers);
  tcase_add_test (tc, malformed_v2_responses_are_rejected);
  tcase_add_test (tc, responses_of_one_version_never_decode_as_the_other);
  suite_add_tcase (s, tc);
  return s;
}

SP_CHECK_MAIN (make_suite)
