/* A fixed-width unsigned big integer, enough to count a finite answer
   schema's values exactly up to 2^1024 and one past it (answer_schema.h).
   No allocation, no I/O; every operation says when its result does not fit
   rather than wrapping.  */
#ifndef SP_BASE_BIGNUM_H
#define SP_BASE_BIGNUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 33 limbs of 32 bits: 1,056 bits, room for 2^1024 + 1.  */
#define SP_BIGNUM_LIMBS 33
#define SP_BIGNUM_BITS  (SP_BIGNUM_LIMBS * 32)
/* Decimal digits of the largest value (2^1056 - 1 has 318), and a NUL.  */
#define SP_BIGNUM_DECIMAL_MAX 320

struct sp_bignum
{
  uint32_t limb[SP_BIGNUM_LIMBS]; /* least significant first */
};

void sp_bignum_set_u64 (struct sp_bignum *n, uint64_t value);

/* n = 2^exponent; false (n untouched) when exponent >= SP_BIGNUM_BITS.  */
bool sp_bignum_set_pow2 (struct sp_bignum *n, unsigned exponent);

/* -1, 0 or 1 as a is below, equal to or above b.  */
int sp_bignum_cmp (const struct sp_bignum *a, const struct sp_bignum *b);

/* out = a + b, or a * b; out may alias either operand.  False, with out
   unspecified, when the result needs more than SP_BIGNUM_BITS.  */
bool sp_bignum_add (struct sp_bignum *out, const struct sp_bignum *a, const struct sp_bignum *b);
bool sp_bignum_mul (struct sp_bignum *out, const struct sp_bignum *a, const struct sp_bignum *b);

/* The number of bits needed to write n: 0 for 0, 1 for 1, 3 for 4..7.  */
unsigned sp_bignum_bit_length (const struct sp_bignum *n);

bool sp_bignum_is_zero (const struct sp_bignum *n);
/* True when n is 2^k for some k >= 0.  */
bool sp_bignum_is_pow2 (const struct sp_bignum *n);

/* n in decimal, NUL-terminated, into buf; returns its length, or 0 when cap
   is below the length plus one (SP_BIGNUM_DECIMAL_MAX always suffices).  */
size_t sp_bignum_decimal (const struct sp_bignum *n, char *buf, size_t cap);

#endif
