/* Wire protocols v1 and v2 between the client and the proxy: framing only.
   Pure; libc only, so that the client links it.  The exact bytes are in
   docs/protocol.md.

   Every frame starts with a 10-byte header:
     "SPRB" | version u8 (0x01 or 0x02) | kind u8 | body_length u32 big-endian
   A v1 request body is exactly five fields, each tag u8 | length u32 BE |
   value: REPO, OUTCOME, OUTCOME, OUTCOME, SCRIPT.  A v1 response body is one
   byte: 0 for ERROR, or the 1-based outcome index.
   A v2 request body is exactly three fields: REPO, SCHEMA (a finite answer
   schema, docs/answer-schemas.md), SCRIPT.  A v2 response body is a status
   byte, 0 for ERROR alone, or 1 followed by the answer's canonical text.
   A request is always answered in its own version.
   A hello (a handshake, for `doctor`) has an empty body; its reply's body is
   one byte, the protocol version the proxy speaks.  A hello carries nothing
   of the agent's and its reply is a constant: nothing is debited, queued or
   launched for it.

   Decoding is structural: it bounds every length and checks the field order,
   but it does not judge the values; sp_request_validate (request.h) does.  */
#ifndef SP_BASE_PROTOCOL_H
#define SP_BASE_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/bounds.h"
#include "base/bytes.h"
#include "base/error.h"

#define SP_FRAME_MAGIC            "SPRB"
#define SP_FRAME_MAGIC_BYTES      4
#define SP_FRAME_VERSION          0x01 /* v1 frames, and the handshake's */
#define SP_FRAME_VERSION_V1       0x01
#define SP_FRAME_VERSION_V2       0x02
#define SP_FRAME_VERSION_MAX      SP_FRAME_VERSION_V2 /* the highest spoken; a hello reply names it */
#define SP_FRAME_KIND_REQUEST     0x01
#define SP_FRAME_KIND_RESPONSE    0x02
#define SP_FRAME_KIND_HELLO       0x03 /* client to proxy: empty body */
#define SP_FRAME_KIND_HELLO_REPLY 0x04 /* proxy to client: the version it speaks */
#define SP_FRAME_HEADER_BYTES     10   /* magic, version, kind, body_length */

#define SP_FIELD_HEADER_BYTES 5 /* tag u8, length u32 BE */
#define SP_TAG_REPO           0x01
#define SP_TAG_OUTCOME        0x02
#define SP_TAG_SCRIPT         0x03
#define SP_TAG_SCHEMA         0x04 /* v2 only */

#define SP_REQUEST_FIELD_COUNT (1 + SP_OUTCOME_COUNT + 1)

/* Bounds of a request body, computed from bounds.h: a header may announce
   nothing outside them, so a server can refuse before allocating.  */
#define SP_REQUEST_BODY_MIN_BYTES (SP_REQUEST_FIELD_COUNT * (SP_FIELD_HEADER_BYTES + 1))
#define SP_REQUEST_BODY_MAX_BYTES                                                                            \
  (SP_REQUEST_FIELD_COUNT * SP_FIELD_HEADER_BYTES + SP_REPO_MAX_BYTES                                        \
   + SP_OUTCOME_COUNT * SP_OUTCOME_MAX_BYTES + SP_SCRIPT_MAX_BYTES)
#define SP_REQUEST_FRAME_MAX_BYTES (SP_FRAME_HEADER_BYTES + SP_REQUEST_BODY_MAX_BYTES)

/* The same for a v2 request: REPO, SCHEMA, SCRIPT.  */
#define SP_REQUEST_V2_FIELD_COUNT    3
#define SP_REQUEST_V2_BODY_MIN_BYTES (SP_REQUEST_V2_FIELD_COUNT * (SP_FIELD_HEADER_BYTES + 1))
#define SP_REQUEST_V2_BODY_MAX_BYTES                                                                         \
  (SP_REQUEST_V2_FIELD_COUNT * SP_FIELD_HEADER_BYTES + SP_REPO_MAX_BYTES + SP_ANSWER_SCHEMA_MAX_BYTES        \
   + SP_SCRIPT_MAX_BYTES)
#define SP_REQUEST_V2_FRAME_MAX_BYTES (SP_FRAME_HEADER_BYTES + SP_REQUEST_V2_BODY_MAX_BYTES)

/* Either version: what a server reads a request frame up to, and what a
   buffer for any request holds.  v2's bound is the larger (a schema's 4,096
   bytes against three outcomes' 192; protocol.c asserts it).  */
#define SP_REQUEST_ANY_BODY_MAX_BYTES  SP_REQUEST_V2_BODY_MAX_BYTES
#define SP_REQUEST_ANY_FRAME_MAX_BYTES (SP_FRAME_HEADER_BYTES + SP_REQUEST_ANY_BODY_MAX_BYTES)

#define SP_RESPONSE_BODY_BYTES  1
#define SP_RESPONSE_FRAME_BYTES (SP_FRAME_HEADER_BYTES + SP_RESPONSE_BODY_BYTES)
/* A reader takes one byte more than a response, to tell a long reply apart.  */
#define SP_RESPONSE_READ_MAX_BYTES (SP_RESPONSE_FRAME_BYTES + 1)
#define SP_RESPONSE_ERROR          0x00

/* A v2 response: a status byte, then for an answer its canonical text,
   1..SP_ANSWER_OUTPUT_MAX_BYTES bytes (never longer than the script's
   output, docs/answer-schemas.md).  */
#define SP_RESPONSE_V2_STATUS_ERROR    0x00
#define SP_RESPONSE_V2_STATUS_ANSWER   0x01
#define SP_RESPONSE_V2_BODY_MIN_BYTES  1
#define SP_RESPONSE_V2_BODY_MAX_BYTES  (1 + SP_ANSWER_OUTPUT_MAX_BYTES)
#define SP_RESPONSE_V2_FRAME_MAX_BYTES (SP_FRAME_HEADER_BYTES + 1 + SP_ANSWER_OUTPUT_MAX_BYTES)
/* A v2 reader takes one byte more, to tell a long reply apart.  */
#define SP_RESPONSE_V2_READ_MAX_BYTES (SP_RESPONSE_V2_FRAME_MAX_BYTES + 1)

/* The handshake: a hello is a bare header; its reply is as long as a
   response, so that one read bound (SP_RESPONSE_READ_MAX_BYTES) serves
   both.  */
#define SP_HELLO_FRAME_BYTES       SP_FRAME_HEADER_BYTES
#define SP_HELLO_REPLY_BODY_BYTES  1
#define SP_HELLO_REPLY_FRAME_BYTES (SP_FRAME_HEADER_BYTES + SP_HELLO_REPLY_BODY_BYTES)

/* A decoded request.  Every field is a view into the decoded buffer, which
   must outlive it; values may contain any byte, including NUL.  version is
   SP_FRAME_VERSION_V1 (outcomes set, schema empty) or SP_FRAME_VERSION_V2
   (schema set, outcomes empty); an encoder refuses any other version and any
   mix.  */
struct sp_request
{
  uint8_t version;
  struct sp_bytes repo;
  struct sp_bytes outcomes[SP_OUTCOME_COUNT];
  struct sp_bytes schema;
  struct sp_bytes script;
};

/* Checks a frame header and returns its body length in *body_len.  The
   magic and kind must match, the version must be one the kind exists in
   (v1 or v2 for a request or a response, v1 only for a hello and its
   reply), and the body length must be possible for that kind and version
   (SP_REQUEST_BODY_MIN_BYTES..SP_REQUEST_BODY_MAX_BYTES for a v1 request,
   SP_REQUEST_V2_BODY_MIN_BYTES..SP_REQUEST_V2_BODY_MAX_BYTES for a v2 one,
   exactly SP_RESPONSE_BODY_BYTES for a v1 response,
   SP_RESPONSE_V2_BODY_MIN_BYTES..SP_RESPONSE_V2_BODY_MAX_BYTES for a v2 one,
   0 for a hello, SP_HELLO_REPLY_BODY_BYTES for its reply), so that a server
   can bound its read before it allocates anything: never above
   SP_REQUEST_ANY_BODY_MAX_BYTES for a request.  The version is hdr[4]
   (sp_frame_version).  */
int sp_frame_header_decode (const uint8_t hdr[SP_FRAME_HEADER_BYTES], uint8_t expected_kind, size_t *body_len,
                            sp_error_t *err);

/* The version byte of a header that sp_frame_header_decode accepted.  */
uint8_t sp_frame_version (const uint8_t hdr[SP_FRAME_HEADER_BYTES]);

/* Decodes a whole request frame, header included, of either version:
   buf[0..len) must be exactly one frame, with no byte missing or left over.
   On success *out points into buf, out->version is the frame's, and the
   other version's fields are empty.  Messages name tags, positions and
   lengths, never content.  */
int sp_request_decode (const uint8_t *buf, size_t len, struct sp_request *out, sp_error_t *err);

/* The frame size of req, or 0 when req breaks a structural rule (a version
   other than 1 or 2, a field of its version empty or above its bound, a
   field of the other version not empty) and so cannot be encoded.  */
size_t sp_request_frame_size (const struct sp_request *req);

/* Encodes req into buf[0..cap) and sets *len.  Refuses what the decoder
   would refuse, so that decode(encode(r)) == r always holds.  */
int sp_request_encode (const struct sp_request *req, uint8_t *buf, size_t cap, size_t *len, sp_error_t *err);

/* Encodes a response: index is SP_RESPONSE_ERROR or 1..SP_OUTCOME_COUNT.  */
int sp_response_encode (uint8_t index, uint8_t buf[SP_RESPONSE_FRAME_BYTES], sp_error_t *err);

/* Decodes a response: buf[0..len) must be exactly SP_RESPONSE_FRAME_BYTES
   with a valid header and an index of at most SP_OUTCOME_COUNT.  *index is
   SP_RESPONSE_ERROR or the 1-based outcome index.  */
int sp_response_decode (const uint8_t *buf, size_t len, uint8_t *index, sp_error_t *err);

/* Encodes a v2 response into buf[0..cap) and sets *len: ERROR when answer
   is NULL, else status 1 and answer's bytes, which must be
   1..SP_ANSWER_OUTPUT_MAX_BYTES long (not judged otherwise: the caller
   passes the canonical text sp_answer_schema_validate wrote).  */
int sp_response_v2_encode (const struct sp_bytes *answer, uint8_t *buf, size_t cap, size_t *len,
                           sp_error_t *err);

/* Decodes a v2 response: buf[0..len) must be exactly one v2 response
   frame, status 0 with nothing after it, or status 1 with
   1..SP_ANSWER_OUTPUT_MAX_BYTES bytes.  *answer views into buf; answer->len
   0 means ERROR.  Structural only: the client checks the text itself
   (sp_answer_value_check, answer.h).  */
int sp_response_v2_decode (const uint8_t *buf, size_t len, struct sp_bytes *answer, sp_error_t *err);

/* The kind a proxy reads a client's frame as: a hello when its header says
   so, a request otherwise (so that any other kind is refused as a request
   would be).  hdr must hold SP_FRAME_HEADER_BYTES.  */
uint8_t sp_frame_client_kind (const uint8_t hdr[SP_FRAME_HEADER_BYTES]);

/* Encodes the hello, SP_HELLO_FRAME_BYTES.  */
void sp_hello_encode (uint8_t buf[SP_HELLO_FRAME_BYTES]);

/* Decodes a hello: buf[0..len) must be exactly SP_HELLO_FRAME_BYTES, a
   header of kind hello with body_length 0.  */
int sp_hello_decode (const uint8_t *buf, size_t len, sp_error_t *err);

/* Encodes the proxy's reply to a hello: the constant naming
   SP_FRAME_VERSION_MAX, the highest version it speaks (it speaks every one
   below too).  The reply's own header is a v1 header, as the hello's.  */
void sp_hello_reply_encode (uint8_t buf[SP_HELLO_REPLY_FRAME_BYTES]);

/* Decodes a hello reply: buf[0..len) must be exactly
   SP_HELLO_REPLY_FRAME_BYTES with a valid header of kind hello reply; the
   version the proxy speaks goes to *version (not judged: the caller
   compares it with its own).  */
int sp_hello_reply_decode (const uint8_t *buf, size_t len, uint8_t *version, sp_error_t *err);

#endif
