/* Wire protocol framing, v1 and v2: see src/base/protocol.h and
   docs/protocol.md.  Every length is checked against what is left before it
   is used, so no read goes past len.  */
#include "base/protocol.h"

#include <string.h>

_Static_assert(SP_REQUEST_V2_BODY_MAX_BYTES >= SP_REQUEST_BODY_MAX_BYTES,
               "SP_REQUEST_ANY_BODY_MAX_BYTES must bound both versions");

/* The tag of each request field, in the only order each version allows.  */
static const uint8_t field_tags_v1[SP_REQUEST_FIELD_COUNT] = {
  SP_TAG_REPO, SP_TAG_OUTCOME, SP_TAG_OUTCOME, SP_TAG_OUTCOME, SP_TAG_SCRIPT,
};
static const uint8_t field_tags_v2[SP_REQUEST_V2_FIELD_COUNT] = {
  SP_TAG_REPO,
  SP_TAG_SCHEMA,
  SP_TAG_SCRIPT,
};

/* One version's request layout: its tags in order, and how many.  */
struct layout
{
  const uint8_t *tags;
  size_t count;
};

static const struct layout layout_v1 = { field_tags_v1, SP_REQUEST_FIELD_COUNT };
static const struct layout layout_v2 = { field_tags_v2, SP_REQUEST_V2_FIELD_COUNT };

/* The layout of version, or NULL for a version that has no requests.  */
static const struct layout *
request_layout (uint8_t version)
{
  switch (version)
    {
    case SP_FRAME_VERSION_V1:
      return &layout_v1;
    case SP_FRAME_VERSION_V2:
      return &layout_v2;
    default:
      return NULL;
    }
}

static uint32_t
get_u32_be (const uint8_t *p)
{
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void
put_u32_be (uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static const char *
tag_name (uint8_t tag)
{
  switch (tag)
    {
    case SP_TAG_REPO:
      return "repo";
    case SP_TAG_OUTCOME:
      return "outcome";
    case SP_TAG_SCRIPT:
      return "script";
    case SP_TAG_SCHEMA:
      return "schema";
    default:
      return "unknown";
    }
}

static size_t
tag_max_bytes (uint8_t tag)
{
  switch (tag)
    {
    case SP_TAG_REPO:
      return SP_REPO_MAX_BYTES;
    case SP_TAG_OUTCOME:
      return SP_OUTCOME_MAX_BYTES;
    case SP_TAG_SCRIPT:
      return SP_SCRIPT_MAX_BYTES;
    case SP_TAG_SCHEMA:
      return SP_ANSWER_SCHEMA_MAX_BYTES;
    default:
      return 0;
    }
}

/* The bound of tag's value in version: a schema exists in v2 only, an
   outcome in v1 only, so that neither version can carry the other's.  */
static size_t
tag_max_bytes_in (uint8_t version, uint8_t tag)
{
  if ((tag == SP_TAG_SCHEMA && version != SP_FRAME_VERSION_V2)
      || (tag == SP_TAG_OUTCOME && version != SP_FRAME_VERSION_V1))
    return 0;
  return tag_max_bytes (tag);
}

/* The request's fields in wire order, for req->version's layout, so that
   encoder and decoder walk the same table; the other version's fields go to
   absent[0..*n_absent), which must be empty.  */
static void
request_fields (struct sp_request *req, struct sp_bytes *fields[SP_REQUEST_FIELD_COUNT],
                struct sp_bytes *absent[SP_REQUEST_FIELD_COUNT], size_t *n_absent)
{
  size_t a = 0;

  fields[0] = &req->repo;
  if (req->version == SP_FRAME_VERSION_V2)
    {
      fields[1] = &req->schema;
      fields[2] = &req->script;
      for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
        absent[a++] = &req->outcomes[i];
    }
  else
    {
      for (size_t i = 0; i < SP_OUTCOME_COUNT; i++)
        fields[1 + i] = &req->outcomes[i];
      fields[SP_REQUEST_FIELD_COUNT - 1] = &req->script;
      absent[a++] = &req->schema;
    }
  *n_absent = a;
}

/* Checks body_len against the bounds of a body of kind in version.  */
static int
check_body_length (uint8_t version, uint8_t kind, uint32_t announced, sp_error_t *err)
{
  size_t min = 0, max = 0;
  const char *what = NULL;

  if (kind == SP_FRAME_KIND_REQUEST)
    {
      what = "request";
      min = version == SP_FRAME_VERSION_V2 ? SP_REQUEST_V2_BODY_MIN_BYTES : SP_REQUEST_BODY_MIN_BYTES;
      max = version == SP_FRAME_VERSION_V2 ? SP_REQUEST_V2_BODY_MAX_BYTES : SP_REQUEST_BODY_MAX_BYTES;
    }
  else
    {
      what = "response";
      min = version == SP_FRAME_VERSION_V2 ? SP_RESPONSE_V2_BODY_MIN_BYTES : SP_RESPONSE_BODY_BYTES;
      max = version == SP_FRAME_VERSION_V2 ? SP_RESPONSE_V2_BODY_MAX_BYTES : SP_RESPONSE_BODY_BYTES;
    }
  if (announced > max)
    return sp_make_error (err, 0, "frame: body length %u above the largest %s of v%u (%zu)", announced, what,
                          version, max);
  if (announced < min)
    return sp_make_error (err, 0, "frame: body length %u below the smallest %s of v%u (%zu)", announced, what,
                          version, min);
  return 0;
}

int
sp_frame_header_decode (const uint8_t hdr[SP_FRAME_HEADER_BYTES], uint8_t expected_kind, size_t *body_len,
                        sp_error_t *err)
{
  uint8_t version = hdr[4];
  uint32_t announced;

  if (memcmp (hdr, SP_FRAME_MAGIC, SP_FRAME_MAGIC_BYTES) != 0)
    return sp_make_error (err, 0, "frame: bad magic");
  if (version != SP_FRAME_VERSION_V1 && version != SP_FRAME_VERSION_V2)
    return sp_make_error (err, 0, "frame: unsupported version %u", version);
  if (hdr[5] != expected_kind)
    return sp_make_error (err, 0, "frame: kind %u where %u was expected", hdr[5], expected_kind);

  announced = get_u32_be (hdr + 6);
  switch (expected_kind)
    {
    case SP_FRAME_KIND_REQUEST:
    case SP_FRAME_KIND_RESPONSE:
      if (check_body_length (version, expected_kind, announced, err) < 0)
        return -1;
      break;
    case SP_FRAME_KIND_HELLO:
      /* The handshake exists in v1 framing only, whatever the reply names.  */
      if (version != SP_FRAME_VERSION_V1)
        return sp_make_error (err, 0, "frame: a hello in version %u, not %u", version, SP_FRAME_VERSION_V1);
      if (announced != 0)
        return sp_make_error (err, 0, "frame: hello body length %u, not 0", announced);
      break;
    case SP_FRAME_KIND_HELLO_REPLY:
      if (version != SP_FRAME_VERSION_V1)
        return sp_make_error (err, 0, "frame: a hello reply in version %u, not %u", version,
                              SP_FRAME_VERSION_V1);
      if (announced != SP_HELLO_REPLY_BODY_BYTES)
        return sp_make_error (err, 0, "frame: hello reply body length %u, not %u", announced,
                              (unsigned)SP_HELLO_REPLY_BODY_BYTES);
      break;
    default:
      return sp_make_error (err, 0, "frame: no such kind %u", expected_kind);
    }
  *body_len = announced;
  return 0;
}

uint8_t
sp_frame_version (const uint8_t hdr[SP_FRAME_HEADER_BYTES])
{
  return hdr[4];
}

/* Reads the field at body[*off..body_len) that must carry the i-th tag of
   version's layout l.  */
static int
decode_field (uint8_t version, const struct layout *l, const uint8_t *body, size_t body_len, size_t *off,
              size_t i, struct sp_bytes *out, sp_error_t *err)
{
  uint8_t want = l->tags[i];
  uint8_t tag;
  uint32_t len;

  if (body_len - *off < SP_FIELD_HEADER_BYTES)
    return sp_make_error (err, 0, "field %zu (%s): truncated field header", i + 1, tag_name (want));
  tag = body[*off];
  len = get_u32_be (body + *off + 1);

  if (tag != want)
    {
      /* Name the common mistakes; the verdict is the same for all.  */
      if (tag_max_bytes (tag) == 0)
        return sp_make_error (err, 0, "field %zu: unknown tag 0x%02x", i + 1, tag);
      if (tag_max_bytes_in (version, tag) == 0)
        return sp_make_error (err, 0, "field %zu: unknown tag 0x%02x (%s is no field of a v%u request)",
                              i + 1, tag, tag_name (tag), version);
      if (want == SP_TAG_OUTCOME && tag == SP_TAG_SCRIPT)
        return sp_make_error (err, 0, "field %zu: only %zu outcomes, %d required", i + 1, i - 1,
                              SP_OUTCOME_COUNT);
      if (want == SP_TAG_SCRIPT && tag == SP_TAG_OUTCOME)
        return sp_make_error (err, 0, "field %zu: more than %d outcomes", i + 1, SP_OUTCOME_COUNT);
      return sp_make_error (err, 0, "field %zu: tag %s where %s is required (duplicate or out of order)",
                            i + 1, tag_name (tag), tag_name (want));
    }
  if (len == 0)
    return sp_make_error (err, 0, "field %zu (%s): empty", i + 1, tag_name (want));
  if (len > tag_max_bytes (want))
    return sp_make_error (err, 0, "field %zu (%s): length %u above its bound %zu", i + 1, tag_name (want),
                          len, tag_max_bytes (want));
  *off += SP_FIELD_HEADER_BYTES;
  if (body_len - *off < len)
    return sp_make_error (err, 0, "field %zu (%s): length %u runs past the body", i + 1, tag_name (want),
                          len);
  out->data = body + *off;
  out->len = len;
  *off += len;
  return 0;
}

int
sp_request_decode (const uint8_t *buf, size_t len, struct sp_request *out, sp_error_t *err)
{
  struct sp_request got = { 0 };
  struct sp_bytes *fields[SP_REQUEST_FIELD_COUNT];
  struct sp_bytes *absent[SP_REQUEST_FIELD_COUNT];
  size_t n_absent;
  const struct layout *l;
  const uint8_t *body;
  size_t body_len;
  size_t off = 0;
  int ret;

  if (len < SP_FRAME_HEADER_BYTES)
    return sp_make_error (err, 0, "frame: truncated header (%zu bytes)", len);
  ret = sp_frame_header_decode (buf, SP_FRAME_KIND_REQUEST, &body_len, err);
  if (ret < 0)
    return ret;
  if (len - SP_FRAME_HEADER_BYTES < body_len)
    return sp_make_error (err, 0, "frame: truncated body (%zu of %zu bytes)", len - SP_FRAME_HEADER_BYTES,
                          body_len);
  if (len - SP_FRAME_HEADER_BYTES > body_len)
    return sp_make_error (err, 0, "frame: %zu trailing bytes after the body",
                          len - SP_FRAME_HEADER_BYTES - body_len);

  got.version = sp_frame_version (buf);
  l = request_layout (got.version);
  request_fields (&got, fields, absent, &n_absent);
  body = buf + SP_FRAME_HEADER_BYTES;
  for (size_t i = 0; i < l->count; i++)
    {
      ret = decode_field (got.version, l, body, body_len, &off, i, fields[i], err);
      if (ret < 0)
        return ret;
    }
  /* One more field or stray bytes: either way the announced length lies.  */
  if (off != body_len)
    return sp_make_error (err, 0, "frame: %zu bytes after the script field, body length %zu disagrees",
                          body_len - off, body_len);
  *out = got;
  return 0;
}

size_t
sp_request_frame_size (const struct sp_request *req)
{
  struct sp_request copy = *req;
  struct sp_bytes *fields[SP_REQUEST_FIELD_COUNT];
  struct sp_bytes *absent[SP_REQUEST_FIELD_COUNT];
  size_t n_absent;
  const struct layout *l = request_layout (req->version);
  size_t total = SP_FRAME_HEADER_BYTES;

  if (l == NULL)
    return 0;
  request_fields (&copy, fields, absent, &n_absent);
  for (size_t i = 0; i < n_absent; i++)
    if (absent[i]->len != 0)
      return 0;
  for (size_t i = 0; i < l->count; i++)
    {
      if (fields[i]->len == 0 || fields[i]->len > tag_max_bytes (l->tags[i]) || fields[i]->data == NULL)
        return 0;
      total += SP_FIELD_HEADER_BYTES + fields[i]->len;
    }
  return total;
}

/* Writes a header of version, kind and body_length body_len at buf.  */
static void
put_header (uint8_t *buf, uint8_t version, uint8_t kind, uint32_t body_len)
{
  memcpy (buf, SP_FRAME_MAGIC, SP_FRAME_MAGIC_BYTES);
  buf[4] = version;
  buf[5] = kind;
  put_u32_be (buf + 6, body_len);
}

int
sp_request_encode (const struct sp_request *req, uint8_t *buf, size_t cap, size_t *len, sp_error_t *err)
{
  struct sp_request copy = *req;
  struct sp_bytes *fields[SP_REQUEST_FIELD_COUNT];
  struct sp_bytes *absent[SP_REQUEST_FIELD_COUNT];
  size_t n_absent;
  size_t total = sp_request_frame_size (req);
  const struct layout *l;
  size_t off;

  if (total == 0)
    return sp_make_error (err, 0,
                          "request: the version is not 1 or 2, or a field is empty, above its bound "
                          "or of the other version");
  if (cap < total)
    return sp_make_error (err, 0, "request: needs %zu bytes, buffer holds %zu", total, cap);

  l = request_layout (req->version);
  put_header (buf, req->version, SP_FRAME_KIND_REQUEST, (uint32_t)(total - SP_FRAME_HEADER_BYTES));
  off = SP_FRAME_HEADER_BYTES;

  request_fields (&copy, fields, absent, &n_absent);
  for (size_t i = 0; i < l->count; i++)
    {
      buf[off] = l->tags[i];
      put_u32_be (buf + off + 1, (uint32_t)fields[i]->len);
      off += SP_FIELD_HEADER_BYTES;
      memcpy (buf + off, fields[i]->data, fields[i]->len);
      off += fields[i]->len;
    }
  *len = off;
  return 0;
}

int
sp_response_encode (uint8_t index, uint8_t buf[SP_RESPONSE_FRAME_BYTES], sp_error_t *err)
{
  if (index > SP_OUTCOME_COUNT)
    return sp_make_error (err, 0, "response: index %u above %d", index, SP_OUTCOME_COUNT);
  put_header (buf, SP_FRAME_VERSION_V1, SP_FRAME_KIND_RESPONSE, SP_RESPONSE_BODY_BYTES);
  buf[SP_FRAME_HEADER_BYTES] = index;
  return 0;
}

int
sp_response_decode (const uint8_t *buf, size_t len, uint8_t *index, sp_error_t *err)
{
  size_t body_len;
  int ret;

  if (len != SP_RESPONSE_FRAME_BYTES)
    return sp_make_error (err, 0, "response: %zu bytes, not %d", len, SP_RESPONSE_FRAME_BYTES);
  ret = sp_frame_header_decode (buf, SP_FRAME_KIND_RESPONSE, &body_len, err);
  if (ret < 0)
    return ret;
  /* A v2 ERROR is 11 bytes too: the version tells them apart.  */
  if (sp_frame_version (buf) != SP_FRAME_VERSION_V1)
    return sp_make_error (err, 0, "response: version %u where 1 was expected", sp_frame_version (buf));
  if (buf[SP_FRAME_HEADER_BYTES] > SP_OUTCOME_COUNT)
    return sp_make_error (err, 0, "response: index %u above %d", buf[SP_FRAME_HEADER_BYTES],
                          SP_OUTCOME_COUNT);
  *index = buf[SP_FRAME_HEADER_BYTES];
  return 0;
}

int
sp_response_v2_encode (const struct sp_bytes *answer, uint8_t *buf, size_t cap, size_t *len, sp_error_t *err)
{
  size_t n = answer == NULL ? 0 : answer->len;
  size_t total = SP_FRAME_HEADER_BYTES + 1 + n;

  if (answer != NULL && (n == 0 || n > SP_ANSWER_OUTPUT_MAX_BYTES || answer->data == NULL))
    return sp_make_error (err, 0, "response: an answer of %zu bytes, not 1..%d", n,
                          SP_ANSWER_OUTPUT_MAX_BYTES);
  if (cap < total)
    return sp_make_error (err, 0, "response: needs %zu bytes, buffer holds %zu", total, cap);
  put_header (buf, SP_FRAME_VERSION_V2, SP_FRAME_KIND_RESPONSE, (uint32_t)(1 + n));
  buf[SP_FRAME_HEADER_BYTES] = answer == NULL ? SP_RESPONSE_V2_STATUS_ERROR : SP_RESPONSE_V2_STATUS_ANSWER;
  if (n > 0)
    memcpy (buf + SP_FRAME_HEADER_BYTES + 1, answer->data, n);
  *len = total;
  return 0;
}

int
sp_response_v2_decode (const uint8_t *buf, size_t len, struct sp_bytes *answer, sp_error_t *err)
{
  size_t body_len;
  uint8_t status;

  if (len < SP_FRAME_HEADER_BYTES)
    return sp_make_error (err, 0, "response: truncated header (%zu bytes)", len);
  if (sp_frame_header_decode (buf, SP_FRAME_KIND_RESPONSE, &body_len, err) < 0)
    return -1;
  if (sp_frame_version (buf) != SP_FRAME_VERSION_V2)
    return sp_make_error (err, 0, "response: version %u where 2 was expected", sp_frame_version (buf));
  if (len - SP_FRAME_HEADER_BYTES != body_len)
    return sp_make_error (err, 0, "response: %zu body bytes where the header announces %zu",
                          len - SP_FRAME_HEADER_BYTES, body_len);
  status = buf[SP_FRAME_HEADER_BYTES];
  if (status == SP_RESPONSE_V2_STATUS_ERROR)
    {
      if (body_len != 1)
        return sp_make_error (err, 0, "response: %zu bytes after an ERROR status", body_len - 1);
      answer->data = NULL;
      answer->len = 0;
      return 0;
    }
  if (status != SP_RESPONSE_V2_STATUS_ANSWER)
    return sp_make_error (err, 0, "response: status %u, not 0 or 1", status);
  if (body_len < 2)
    return sp_make_error (err, 0, "response: an answer status with no answer");
  answer->data = buf + SP_FRAME_HEADER_BYTES + 1;
  answer->len = body_len - 1;
  return 0;
}

uint8_t
sp_frame_client_kind (const uint8_t hdr[SP_FRAME_HEADER_BYTES])
{
  return hdr[5] == SP_FRAME_KIND_HELLO ? SP_FRAME_KIND_HELLO : SP_FRAME_KIND_REQUEST;
}

void
sp_hello_encode (uint8_t buf[SP_HELLO_FRAME_BYTES])
{
  put_header (buf, SP_FRAME_VERSION_V1, SP_FRAME_KIND_HELLO, 0);
}

int
sp_hello_decode (const uint8_t *buf, size_t len, sp_error_t *err)
{
  size_t body_len;

  if (len < SP_FRAME_HEADER_BYTES)
    return sp_make_error (err, 0, "hello: truncated header (%zu bytes)", len);
  if (sp_frame_header_decode (buf, SP_FRAME_KIND_HELLO, &body_len, err) < 0)
    return -1;
  if (len != SP_HELLO_FRAME_BYTES)
    return sp_make_error (err, 0, "hello: %zu trailing bytes after the header", len - SP_HELLO_FRAME_BYTES);
  return 0;
}

void
sp_hello_reply_encode (uint8_t buf[SP_HELLO_REPLY_FRAME_BYTES])
{
  put_header (buf, SP_FRAME_VERSION_V1, SP_FRAME_KIND_HELLO_REPLY, SP_HELLO_REPLY_BODY_BYTES);
  buf[SP_FRAME_HEADER_BYTES] = SP_FRAME_VERSION_MAX;
}

int
sp_hello_reply_decode (const uint8_t *buf, size_t len, uint8_t *version, sp_error_t *err)
{
  size_t body_len;

  if (len != SP_HELLO_REPLY_FRAME_BYTES)
    return sp_make_error (err, 0, "hello reply: %zu bytes, not %d", len, SP_HELLO_REPLY_FRAME_BYTES);
  if (sp_frame_header_decode (buf, SP_FRAME_KIND_HELLO_REPLY, &body_len, err) < 0)
    return -1;
  *version = buf[SP_FRAME_HEADER_BYTES];
  return 0;
}
